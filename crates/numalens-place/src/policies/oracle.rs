//! placeholder, being written
use crate::layout::Schedule;
use crate::error::PlaceError;
use super::Input;
pub struct OracleReport {}
pub fn lower_bound_s() -> f64 { 0.0 }
pub(super) fn schedule(input: &Input) -> Result<(Schedule, OracleReport), PlaceError> { Ok((super::first_touch::schedule(input), OracleReport{})) }
