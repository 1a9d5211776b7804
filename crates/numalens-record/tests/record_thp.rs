//! Transparent huge pages: a first touch of a THP-backed region places 2 MiB at once, so the
//! profile counts it as one page of 2 MiB, while the same pattern on 4 KiB pages gives one sample
//! per 4 KiB page.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

use numalens_format::{Profile, Sample, SampleKind};
use numalens_record::pagesize::{HUGE_PAGE, ThpMode};
use numalens_record::record::RecordOptions;
use numalens_record::session::record;

fn compile(dir: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/thp_progs/huge.c");
    let exe = dir.join("huge");
    let ok = Command::new("gcc")
        .args(["-O1", "-g", "-pthread", "-o"])
        .arg(&exe)
        .arg(&src)
        .status()
        .unwrap();
    assert!(ok.success());
    exe
}

fn printed(path: &Path) -> HashMap<String, u64> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(k, v)| {
            let v = v.trim();
            let n = match v.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16).unwrap(),
                None => v.parse().unwrap(),
            };
            (k.to_string(), n)
        })
        .collect()
}

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

#[test]
fn a_huge_page_is_one_first_touch_of_2_mib_and_small_pages_one_per_4_kib() {
    let dir = tempfile::tempdir().unwrap();
    let exe = compile(dir.path());
    let out = dir.path().join("out.txt");
    let command = format!("exec {} 8 > {}", exe.display(), out.display());
    let opts = RecordOptions::new(
        "sh",
        vec!["-c".into(), command.into()],
        dir.path().join("p.numalens"),
    );
    let recorded = record(&opts).unwrap();
    assert!(recorded.exit.success());
    let p = printed(&out);
    let (huge, small, bytes) = (p["huge"], p["small"], p["bytes"]);
    let (tid1, tid2) = (p["tid1"] as u32, p["tid2"] as u32);
    let profile = Profile::open(&recorded.profile).unwrap();
    let settings = &profile.meta().backend.settings;
    let mode = ThpMode::parse(&format!(
        "[{}]",
        settings["transparent_hugepage"].as_str().unwrap()
    ));
    let samples = profile.read_all::<Sample>().unwrap();

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
