//! What the runtimes leave behind, damaged as a crash or a hostile program can leave it: the
//! recorder reads it without panicking, and numbers in it never size an allocation or overflow.

use std::path::Path;

use numalens_assemble::symbols::Symbolizer;
use numalens_assemble::{exit_page_nodes, exit_residency, process_view};
use numalens_inst::files::{
    CHUNK_PAGES, CHUNK_SIZE, CHUNK_VALID, HEADER_SIZE, MAGIC_PAGES, PAGE_SHIFT, VERSION,
    read_inst_dir,
};
use numalens_preload::events::{MAGIC, RECORD_SIZE, RecordKind, parse_event_log};

fn log_header(pid: u32) -> Vec<u8> {
    let mut h = vec![0u8; RECORD_SIZE];
    h[..8].copy_from_slice(MAGIC);
    h[8..12].copy_from_slice(&1u32.to_le_bytes());
    h[12..16].copy_from_slice(&(RECORD_SIZE as u32).to_le_bytes());
    h[16..20].copy_from_slice(&pid.to_le_bytes());
    h[32..36].copy_from_slice(&4096u32.to_le_bytes());
    h
}

/// A record of `kind` with its fields `a`..`d`.
fn record(kind: RecordKind, time_ns: u64, [a, b, c, d]: [u64; 4]) -> Vec<u8> {
    let mut r = vec![0u8; RECORD_SIZE];
    r[..2].copy_from_slice(&(kind as u16).to_le_bytes());
    r[4..8].copy_from_slice(&7u32.to_le_bytes());
    r[8..16].copy_from_slice(&time_ns.to_le_bytes());
    for (i, v) in [a, b, c, d].into_iter().enumerate() {
        r[16 + 8 * i..24 + 8 * i].copy_from_slice(&v.to_le_bytes());
    }
    r
}

/// Exit page-node answers no kernel gives: node numbers past u32, errors past any errno, the
/// most negative number (whose negation overflows), counts and page sizes of no real run.
#[test]
fn absurd_page_node_answers_give_rows_not_panics() {
    let mut log = log_header(42);
    let answers: [(u64, u64, i64, u64); 5] = [
        (0x1000, 1, i64::MIN, 4096),
        (0x2000, 1, 1 << 40, 4096),
        (0x3000, 1, -100_000, 4096),
        (0x4000, u64::MAX, 0, 4096),
        (0x5000, 3, 0, 0),
    ];
    for (i, (first, count, node, page_size)) in answers.into_iter().enumerate() {
        log.extend(record(
            RecordKind::PageNodes,
            i as u64,
            [first, count, node as u64, page_size],
        ));
    }
    let log = parse_event_log(&log, Path::new("events-42.bin")).unwrap();
    let view = process_view(&log, 4096, &mut Symbolizer::new(), &[]);
    let faulted = [(42, 0)].into();
    let residency = exit_residency(std::slice::from_ref(&view), &faulted);
    assert!(residency.len() <= 1);
    let rows: Vec<_> = exit_page_nodes(&view, 0).collect();
    assert_eq!(rows.len(), 5);
    // A node that is not a u32 is not truncated into a real node's number.
    assert_eq!(rows[1].node, None);
    assert!(rows[1].status.contains("not a node"), "{}", rows[1].status);
    for row in [&rows[0], &rows[2]] {
        assert_eq!(row.node, None);
        assert!(row.status.contains("not an error"), "{}", row.status);
    }
}

fn pages_header(page_shift: u32) -> Vec<u8> {
    let mut h = vec![0u8; HEADER_SIZE];
    h[..8].copy_from_slice(MAGIC_PAGES);
    h[8..12].copy_from_slice(&VERSION.to_le_bytes());
    h[12..16].copy_from_slice(&5u32.to_le_bytes());
    h[16..20].copy_from_slice(&6u32.to_le_bytes());
    h[20..24].copy_from_slice(&page_shift.to_le_bytes());
    h[40..44].copy_from_slice(&(CHUNK_PAGES as u32).to_le_bytes());
    h[44..48].copy_from_slice(&(CHUNK_SIZE as u32).to_le_bytes());
    h
}

/// A chunk whose first page has the given counts.
fn chunk(base_page: u64, reads: u64) -> Vec<u8> {
    let mut c = vec![0u8; CHUNK_SIZE];
    c[..8].copy_from_slice(&base_page.to_le_bytes());
    c[8..16].copy_from_slice(&CHUNK_VALID.to_le_bytes());
    c[64..72].copy_from_slice(&reads.to_le_bytes());
    c[80..88].copy_from_slice(&1u64.to_le_bytes());
    c
}

#[test]
fn damaged_page_counts_are_refused_or_saturate() {
    let dir = tempfile::tempdir().unwrap();
    // Two files of the same thread whose counts of one page add up past u64.
    for name in ["inst-a.pages", "inst-b.pages"] {
        let mut f = pages_header(PAGE_SHIFT);
        f.extend(chunk(0x100, u64::MAX - 1));
        // A page number whose address does not fit in 64 bits.
        f.extend(chunk(u64::MAX - 3, 1));
        std::fs::write(dir.path().join(name), f).unwrap();
    }
    // A page shift the runtime never writes.
    let mut f = pages_header(70);
    f.extend(chunk(0x100, 1));
    std::fs::write(dir.path().join("inst-c.pages"), f).unwrap();

    let data = read_inst_dir(dir.path());
    let rows: Vec<_> = numalens_inst::page_counts::rows(&data.pages).collect();
    assert_eq!(rows.len(), 1, "{rows:?}");
    let (key, count) = rows[0];
    assert_eq!(key, (5, 6, 0x100 << PAGE_SHIFT));
    assert_eq!(count.reads, u64::MAX);
    let problems = data.problems.join("\n");
    assert!(
        problems.contains("inst-c.pages") && problems.contains("page shift 70"),
        "{problems}"
    );
    assert!(
        problems.contains("inst-a.pages") && problems.contains("page number"),
        "{problems}"
    );
}

/// Small-allocation counters summed over records: a damaged log's counts stop at u64::MAX.
#[test]
fn small_allocation_counts_saturate() {
    let mut log = log_header(42);
    for t in 0..2 {
        log.extend(record(
            RecordKind::SmallAllocs,
            t,
            [u64::MAX - 1, u64::MAX - 1, 0, 0],
        ));
    }
    let log = parse_event_log(&log, Path::new("events-42.bin")).unwrap();
    let view = process_view(&log, 4096, &mut Symbolizer::new(), &[]);
    assert_eq!(view.small_allocs, (u64::MAX, u64::MAX));
}
