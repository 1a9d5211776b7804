//! Guest tests through the library API. They boot QEMU, so they are ignored in a plain
//! `cargo test`; `tests/vm/run-all` runs them with `--ignored`.

use std::time::Duration;

use numalens_testbed::{Error, Guest, GuestSpec, ScaleOptions, Scenario, Thp, TopologyView};

fn two_nodes() -> GuestSpec {
    let text = include_str!("../../../tests/vm/topologies/two-nodes.json");
    let view = TopologyView::from_json(text).unwrap();
    let (mut spec, _) = GuestSpec::from_view(&view, &ScaleOptions::default()).unwrap();
    spec.timeout = Duration::from_secs(120);
    spec
}

#[test]
#[ignore = "boots a QEMU guest; run by tests/vm/run-all"]
fn files_and_exit_status_come_back() {
    let mut spec = two_nodes();
    spec.thp = Thp::Always;
    let script = "cat /sys/kernel/mm/transparent_hugepage/enabled > $OUT/thp\n\
                  head -c 100000 /dev/urandom > $OUT/random.bin\n\
                  sha256sum $OUT/random.bin > $OUT/random.sum\n\
                  mkdir -p $OUT/run.numalens/deeper && echo nested > $OUT/run.numalens/deeper/f\n\
                  exit 3\n";
    let outcome = Guest::new(spec)
        .run(&Scenario::from_script("api", script))
        .unwrap();
    assert_eq!(outcome.exit_status, 3);
    assert!(outcome.file_text("thp").unwrap().contains("[always]"));
    let data = &outcome.files["random.bin"];
    assert_eq!(data.len(), 100_000);
    let sum = numalens_testbed::framing::hex(&sha2_digest(data));
    assert!(outcome.file_text("random.sum").unwrap().starts_with(&sum));
    assert_eq!(
        outcome.file_text("run.numalens/deeper/f").as_deref(),
        Some("nested\n")
    );
    let boot = outcome.boot_time.expect("READY seen");
    assert!(boot < Duration::from_secs(30), "boot took {boot:?}");
}

fn sha2_digest(data: &[u8]) -> Vec<u8> {
    use sha2::Digest;
    sha2::Sha256::digest(data).to_vec()
}

#[test]
#[ignore = "boots a QEMU guest; run by tests/vm/run-all"]
fn a_hanging_guest_is_killed_with_its_console_tail() {
    let mut spec = two_nodes();
    spec.timeout = Duration::from_secs(15);
    let scenario = Scenario::from_script("hang", "echo about-to-hang\nsleep 600\n");
    let started = std::time::Instant::now();
    match Guest::new(spec).run(&scenario) {
        Err(Error::Timeout { console_tail, .. }) => {
            assert!(console_tail.contains("about-to-hang"), "{console_tail}")
        }
        other => panic!("expected a timeout, got {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(30));
}

#[test]
#[ignore = "boots a QEMU guest; run by tests/vm/run-all"]
fn a_missing_binary_is_a_clear_error_before_booting() {
    let mut spec = two_nodes();
    spec.binaries.push("/nonexistent/numa_tool".into());
    let e = Guest::new(spec)
        .run(&Scenario::from_script("x", "true"))
        .unwrap_err();
    assert!(e.to_string().contains("/nonexistent/numa_tool"), "{e}");
}
