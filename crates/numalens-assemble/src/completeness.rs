//! Whether a profile is complete, and the reasons it says why not.

use numalens_format::{Completeness, ProgramExit};
use numalens_preload::events::EventLog;

use crate::objects::ProcessView;
use crate::raw::RawRecording;

/// Whether the profile is complete, and why not: `reasons` found while reading, then what the
/// processes' logs, the sampler and the recording's end say.
pub fn completeness(
    raw: &RawRecording,
    (logs, views): (&[EventLog], &[ProcessView]),
    mut reasons: Vec<String>,
    recovered: Option<&str>,
    exit: Option<ProgramExit>,
) -> Completeness {
    if let Some(why) = recovered {
        reasons.insert(0, why.to_string());
    }
    let still_running = raw.outlived.as_ref().map_or(&[][..], |o| &o.still_running);
    for (log, view) in logs.iter().zip(views) {
        process_reasons(log, view, still_running, &mut reasons);
    }
    sampler_reasons(raw, still_running, &mut reasons);
    if let Some(signal) = exit.as_ref().and_then(|e| e.signal) {
        reasons.push(format!("the program was killed by signal {signal}"));
    }
    Completeness {
        complete: reasons.is_empty(),
        exit,
        reasons,
    }
}

/// What a process's log says of its end and of what the runtimes could not record.
fn process_reasons(
    log: &EventLog,
    view: &ProcessView,
    still_running: &[u32],
    reasons: &mut Vec<String>,
) {
    if still_running.contains(&log.header.pid) {
        // Its log ends where the recording stopped, not where the process did.
    } else if log.header.write_errno != 0 {
        let why = std::io::Error::from_raw_os_error(log.header.write_errno as i32);
        reasons.push(format!(
            "process {}: the runtime could not write its event log ({why}); what the process \
             did after that is missing",
            log.header.pid
        ));
    } else if let Some(signal) = view.signal {
        reasons.push(format!(
            "process {} died of signal {signal}",
            log.header.pid
        ));
    } else if !view.ended_cleanly {
        reasons.push(format!(
            "process {} ended without running its exit path (killed or _exit)",
            log.header.pid
        ));
    }
    if let n @ 1.. = log.header.inst_uncounted {
        let (threads, their) = if n == 1 {
            ("1 thread".to_string(), "its")
        } else {
            (format!("{n} threads"), "their")
        };
        reasons.push(format!(
            "process {}: {threads} could not create the inst backend's count files (no \
             descriptor or no space left): {their} accesses are not counted",
            log.header.pid
        ));
    }
    if log.truncated {
        reasons.push(format!(
            "{}: the last record was cut off",
            log.path.display()
        ));
    }
}

/// What the sampler and the recording's end say: records the kernel dropped, processes still
/// running when the recording was stopped.
fn sampler_reasons(raw: &RawRecording, still_running: &[u32], reasons: &mut Vec<String>) {
    if raw.lost > 0 {
        reasons.push(format!(
            "the kernel dropped {} records (page-fault samples, and any task or mapping records among them) because the ring buffer filled",
            raw.lost
        ));
    }
    if raw.lost_uncounted {
        reasons.push(
            "a ring buffer filled and this kernel (before Linux 6.0) does not count every \
             sample it drops: more samples than counted may be missing"
                .into(),
        );
    }
    if raw.outlived.as_ref().is_some_and(|o| o.stopped_early) {
        let pids: Vec<String> = still_running.iter().map(u32::to_string).collect();
        let which = match pids.as_slice() {
            [] => "processes of the program were".to_string(),
            [one] => format!("process {one} of the program was"),
            _ => format!("processes {} of the program were", pids.join(", ")),
        };
        reasons.push(format!(
            "the recording was stopped while {which} still running: their work after that \
             point is not in the profile"
        ));
    }
}
