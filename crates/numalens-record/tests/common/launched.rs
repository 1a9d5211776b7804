//! Helpers of the sampler-level tests: a launched program run to its end with its sampler
//! drained.

use std::process::ExitStatus;

use numalens_assemble::raw::PerfEvent;
use numalens_record::launch::Launched;

/// Drains the sampler until the program exits; its status and every record.
pub fn run_to_end(mut launched: Launched) -> (ExitStatus, Vec<PerfEvent>) {
    let mut sampler = launched.sampler.take().expect("launched with a sampler");
    let mut events = Vec::new();
    let status = loop {
        sampler.wait(20);
        sampler.drain(|e| events.push(e));
        if let Some(status) = launched.child.try_wait().unwrap() {
            sampler.drain(|e| events.push(e));
            break status;
        }
    };
    (status, events)
}
