//! Renderings of the report model ([`numalens_analyze::ReportModel`]). The model is built by
//! `numalens-analyze`; this crate only lays it out, so every rendering shows the same numbers.
//! JSON is the model itself, serialised by the caller.

mod analysis;
mod groups;
pub mod html;
mod layout;
mod printable;
mod sources;
mod text;
mod whatif;

pub use text::render_text;
pub use whatif::render_what_if;

/// What an object's site is: a static is defined at a line of the source, not allocated by a
/// call stack.
pub(crate) fn site_label(kind: &str) -> &'static str {
    if kind == "static" {
        "defined at"
    } else {
        "allocated at"
    }
}
