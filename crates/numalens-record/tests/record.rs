//! `record` end to end on real programs: first touchers per page, exit statuses, crashes, kills,
//! static programs, bad output paths.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use numalens_format::{Object, Profile, Sample, SampleKind, Thread};
use numalens_record::record::RecordOptions;
use numalens_record::session::{Recorded, record};

fn compile(dir: &Path, source: &str, extra: &[&str]) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/record_progs")
        .join(source);
    let exe = dir.join(format!(
        "{}{}",
        source.trim_end_matches(".c"),
        extra.join("")
    ));
    let ok = Command::new("gcc")
        .args(["-O1", "-g", "-pthread"])
        .args(extra)
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .status()
        .unwrap();
    assert!(ok.success(), "compiling {source}");
    exe
}

fn options(dir: &Path, program: &Path, args: &[&str]) -> RecordOptions {
    RecordOptions::new(
        "sh",
        vec![
            "-c".into(),
            format!(
                "exec {} {} > {}",
                program.display(),
                args.join(" "),
                dir.join("stdout.txt").display()
            )
            .into(),
        ],
        dir.join("p.numalens"),
    )
}

/// `name value` lines printed by the program.
fn printed(dir: &Path) -> HashMap<String, String> {
    std::fs::read_to_string(dir.join("stdout.txt"))
        .unwrap()
        .lines()
        .filter_map(|l| {
            l.rsplit_once(' ')
                .map(|(k, v)| (k.to_string(), v.to_string()))
        })
        .collect()
}

fn hex(text: &str) -> u64 {
    u64::from_str_radix(text.trim_start_matches("0x"), 16).unwrap()
}

fn run(dir: &Path, args: &[&str]) -> (Recorded, Profile) {
    let exe = compile(dir, "first_touch.c", &[]);
    let recorded = record(&options(dir, &exe, args)).unwrap();
    let profile = Profile::open(&recorded.profile).unwrap();
    (recorded, profile)
}

#[test]
fn first_touchers_of_every_page_and_their_objects() {
    let dir = tempfile::tempdir().unwrap();
    let (recorded, profile) = run(dir.path(), &[]);
    assert_eq!(recorded.exit.code(), Some(5));
    let p = printed(dir.path());
    let tid = |k: &str| p[k].parse::<u32>().unwrap();
    let (by_main, by_halves) = (hex(&p["by_main"]), hex(&p["by_halves"]));
    let objects = profile.read_all::<Object>().unwrap();
    let samples = profile.read_all::<Sample>().unwrap();
    let bytes = 8u64 << 20;
    let mut pages = HashMap::new();
    for s in samples.iter().filter(|s| s.kind == SampleKind::FirstTouch) {
        pages.entry(s.address & !4095).or_insert(s);
    }
    let first_page = |a: u64| (a + 4095) & !4095;
    for page in (first_page(by_main)..by_main + bytes - 4096).step_by(4096) {
        let s = pages
            .get(&page)
            .unwrap_or_else(|| panic!("page {page:#x} of by_main not seen"));
        assert_eq!(s.tid, tid("main"));
        let object = &objects[s.object_id.unwrap() as usize];
        assert!(object.name.contains("first_touch.c:25"), "{}", object.name);
    }
    for page in (first_page(by_halves)..by_halves + bytes - 4096).step_by(4096) {
        // The page holding the boundary between the halves is written by both threads.
        if (page..page + 4096).contains(&(by_halves + bytes / 2)) {
            continue;
        }
        let half = (page - by_halves) / (bytes / 2);
        let s = pages[&page];
        assert_eq!(s.tid, tid(&format!("worker {half}")), "page {page:#x}");
        assert!(
            objects[s.object_id.unwrap() as usize]
                .name
                .contains("first_touch.c:26")
        );
    }
    let threads = profile.read_all::<Thread>().unwrap();
    let logical: HashMap<u32, u32> = threads.iter().map(|t| (t.tid, t.logical_id)).collect();
    assert_eq!(logical[&tid("main")], 0);
    assert_eq!(logical[&tid("worker 0")], 1);
    assert_eq!(logical[&tid("worker 1")], 2);
    let meta = profile.meta();
    assert!(meta.completeness.complete, "{:?}", meta.completeness);
    assert_eq!(meta.backend.name, "faults");
    assert!(recorded.summary.first_touches_attributed * 100 >= recorded.summary.first_touches * 99);
    assert!(
        !dir.path().join("p.numalens/.events").exists(),
        "raw logs are cleaned up"
    );
}

#[test]
fn a_crash_keeps_the_profile_marked_incomplete() {
    let dir = tempfile::tempdir().unwrap();
    let (recorded, profile) = run(dir.path(), &["segv"]);
    use std::os::unix::process::ExitStatusExt;
    // The shell's `exec` makes the program the child itself, so its signal is the child's.
    assert_eq!(recorded.exit.signal(), Some(libc::SIGSEGV));
    let c = &profile.meta().completeness;
    assert!(!c.complete);
    assert!(
        c.reasons.iter().any(|r| r.contains("signal 11")),
        "{:?}",
        c.reasons
    );
    assert!(
        profile.meta().tables["samples"].rows > 4000,
        "samples before the crash are kept"
    );
}

#[test]
fn a_killed_program_still_leaves_a_profile() {
    let dir = tempfile::tempdir().unwrap();
    let (recorded, profile) = run(dir.path(), &["kill"]);
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(recorded.exit.signal(), Some(libc::SIGKILL));
    let c = &profile.meta().completeness;
    assert!(!c.complete);
    assert!(
        c.reasons.iter().any(|r| r.contains("signal 9")),
        "{:?}",
        c.reasons
    );
    // The runtime's last unflushed buffers die with the program; the kernel's samples do not.
    assert!(profile.meta().tables["samples"].rows > 4000);
}

#[test]
fn a_static_program_is_recorded_without_objects() {
    let dir = tempfile::tempdir().unwrap();
    let exe = compile(dir.path(), "first_touch.c", &["-static"]);
    let mut opts = options(dir.path(), &exe, &[]);
    opts.program = exe.clone().into();
    opts.args = vec![];
    let recorded = record(&opts).unwrap();
    assert!(
        recorded
            .notes
            .iter()
            .any(|n| n.contains("statically linked")),
        "{:?}",
        recorded.notes
    );
    assert_eq!(recorded.exit.code(), Some(5));
    assert!(recorded.summary.first_touches >= 4096);
}

#[test]
fn an_existing_output_is_refused_before_the_program_runs() {
    let dir = tempfile::tempdir().unwrap();
    let exe = compile(dir.path(), "first_touch.c", &[]);
    let opts = options(dir.path(), &exe, &[]);
    std::fs::create_dir(&opts.output).unwrap();
    let err = record(&opts).err().unwrap().to_string();
    assert!(err.contains("already exists"), "{err}");
    assert!(
        !dir.path().join("stdout.txt").exists(),
        "the program did not run"
    );
}
