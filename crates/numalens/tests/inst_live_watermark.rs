//! While a sampled `inst` recording runs, the runtime's logs tell how far its samples can be
//! attributed (`numalens_assemble::live_watermark`): the hooks' sample path has each sampling
//! thread's buffer written out with a flush mark every 100 ms, so the watermark follows the run
//! instead of staying at the program's last allocation until its end.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use numalens_assemble::live_watermark::FlushWatermark;
use numalens_preload::events::Event;
use numalens_preload::events_tail::EventTail;

/// How long the program computes after its allocations.
const COMPUTE_MS: u64 = 1500;

#[test]
fn the_watermark_follows_a_computing_program() {
    let dir = tempfile::tempdir().unwrap();
    let program = dir.path().join("busy_loop");
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/inst_progs/busy_loop.c");
    let built = common::numalens(&[
        "cc",
        "-O2",
        "-pthread",
        source.to_str().unwrap(),
        "-o",
        program.to_str().unwrap(),
    ]);
    assert!(built.status.success(), "{}", common::text(&built.stderr));
    let profile = dir.path().join("p.numalens");
    let mut recorder = Command::new(env!("CARGO_BIN_EXE_numalens"))
        .args([
            "record",
            "--backend",
            "inst",
            "--inst-mode",
            "sampled",
            "-o",
        ])
        .arg(&profile)
        .arg(&program)
        .arg(COMPUTE_MS.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let events = profile.join(".events");
    let (mut tail, mut watermark) = (EventTail::default(), FlushWatermark::default());
    // The least and the greatest watermark seen before the program's end reached the log.
    let (mut first, mut last) = (None, None);
    let mut ended = false;
    while recorder.try_wait().unwrap().is_none() && !ended {
        for (pid, record) in tail.read_new(&events) {
            ended |= matches!(record.event, Event::End);
            watermark.observe(pid, &record);
        }
        if let Some(w) = watermark.watermark().filter(|w| *w > 0 && !ended) {
            first = first.or(Some(w));
            last = Some(w);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(recorder.wait().unwrap().success());
    let (first, last) = (first.expect("a watermark"), last.unwrap());
    // Marks every 100 ms keep it within a few hundred ms of the run even on a loaded machine;
    // without them it stays at the allocations' flush, which is before the computation.
    let advanced_ms = (last - first) / 1_000_000;
    assert!(
        advanced_ms >= COMPUTE_MS / 2,
        "the watermark advanced {advanced_ms} ms over a {COMPUTE_MS} ms computation"
    );
}
