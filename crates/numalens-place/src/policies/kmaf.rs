//! placeholder, being written
use serde::Serialize;
use crate::layout::Schedule;
use super::Input;
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct KmafParams {}
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KmafDecision { None }
pub fn kmaf_decide() -> KmafDecision { KmafDecision::None }
pub fn map_threads() {}
pub(super) fn schedule(input: &Input) -> Schedule { super::first_touch::schedule(input) }
pub(super) fn online_schedule(input: &Input) -> Schedule { super::first_touch::schedule(input) }
