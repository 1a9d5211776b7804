//! The exit page query: its shortcuts (mincore, numa_maps) give the answers move_pages gives.

mod common;

use std::collections::HashMap;
use std::process::Command;

use numalens_preload::events::{Event, find_event_logs, read_event_log};

/// (first page, count, node) runs of one query.
type Runs = Vec<(u64, u64, i64)>;

#[test]
fn shortcuts_answer_like_move_pages() {
    let d = tempfile::tempdir().unwrap();
    let exe = common::build_core_test(d.path(), "test_pages");
    let logs = d.path().join("logs");
    std::fs::create_dir(&logs).unwrap();
    let out = Command::new(&exe).arg(&logs).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let vals: HashMap<String, u64> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.parse().unwrap()))
        .collect();
    let files = find_event_logs(&logs).unwrap();
    let log = read_event_log(&files[0]).unwrap();
    let (mut phase, mut cheap, mut full): (u64, Runs, Runs) = (0, vec![], vec![]);
    for e in log.events() {
        match e.event {
            Event::Fork { child_pid } => phase = child_pid as u64,
            Event::PageNodes {
                first_page,
                count,
                node,
                ..
            } => match phase {
                1 => cheap.push((first_page, count, node)),
                2 => full.push((first_page, count, node)),
                _ => {}
            },
            _ => {}
        }
    }
    // Only the test's own mappings: the rest of the process may change between the two queries.
    let ranges = [
        ("written", 300),
        ("mixed", 400),
        ("untouched", 200),
        ("split", 64),
    ];
    let ours = |runs: &Runs| -> Runs {
        runs.iter()
            .copied()
            .filter(|(first, _, _)| {
                ranges
                    .iter()
                    .any(|(name, pages)| (vals[*name]..vals[*name] + pages * 4096).contains(first))
            })
            .collect()
    };
    let (cheap, full) = (ours(&cheap), ours(&full));
    assert_eq!(cheap, full);
    let node_of = |name: &str, page: u64| -> Option<i64> {
        let address = vals[name] + page * 4096;
        cheap
            .iter()
            .find(|(first, count, _)| (*first..first + count * 4096).contains(&address))
            .map(|r| r.2)
    };
    let (untouched, zero) = (-(libc::ENOENT as i64), -(libc::EFAULT as i64));
    for page in 0..300 {
        assert!(
            node_of("written", page).unwrap() >= 0,
            "written page {page}"
        );
    }
    for page in 0..400 {
        let node = node_of("mixed", page).unwrap();
        match page % 3 {
            0 => assert!(node >= 0, "written page {page}: {node}"),
            1 => assert_eq!(node, zero, "read page {page}"),
            _ => assert_eq!(node, untouched, "untouched page {page}"),
        }
    }
    for page in 0..200 {
        assert_eq!(node_of("untouched", page), Some(untouched));
    }
    for page in 0..64 {
        let hole = (16..32).contains(&page);
        assert_eq!(node_of("split", page).is_none(), hole, "split page {page}");
    }
}
