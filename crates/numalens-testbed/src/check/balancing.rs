//! Scenario `record-balancing`: with NUMA balancing on, a writer thread first-touched a block on
//! the first CPU node, then a reader thread on the last CPU node read it until the kernel had
//! moved it. The profile must show the reader's hinting faults as `hint` samples of the block's
//! object, one over every page that moved, and `page_nodes` must find the pages on the reader's
//! node at exit.

use numalens_format::SampleKind;

use super::pages::{self, Granule, PageAnswer};
use super::probe::{Block, ProbeOutput, ProbeThread};
use super::recorded::{Fault, Recorded};
use super::{
    Check, describe, first_touched_by, heap_object, heap_object_site, profile_complete,
    threads_logical_ids,
};

/// The share of the block that must be on the reader's node at exit (the probe stops reading
/// once its own query sees this much).
pub const MOVED_FRACTION: f64 = 0.9;

pub fn checks(r: &Recorded, p: &ProbeOutput, thp_always: bool) -> Vec<Check> {
    let granule = Granule::new(r.page_size, r.samples_have_page_size, thp_always);
    let mut out = vec![
        profile_complete(r),
        numa_balancing_mode(r),
        threads_logical_ids(r, p),
        heap_object_site(r, p),
    ];
    let (Some(writer), Some(reader), Some(block)) =
        (p.thread("writer"), p.thread("reader"), p.blocks.first())
    else {
        out.push(Check::new(
            "probe-layout",
            false,
            "the probe printed no writer, reader or block",
        ));
        return out;
    };
    let object = heap_object(r, p);
    let (ok, detail) = first_touched_by(r, block, writer, object.clone(), granule);
    out.push(Check::new("first-touch-writer", ok, detail));
    match object {
        Ok(object) => out.push(reader_hints(r, block, reader, object)),
        Err(e) => out.push(Check::new("hint-samples-reader", false, e)),
    }
    out.push(hints_cover_moved_pages(r, block, reader, granule));
    out.push(pages_moved(r, p, block, reader));
    out
}

fn numa_balancing_mode(r: &Recorded) -> Check {
    Check::new(
        "meta-numa-balancing-mode-1",
        r.numa_balancing_mode == Some(1),
        format!("meta.json numa_balancing.mode {:?}", r.numa_balancing_mode),
    )
}

fn in_block(f: &Fault, block: &Block) -> bool {
    (block.start..block.end()).contains(&f.address)
}

/// The reader's faults on the block are `hint` samples of the block's object: it never touched
/// a page first, and its reads of present pages only fault through NUMA balancing.
fn reader_hints(r: &Recorded, block: &Block, reader: &ProbeThread, object: u64) -> Check {
    let mine: Vec<&Fault> = r
        .samples
        .iter()
        .filter(|f| f.tid == reader.tid && in_block(f, block))
        .collect();
    let hints = mine.iter().filter(|f| f.kind == SampleKind::Hint).count();
    let not_hint = mine.iter().find(|f| f.kind != SampleKind::Hint);
    let misattributed = mine
        .iter()
        .find(|f| f.kind == SampleKind::Hint && f.object_id != Some(object));
    let others = r
        .samples
        .iter()
        .filter(|f| f.kind == SampleKind::Hint && f.tid != reader.tid && in_block(f, block))
        .count();
    let mut why = Vec::new();
    if hints == 0 {
        why.push(format!("no hint sample by the reader (tid {})", reader.tid));
    }
    if let Some(f) = not_hint {
        let n = mine.len() - hints;
        why.push(format!(
            "{n} of the reader's samples are not hints (first: {})",
            describe(f)
        ));
    }
    if let Some(f) = misattributed {
        why.push(format!(
            "hint not attributed to object {object}: {}",
            describe(f)
        ));
    }
    let ok = why.is_empty();
    let detail = if ok {
        format!(
            "{hints} hint samples by tid {} on object {object}; {others} hints by other threads",
            reader.tid
        )
    } else {
        why.join("; ")
    };
    Check::new("hint-samples-reader", ok, detail)
}

/// Balancing migrates a page only on a hinting fault of the thread that reads it, so every page
/// found on the reader's node at exit must lie under one of the reader's hint samples.
fn hints_cover_moved_pages(
    r: &Recorded,
    block: &Block,
    reader: &ProbeThread,
    granule: Granule,
) -> Check {
    let is_reader_hint = |f: &Fault| f.tid == reader.tid && f.kind == SampleKind::Hint;
    let cover = pages::coverage(
        &r.samples,
        is_reader_hint,
        block.start,
        block.size,
        r.page_size,
        granule,
    );
    let nodes = pages::exit_nodes(&r.page_runs, block.start, block.size, r.page_size);
    let moved: Vec<usize> = (0..nodes.len())
        .filter(|&i| nodes[i] == PageAnswer::Node(reader.node))
        .collect();
    let uncovered: Vec<usize> = moved
        .iter()
        .copied()
        .filter(|&i| cover[i].is_empty())
        .collect();
    let ok = !moved.is_empty() && uncovered.is_empty();
    let detail = match uncovered.first() {
        None => format!(
            "{} pages on node {} at exit, all under a reader hint sample; {}",
            moved.len(),
            reader.node,
            granule.describe()
        ),
        Some(&i) => format!(
            "{} of {} pages on node {} at exit have no reader hint sample (first {:#x}); {}",
            uncovered.len(),
            moved.len(),
            reader.node,
            block.start + i as u64 * r.page_size,
            granule.describe()
        ),
    };
    Check::new("hints-cover-moved-pages", ok, detail)
}

fn pages_moved(r: &Recorded, p: &ProbeOutput, block: &Block, reader: &ProbeThread) -> Check {
    let (on, pages, summary) = super::pages_on_node(r, block, reader.node);
    let probe = p.moved.map_or("no report".into(), |m| {
        format!(
            "{}/{} by its own query after {:.1} s",
            m.on_reader_node, m.pages, m.seconds
        )
    });
    Check::new(
        format!("page-nodes-moved-to-node{}", reader.node),
        pages > 0 && on as f64 >= pages as f64 * MOVED_FRACTION,
        format!(
            "{on}/{pages} pages on node {} at exit: {summary}; the probe saw {probe}",
            reader.node
        ),
    )
}
