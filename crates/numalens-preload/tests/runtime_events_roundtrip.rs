//! C writes every record kind with the core's API; the Rust reader gets the same values back.
//! Also checks that the kind numbers in numalens_events.h are the ones `events` knows.

use std::process::Command;

use numalens_preload::events::{AllocFn, Event, RecordKind, find_event_logs, read_event_log};

mod common;
use common::{build_test_core as build_writer, runtime_dir};

#[test]
fn every_kind_round_trips_field_by_field() {
    let d = tempfile::tempdir().unwrap();
    let exe = build_writer(d.path());
    let logs = d.path().join("logs");
    std::fs::create_dir(&logs).unwrap();
    let child = Command::new(&exe).arg("write").arg(&logs).spawn().unwrap();
    let pid = child.id();
    assert!(child.wait_with_output().unwrap().status.success());
    let files = find_event_logs(&logs).unwrap();
    assert_eq!(files.len(), 1);
    assert!(
        files[0].ends_with(format!("events-{pid}-e3.bin")),
        "{files:?}"
    );
    let log = read_event_log(&files[0]).unwrap();
    let h = &log.header;
    assert_eq!(
        (h.version, h.record_size, h.pid, h.ppid),
        (1, 64, pid, 4321)
    );
    assert_eq!((h.min_object, h.exec_count), (1234, 3));
    assert_eq!(h.page_size as usize, 4096);
    assert!(!log.truncated);
    assert_eq!(log.unknown_records, 1);

    let events: Vec<_> = log.events().collect();
    let mut path = "/".to_string();
    path.push_str(&"x".repeat(149));
    let expected = vec![
        Event::Alloc {
            address: 0x1000,
            size: 5000,
            alignment: 64,
            site_id: 0xabc,
            function: AllocFn::PosixMemalign,
        },
        Event::Free { address: 0x1000 },
        Event::Realloc {
            address: 0x2000,
            size: 9000,
            old_address: 0x1000,
            site_id: 0xabd,
        },
        Event::Mmap {
            address: 0x7000,
            length: 1 << 20,
            prot: 3,
            flags: 0x22,
            site_id: 0xabe,
            fd: -1,
        },
        Event::Munmap {
            address: 0x7000,
            length: 1 << 20,
        },
        Event::Mremap {
            address: 0x9000,
            length: 2 << 20,
            old_address: 0x7000,
            old_length: 1 << 20,
        },
        Event::ThreadStart {
            logical_id: 2,
            start_routine: 0x401000,
            parent_tid: 111,
            stack_low: 0x7ff000,
            stack_size: 8 << 20,
            parent_logical_id: 0,
        },
        Event::ThreadExit { logical_id: 2 },
        Event::Fork { child_pid: 5555 },
        Event::Exec {
            exec_count: 4,
            path: "/usr/bin/true".into(),
        },
        Event::Module {
            load_bias: 0x400000,
            low: 0x400000,
            high: 0x404000,
            build_id: (0..20).map(|i| 0xa0 + i).collect(),
            path,
            is_main: true,
        },
        Event::Stack {
            low: 0x7ff000,
            size: 8 << 20,
            logical_id: 0,
        },
        Event::Tls {
            address: 0x7fe000,
            size: 128,
            module_id: 1,
            logical_id: 0,
        },
        Event::Site {
            site_id: 0xabc,
            frames: vec![0x401234, 0x401567, 0x7f0000001000],
        },
        Event::PageNodes {
            first_page: 0x10000,
            count: 4,
            node: 0,
            page_size: 4096,
        },
        Event::PageNodes {
            first_page: 0x14000,
            count: 2,
            node: -(libc::ENOENT as i64),
            page_size: 4096,
        },
        Event::PageNodes {
            first_page: 0x40000,
            count: 1,
            node: 0,
            page_size: 4096,
        },
        Event::SmallAllocs {
            count: 10,
            bytes: 1000,
        },
        Event::Signal {
            signal: 11,
            address: 0x10,
            code: 1,
        },
        Event::End,
    ];
    let got: Vec<Event> = events
        .iter()
        .take(expected.len())
        .map(|e| e.event.clone())
        .collect();
    for (i, (g, e)) in got.iter().zip(&expected).enumerate() {
        assert_eq!(g, e, "event {i}");
    }
    assert_eq!(got.len(), expected.len());
    let tid = events[0].tid;
    assert!(tid > 0);
    assert!(
        events
            .iter()
            .all(|e| e.tid == tid || matches!(e.event, Event::Signal { .. }))
    );
    assert!(
        events
            .windows(2)
            .take(17)
            .all(|w| w[0].time_ns <= w[1].time_ns)
    );

    // The real modules of the writer: the main program with its build id, and libc.
    let modules: Vec<_> = events[expected.len()..]
        .iter()
        .filter_map(|e| match &e.event {
            Event::Module {
                path,
                build_id,
                is_main,
                low,
                high,
                ..
            } => Some((path.clone(), build_id.clone(), *is_main, *low, *high)),
            _ => None,
        })
        .collect();
    let main = modules.iter().find(|m| m.2).expect("main module");
    assert!(main.0.ends_with("/test_core"), "{main:?}");
    assert_eq!(main.1.len(), 20, "sha1 build id");
    assert!(main.3 < main.4);
    assert!(modules.iter().any(|m| m.0.contains("libc.so")));
}

#[test]
fn header_kinds_match_the_rust_mirror() {
    let h = std::fs::read_to_string(runtime_dir().join("include/numalens_events.h")).unwrap();
    let mut seen = 0;
    for line in h.lines() {
        let Some(rest) = line.trim().strip_prefix("NL_REC_") else {
            continue;
        };
        let (name, value) = rest.split_once('=').expect("NL_REC_X = N");
        let digits: String = value
            .trim()
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        let value: u16 = digits
            .parse()
            .unwrap_or_else(|_| panic!("number in {line}"));
        let kind = RecordKind::from_u16(value).unwrap_or_else(|| panic!("{line} unknown to Rust"));
        assert_eq!(kind.c_name(), name.trim());
        seen += 1;
    }
    assert_eq!(seen, RecordKind::ALL.len());
    assert!(h.contains("#define NL_RECORD_SIZE 64u") && h.contains("#define NL_EVENTS_VERSION 1u"));
}
