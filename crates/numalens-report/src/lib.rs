//! Renderings of the report model.
