//! The recorder's status line while the program runs.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use numalens_assemble::raw::PerfEvent;
use numalens_preload::events_tail::ObjectCounter;

use crate::ring_drain::RingDrain;

/// `elapsed  faults  objects  tasks  lost` on one stderr line, redrawn in place, on a terminal
/// only.
pub struct StatusLine {
    enabled: bool,
    last: Option<Instant>,
    events_dir: PathBuf,
    objects: ObjectCounter,
}

impl StatusLine {
    pub fn new(wanted: bool, events_dir: &Path) -> Self {
        StatusLine {
            enabled: wanted && std::io::stderr().is_terminal(),
            last: None,
            events_dir: events_dir.to_path_buf(),
            objects: ObjectCounter::default(),
        }
    }

    /// Redraws the line at most every 250 ms: `faults` and `tasks` are those drained so far,
    /// `lost` what the kernel's LOST records said.
    pub fn update(
        &mut self,
        elapsed: Duration,
        (faults, tasks, lost): (usize, &[PerfEvent], u64),
        rings: Option<&RingDrain>,
    ) {
        if !self.enabled
            || self
                .last
                .is_some_and(|t| t.elapsed() < Duration::from_millis(250))
        {
            return;
        }
        self.last = Some(Instant::now());
        self.objects.update(&self.events_dir);
        let threads = tasks
            .iter()
            .filter(|e| matches!(e, PerfEvent::Fork { .. }))
            .count();
        // The kernel's own count, when it keeps one: LOST records come late or never.
        let lost = rings
            .and_then(RingDrain::lost_counted)
            .map_or(lost, |counted| counted.max(lost));
        let _ = write!(
            std::io::stderr(),
            "\r\x1b[Knumalens: {:>6.1}s  {} faults  {} objects  {} new tasks  {} lost",
            elapsed.as_secs_f64(),
            faults,
            self.objects.objects,
            threads,
            lost
        );
    }

    pub fn finish(&mut self) {
        if self.enabled && self.last.is_some() {
            let _ = write!(std::io::stderr(), "\r\x1b[K");
        }
    }
}
