//! The rings are drained while the recorder's loop is busy with other work. A program pinned to
//! one CPU first-touches 30 000 pages over 3 s, recorded with rings of 64 pages (about 4 600
//! samples each); the live hook holds the loop for 3.5 s at its first turn, as a slow placement
//! step would. Drained by the loop between its other work, the ring filled within the first
//! quarter second of that and the kernel dropped most of the samples; drained by a thread of its
//! own, the ring is emptied at each 64 KiB while the loop waits, and nothing is lost.

mod common;

use std::time::Duration;

use common::record::{Printed, build, printed};
use numalens_format::{Migration, Profile};
use numalens_record::record::{LiveHook, LiveView, RecordOptions};
use numalens_record::session::record_with;

/// Holds the loop at its first turn.
struct SlowFirstTurn {
    held: bool,
}

impl LiveHook for SlowFirstTurn {
    fn tick(&mut self, _live: LiveView<'_>) -> Vec<Migration> {
        if !self.held {
            self.held = true;
            std::thread::sleep(Duration::from_millis(3500));
        }
        Vec::new()
    }
}

#[test]
fn a_loop_held_up_by_its_hook_loses_no_sample() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path(), "gcc", &["paced.c"], "paced", &["-O2"]);
    let pages: u64 = 30_000;
    let args = [
        dir.path().join("stdout.txt").into(),
        pages.to_string().into(),
        "3000".into(),
    ];
    let mut opts = RecordOptions::new(&exe, args.to_vec(), dir.path().join("p.numalens"));
    opts.ring_pages = 64;
    let mut hook = SlowFirstTurn { held: false };
    let recorded = record_with(&opts, Some(&mut hook)).unwrap();
    assert_eq!(recorded.exit.code(), Some(0));
    assert!(hook.held, "the hook was never called");
    assert_eq!(printed(dir.path()).num("pages"), pages);
    let s = &recorded.summary;
    eprintln!("{} samples kept, {} lost", s.samples, s.lost);
    assert_eq!(s.lost, 0, "{s:?}");
    assert!(s.samples >= pages, "{s:?}");
    let profile = Profile::open(&recorded.profile).unwrap();
    let meta = profile.meta();
    assert!(
        meta.completeness.complete,
        "{:?}",
        meta.completeness.reasons
    );
}
