//! While a sampled `inst` recording runs, the runtime's logs tell how far its samples can be
//! attributed (`numalens_assemble::live_watermark`): the hooks' sample path has each sampling
//! thread's buffer written out with a flush mark every 100 ms, so the watermark follows the run
//! instead of staying at the program's last allocation until its end; and no record reaches
//! the logs older than a watermark taken before it, even a thread's that another thread's
//! flush marks have overtaken.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use numalens_assemble::live_watermark::FlushWatermark;
use numalens_preload::events::{Event, TimedEvent};
use numalens_preload::events_tail::EventTail;

/// How long the program computes after its allocations.
const COMPUTE_MS: u64 = 1500;

/// Builds `tests/inst_progs/NAME.c` with `numalens cc` into `dir`.
fn build(dir: &Path, name: &str) -> PathBuf {
    let program = dir.join(name);
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/inst_progs/{name}.c"));
    let built = common::numalens(&[
        "cc",
        "-O2",
        "-pthread",
        source.to_str().unwrap(),
        "-o",
        program.to_str().unwrap(),
    ]);
    assert!(built.status.success(), "{}", common::text(&built.stderr));
    program
}

/// Starts a sampled recording of `program ARG` into `profile`, keeping its events directory.
fn record(program: &Path, arg: u64, profile: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_numalens"))
        .args([
            "record",
            "--backend",
            "inst",
            "--inst-mode",
            "sampled",
            "-o",
        ])
        .arg(profile)
        .arg(program)
        .arg(arg.to_string())
        .env("NUMALENS_KEEP_EVENTS", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// One look at the logs while the program ran: the records it read, and the watermark after.
struct Look {
    read: Vec<(u32, TimedEvent)>,
    watermark: Option<u64>,
}

/// Reads the logs every 20 ms until the recorder exits, then once more (the events directory
/// is kept): the last look has no watermark.
fn follow(mut recorder: Child, events: &Path) -> Vec<Look> {
    let (mut tail, mut watermark) = (EventTail::default(), FlushWatermark::default());
    let mut looks = Vec::new();
    while recorder.try_wait().unwrap().is_none() {
        let read = tail.read_new(events);
        read.iter().for_each(|(pid, r)| watermark.observe(*pid, r));
        looks.push(Look {
            read,
            watermark: watermark.watermark(),
        });
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(recorder.wait().unwrap().success());
    looks.push(Look {
        read: tail.read_new(events),
        watermark: None,
    });
    looks
}

#[test]
fn the_watermark_follows_a_computing_program() {
    let dir = tempfile::tempdir().unwrap();
    let program = build(dir.path(), "busy_loop");
    let profile = dir.path().join("p.numalens");
    let looks = follow(
        record(&program, COMPUTE_MS, &profile),
        &profile.join(".events"),
    );
    // The watermarks seen before the program's end reached the log.
    let before_end: Vec<u64> = looks
        .iter()
        .take_while(|l| !l.read.iter().any(|(_, r)| matches!(r.event, Event::End)))
        .filter_map(|l| l.watermark.filter(|w| *w > 0))
        .collect();
    let (first, last) = (before_end[0], *before_end.last().unwrap());
    // Marks every 100 ms keep it within a few hundred ms of the run even on a loaded machine;
    // without them it stays at the allocations' flush, which is before the computation.
    let advanced_ms = (last - first) / 1_000_000;
    assert!(
        advanced_ms >= COMPUTE_MS / 2,
        "the watermark advanced {advanced_ms} ms over a {COMPUTE_MS} ms computation"
    );
}

/// A worker allocates a small block and blocks without sampling while the main thread computes
/// and writes flush marks: the worker's allocation reaches the log only when it exits, a second
/// after the main thread's logged time has passed it. The main thread's announcement of the
/// worker holds the watermark; without it the watermark passes the unread allocation.
#[test]
fn no_record_reaches_the_log_older_than_an_earlier_watermark() {
    let dir = tempfile::tempdir().unwrap();
    let program = build(dir.path(), "idle_worker");
    let profile = dir.path().join("p.numalens");
    let looks = follow(
        record(&program, COMPUTE_MS, &profile),
        &profile.join(".events"),
    );
    let mut highest: Option<u64> = None;
    let mut overtaken = false;
    let mut main_logged = 0;
    for look in &looks {
        for (pid, r) in &look.read {
            // A flush mark written after the process's end changes no object.
            if let Some(w) = highest.filter(|_| !matches!(r.event, Event::FlushMark)) {
                assert!(
                    r.time_ns >= w,
                    "process {pid}: {r:?} read after the watermark {w}"
                );
            }
            let small_alloc = matches!(r.event, Event::Alloc { size: 65536, .. });
            if small_alloc && r.tid != *pid {
                overtaken = main_logged > r.time_ns + COMPUTE_MS / 2 * 1_000_000;
            }
            if r.tid == *pid {
                main_logged = main_logged.max(r.time_ns);
            }
        }
        highest = highest.max(look.watermark);
    }
    assert!(
        overtaken,
        "the main thread's logged time did not pass the worker's allocation by half the run \
         before the allocation reached the log"
    );
}
