//! placeholder, being written
use serde::Serialize;
use crate::layout::Schedule;
use super::Input;
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct CarrefourParams {}
pub(super) fn schedule(input: &Input) -> Schedule { super::first_touch::schedule(input) }
