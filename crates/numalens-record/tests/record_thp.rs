//! Transparent huge pages: a first touch of a THP-backed region places 2 MiB at once, so the
//! profile counts it as one page of 2 MiB, while the same pattern on 4 KiB pages gives one sample
//! per 4 KiB page.

mod common;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use common::record::{Printed, build, line_of, printed};
use numalens_assemble::pagesize::{HUGE_PAGE, ThpMode};
use numalens_format::{CodeLocation, Object, ObjectKind, Profile, Sample, SampleKind};
use numalens_record::record::RecordOptions;
use numalens_record::session::{Recorded, record};

/// First-touch samples in [start, start+len): (page start, page size) → tid.
fn first_touches(samples: &[Sample], start: u64, len: u64) -> BTreeMap<(u64, u32), u32> {
    samples
        .iter()
        .filter(|s| s.kind == SampleKind::FirstTouch && s.address >= start)
        .filter(|s| s.address < start + len)
        .map(|s| {
            let size = s.page_size.expect("every fault has a page size");
            ((s.address / size as u64 * size as u64, size), s.tid)
        })
        .collect()
}

fn record_huge(dir: &Path, extra: &[&str]) -> (Recorded, HashMap<String, String>) {
    let exe = build(dir, "gcc", &["huge.c"], "huge", extra);
    let out = dir.join("stdout.txt");
    let command = format!("exec {} 8 > {}", exe.display(), out.display());
    let opts = RecordOptions::new(
        "sh",
        vec!["-c".into(), command.into()],
        dir.join("p.numalens"),
    );
    let recorded = record(&opts).unwrap();
    assert!(recorded.exit.success());
    (recorded, printed(dir))
}

/// The code location of every first touch in [start, start+len).
fn touching_code(profile: &Profile, start: u64, len: u64) -> BTreeSet<(String, String, u32)> {
    let code: HashMap<(u32, u64), CodeLocation> = profile
        .read_all::<CodeLocation>()
        .unwrap()
        .into_iter()
        .map(|c| ((c.pid, c.ip), c))
        .collect();
    let samples = profile.read_all::<Sample>().unwrap();
    samples
        .iter()
        .filter(|s| s.kind == SampleKind::FirstTouch)
        .filter(|s| s.address >= start && s.address < start + len)
        .map(|s| {
            let c = &code[&(s.pid, s.ip.unwrap())];
            let file = c.file.clone().unwrap_or_default();
            let file = file.rsplit('/').next().unwrap().to_string();
            (
                c.function.clone().unwrap_or_default(),
                file,
                c.line.unwrap_or(0),
            )
        })
        .collect()
}

#[test]
fn first_touches_name_the_line_of_code_that_made_them() {
    for (label, extra) in [("dynamic", &[][..]), ("static", &["-static"][..])] {
        let dir = tempfile::tempdir().unwrap();
        let (recorded, p) = record_huge(dir.path(), extra);
        let profile = Profile::open(&recorded.profile).unwrap();
        let code = touching_code(&profile, p.addr("small"), p.num("bytes"));
        let expected = (
            "touch".to_string(),
            "huge.c".to_string(),
            line_of("huge.c", "p[i] = 1;"),
        );
        assert_eq!(code, BTreeSet::from([expected]), "{label}");
    }
}

#[test]
fn a_huge_page_is_one_first_touch_of_2_mib_and_small_pages_one_per_4_kib() {
    let dir = tempfile::tempdir().unwrap();
    let (recorded, p) = record_huge(dir.path(), &[]);
    let (huge, small, bytes) = (p.addr("huge"), p.addr("small"), p.num("bytes"));
    let (tid1, tid2) = (p.num("tid1") as u32, p.num("tid2") as u32);
    let profile = Profile::open(&recorded.profile).unwrap();
    let settings = &profile.meta().backend.settings;
    let mode = ThpMode::parse(&format!(
        "[{}]",
        settings["transparent_hugepage"].as_str().unwrap()
    ));
    let samples = profile.read_all::<Sample>().unwrap();
    let stacks: Vec<(u32, String, u64)> = profile
        .read_all::<Object>()
        .unwrap()
        .into_iter()
        .filter(|o| o.kind == ObjectKind::Stack && o.name.starts_with("stack[T"))
        .map(|o| (o.pid, o.name, o.start))
        .collect();
    let distinct: BTreeSet<_> = stacks.iter().collect();
    assert_eq!(
        distinct.len(),
        stacks.len(),
        "one stack per thread: {stacks:?}"
    );
    for name in ["stack[T1]", "stack[T2]"] {
        assert!(stacks.iter().any(|(_, n, _)| n == name), "{stacks:?}");
    }

    // MADV_NOHUGEPAGE: one 4 KiB first touch per page, each half by its thread.
    let got = first_touches(&samples, small, bytes);
    assert_eq!(got.len() as u64, bytes / 4096);
    for ((page, size), tid) in &got {
        assert_eq!(*size, 4096);
        let expected = if page - small < bytes / 2 { tid1 } else { tid2 };
        assert_eq!(*tid, expected, "page {page:#x}");
    }

    // MADV_HUGEPAGE: one 2 MiB first touch per huge page when THP is available.
    let got = first_touches(&samples, huge, bytes);
    let huge_pages = got.values().count() as u64;
    if mode == ThpMode::Never {
        assert_eq!(huge_pages, bytes / 4096, "no THP: 4 KiB pages");
        return;
    }
    assert_eq!(huge_pages, bytes / HUGE_PAGE, "{got:x?}");
    for ((page, size), tid) in &got {
        assert_eq!(*size as u64, HUGE_PAGE);
        let expected = if page - huge < bytes / 2 { tid1 } else { tid2 };
        assert_eq!(*tid, expected, "huge page {page:#x}");
    }
}
