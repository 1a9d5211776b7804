//! Helpers shared by the recorder's tests.
#![allow(dead_code)]

pub mod launched;
pub mod record;
