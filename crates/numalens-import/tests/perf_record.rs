//! A real recording: `perf record -e page-faults -d` of a two-thread program, imported and
//! compared sample by sample with `perf script` reading the same file.

mod common;

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::path::Path;
use std::process::Command;

use numalens_format::{Object, Profile, SampleKind, Thread};
use numalens_import::{ImportOptions, import};

const PROGRAM: &str = r#"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#define SIZE (8 << 20)
static char *buffer;
static char table[1 << 20];
static void *fill(void *arg) {
    long half = (long)arg;
    memset(buffer + half * (SIZE / 2), 1, SIZE / 2);
    return 0;
}
int main(void) {
    buffer = malloc(SIZE);
    pthread_t t[2];
    for (long i = 0; i < 2; i++) pthread_create(&t[i], 0, fill, (void *)i);
    for (int i = 0; i < 2; i++) pthread_join(t[i], 0);
    memset(table, 2, sizeof table);
    return buffer[SIZE - 1] != 1 || table[5] != 2;
}
"#;

fn record(dir: &Path) -> std::path::PathBuf {
    let source = dir.join("fill.c");
    std::fs::write(&source, PROGRAM).unwrap();
    let program = dir.join("fill");
    let cc = Command::new("gcc")
        .args(["-O1", "-g", "-pthread", "-o"])
        .arg(&program)
        .arg(&source)
        .status()
        .unwrap();
    assert!(cc.success());
    let data = dir.join("perf.data");
    let args = ["record", "-q", "-e", "page-faults", "-c", "1", "-d", "-o"].map(OsStr::new);
    common::perf(
        args.into_iter()
            .chain([data.as_os_str(), program.as_os_str()]),
    );
    data
}

#[test]
fn a_page_fault_recording_imports_as_perf_script_decodes_it() {
    let dir = tempfile::tempdir().unwrap();
    let data = record(dir.path());
    let profile = dir.path().join("fill.numalens");
    let imported = import(&data, &profile, &ImportOptions { min_object: 4096 }).unwrap();
    assert_eq!(imported.accesses, 0);
    assert_eq!(imported.truncated, 0);

    // tid, time, address, ip of every sample, as perf decodes them and as numalens did.
    let theirs: BTreeSet<(u32, u64, u64, u64)> = common::perf_script(&data, "tid,time,addr,ip")
        .iter()
        .map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let hex = |s: &str| u64::from_str_radix(s, 16).unwrap();
            (
                f[0].parse().unwrap(),
                common::script_time_ns(f[1]),
                hex(f[2]),
                hex(f[3]),
            )
        })
        .collect();
    let samples = common::samples(&profile);
    let ours: BTreeSet<(u32, u64, u64, u64)> = samples
        .iter()
        .map(|s| (s.tid, s.time_ns, s.address, s.ip.unwrap()))
        .collect();
    assert!(theirs.len() > 2048, "{} samples", theirs.len());
    assert_eq!(samples.len(), theirs.len(), "one row per sample");
    assert_eq!(ours, theirs);

    // The 8 MiB buffer is one object, first touched half by each worker thread.
    let p = Profile::open(&profile).unwrap();
    let objects = p.read_all::<Object>().unwrap();
    let threads = p.read_all::<Thread>().unwrap();
    let buffer = objects
        .iter()
        .find(|o| o.size >= 8 << 20 && o.size < 9 << 20)
        .expect("the buffer's mapping is an object");
    let touches: Vec<u32> = samples
        .iter()
        .filter(|s| s.object_id == Some(buffer.object_id) && s.kind == SampleKind::FirstTouch)
        .map(|s| s.tid)
        .collect();
    let by = |tid: u32| touches.iter().filter(|&&t| t == tid).count();
    let workers: Vec<u32> = threads
        .iter()
        .filter(|t| t.logical_id > 0)
        .map(|t| t.tid)
        .collect();
    assert_eq!(workers.len(), 2, "{threads:?}");
    for w in workers {
        assert!(
            by(w) >= 1000,
            "thread {w} first touched {} pages of the buffer",
            by(w)
        );
    }
    assert_eq!(p.meta().backend.name, "faults");
    // perf's command line without `--`: the program is the word named as the process.
    let program = dir.path().join("fill").display().to_string();
    assert_eq!(p.meta().command, vec![program]);

    // The program's static array is named from its symbol table, placed at its load address.
    let table = objects
        .iter()
        .find(|o| o.name == "table")
        .expect("the static is an object");
    assert_eq!(
        (table.kind, table.size),
        (numalens_format::ObjectKind::Static, 1 << 20)
    );
    let in_table = samples
        .iter()
        .filter(|s| s.object_id == Some(table.object_id))
        .count();
    // Its first page may hold other data touched before it.
    assert!(
        in_table >= 255,
        "{in_table} faults in the 256 pages of the static"
    );

    // The program rebuilt differently after the recording: its file is not the one recorded
    // (another build id), so its symbols do not name the recording's addresses.
    let source = dir.path().join("fill.c");
    let changed = PROGRAM.replace("table[1 << 20]", "table[1 << 19]");
    std::fs::write(&source, changed).unwrap();
    let cc = Command::new("gcc")
        .args(["-O1", "-g", "-pthread", "-o"])
        .arg(dir.path().join("fill"))
        .arg(&source)
        .status()
        .unwrap();
    assert!(cc.success());
    let again = dir.path().join("rebuilt.numalens");
    import(&data, &again, &ImportOptions { min_object: 4096 }).unwrap();
    let objects = Profile::open(&again).unwrap().read_all::<Object>().unwrap();
    assert!(
        objects.iter().all(|o| o.name != "table"),
        "a rebuilt program's static was used"
    );
}
