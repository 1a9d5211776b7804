//! Host-side checks of profiles recorded in a guest: `numalens record` ran `record_probe` (a
//! program that prints its own threads and memory layout) and the profile directory came back;
//! these compare the two. Each check is one `PASS name` / `FAIL name: why` line, like the
//! guest's own results, so `tests/vm/run-all` counts them the same way.
//!
//! - [`first_touch`]: scenario `record` (one thread per node first-touching its own blocks);
//! - [`balancing`]: scenario `record-balancing` (hinting faults and the kernel's migrations);
//! - [`run_plan`]: scenario `run-plan` (an interleave plan applied by `numalens run --plan`).

pub mod balancing;
pub mod first_touch;
pub mod pages;
pub mod probe;
pub mod recorded;
pub mod run_plan;

use std::fmt::Write as _;

use numalens_format::{Label, ObjectKind};

use self::pages::{Granule, PageAnswer};
use self::probe::{Array, Block, ProbeOutput, ProbeThread};
use self::recorded::{Fault, Recorded};

/// One test line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    pub ok: bool,
    pub name: String,
    /// Evidence, shown after the name in both cases.
    pub detail: String,
}

impl Check {
    pub fn new(name: impl Into<String>, ok: bool, detail: impl Into<String>) -> Check {
        Check {
            ok,
            name: name.into(),
            detail: detail.into(),
        }
    }

    /// `PASS name (detail)` or `FAIL name: detail`.
    pub fn line(&self, prefix: &str) -> String {
        if self.ok {
            format!("PASS {prefix}{} ({})", self.name, self.detail)
        } else {
            format!("FAIL {prefix}{}: {}", self.name, self.detail)
        }
    }
}

/// The recording ended normally and the program exited 0.
pub fn profile_complete(r: &Recorded) -> Check {
    let ok = r.complete && r.exit_code == Some(0);
    let detail = format!(
        "complete {}, exit code {:?}, signal {:?}{}",
        r.complete,
        r.exit_code,
        r.exit_signal,
        if r.incomplete_reasons.is_empty() {
            String::new()
        } else {
            format!(", reasons: {}", r.incomplete_reasons.join("; "))
        }
    );
    Check::new("profile-complete", ok, detail)
}

/// Every probe thread is in the threads table with the logical id it printed, and the main
/// thread has logical id 0.
pub fn threads_logical_ids(r: &Recorded, p: &ProbeOutput) -> Check {
    let mut problems = Vec::new();
    for t in &p.threads {
        match r.logical_id(t.tid) {
            Some(id) if id == t.logical_id => {}
            got => problems.push(format!(
                "thread {} (tid {}) has logical id {got:?}, expected {}",
                t.role, t.tid, t.logical_id
            )),
        }
    }
    if !r.threads.iter().any(|t| t.1 == 0) {
        problems.push("no thread with logical id 0 (the main thread)".into());
    }
    let detail = if problems.is_empty() {
        format!("{} threads, ids {:?}", r.threads.len(), sorted_ids(r))
    } else {
        problems.join("; ")
    };
    Check::new("threads-logical-ids", problems.is_empty(), detail)
}

fn sorted_ids(r: &Recorded) -> Vec<u32> {
    let mut ids: Vec<u32> = r.threads.iter().map(|t| t.1).collect();
    ids.sort_unstable();
    ids
}

/// The object the probe's malloc returned: a heap object at that address, at least as large as
/// asked, with a site whose frames are in the probe's own binary.
pub fn heap_object(r: &Recorded, p: &ProbeOutput) -> Result<u64, String> {
    let (start, size) = p.heap_object.ok_or("the probe printed no heap object")?;
    let o = r
        .objects
        .iter()
        .find(|o| o.kind == ObjectKind::Heap && o.start == start)
        .ok_or_else(|| format!("no heap object starts at {start:#x} (the probe's malloc)"))?;
    if o.size < size {
        return Err(format!(
            "heap object {} at {start:#x} has size {}, the probe asked for {size}",
            o.object_id, o.size
        ));
    }
    Ok(o.object_id)
}

pub fn heap_object_site(r: &Recorded, p: &ProbeOutput) -> Check {
    let name = "heap-object-site";
    let id = match heap_object(r, p) {
        Ok(id) => id,
        Err(e) => return Check::new(name, false, e),
    };
    let o = r
        .objects
        .iter()
        .find(|o| o.object_id == id)
        .expect("found above");
    let Some(key) = o.site_key else {
        return Check::new(name, false, format!("heap object {id} has no site key"));
    };
    let Some(frames) = r.sites.get(&key) else {
        return Check::new(
            name,
            false,
            format!("site {key:#x} is not in the sites table"),
        );
    };
    let in_probe = frames.iter().any(|f| f.module.ends_with("record_probe"));
    let mut detail = format!("object {id} `{}`, site {key:#x}:", o.name);
    // The allocation call and its callers in the probe; libc's start-up frames add nothing.
    for f in frames.iter().take(3) {
        let _ = write!(
            detail,
            " {}+{:#x} {}",
            f.module.rsplit('/').next().unwrap_or(&f.module),
            f.offset,
            f.function.as_deref().unwrap_or("?")
        );
    }
    if !in_probe {
        detail.insert_str(0, "no frame in record_probe: ");
    }
    Check::new(name, in_probe, detail)
}

/// The object a block's samples must be attributed to: the heap object for heap blocks, the
/// static object holding the block for static ones.
pub fn expected_object(r: &Recorded, p: &ProbeOutput, block: &Block) -> Result<u64, String> {
    match block.array {
        Array::Heap => heap_object(r, p),
        Array::Static => r
            .objects
            .iter()
            .find(|o| {
                o.kind == ObjectKind::Static
                    && o.start <= block.start
                    && block.end() <= o.start + o.size
            })
            .map(|o| o.object_id)
            .ok_or_else(|| {
                format!(
                    "no static object holds [{:#x}, {:#x})",
                    block.start,
                    block.end()
                )
            }),
    }
}

/// Every base page of `block` is covered by first-touch samples, all by `thread`, with its node
/// and attributed to `object`; with exact granules, by exactly one sample.
pub fn first_touched_by(
    r: &Recorded,
    block: &Block,
    thread: &ProbeThread,
    object: Result<u64, String>,
    granule: Granule,
) -> (bool, String) {
    let object = match object {
        Ok(o) => o,
        Err(e) => return (false, e),
    };
    let is_first = |f: &Fault| f.kind == numalens_format::SampleKind::FirstTouch;
    let cover = pages::coverage(
        &r.samples,
        is_first,
        block.start,
        block.size,
        r.page_size,
        granule,
    );
    let right = |f: &Fault| {
        f.tid == thread.tid && f.node == Some(thread.node) && f.object_id == Some(object)
    };
    let (mut uncovered, mut wrong, mut shared) = (Vec::new(), Vec::new(), Vec::new());
    let mut used = std::collections::BTreeSet::new();
    for (i, covering) in cover.iter().enumerate() {
        let page = block.start + i as u64 * r.page_size;
        used.extend(covering.iter().copied());
        if covering.is_empty() {
            uncovered.push(page);
        } else if let Some(&bad) = covering.iter().find(|&&s| !right(&r.samples[s])) {
            wrong.push((page, bad));
        } else if covering.len() > 1 && !granule.overlap_allowed() {
            shared.push((page, covering.len()));
        }
    }
    let pages = cover.len();
    if uncovered.is_empty() && wrong.is_empty() && shared.is_empty() {
        return (
            true,
            format!(
                "{pages} pages, {} first-touch samples by tid {} on node {}, object {object}; {}",
                used.len(),
                thread.tid,
                thread.node,
                granule.describe()
            ),
        );
    }
    let mut why = Vec::new();
    if let Some(first) = uncovered.first() {
        why.push(format!(
            "{} of {pages} pages have no first-touch sample (first {first:#x})",
            uncovered.len()
        ));
    }
    if let Some(&(page, s)) = wrong.first() {
        why.push(format!(
            "{} pages first-touched otherwise than by tid {} on node {} in object {object} \
             (first: page {page:#x}, {})",
            wrong.len(),
            thread.tid,
            thread.node,
            describe(&r.samples[s])
        ));
    }
    if let Some(&(page, n)) = shared.first() {
        why.push(format!(
            "{} pages have several first-touch samples (first: page {page:#x}, {n} samples)",
            shared.len()
        ));
    }
    why.push(granule.describe().to_string());
    (false, why.join("; "))
}

/// Counts of `page_nodes` answers over a block, and whether all are `node`.
pub fn pages_on_node(r: &Recorded, block: &Block, node: u32) -> (usize, usize, String) {
    let answers = pages::exit_nodes(&r.page_runs, block.start, block.size, r.page_size);
    let mut counts: std::collections::BTreeMap<String, usize> = Default::default();
    for a in &answers {
        let key = match a {
            PageAnswer::Node(n) => format!("node {n}"),
            PageAnswer::NoNode(s) => format!("no node ({s})"),
            PageAnswer::NotQueried => "not queried".into(),
        };
        *counts.entry(key).or_default() += 1;
    }
    let on = answers
        .iter()
        .filter(|a| **a == PageAnswer::Node(node))
        .count();
    let summary = counts
        .iter()
        .map(|(k, n)| format!("{n} {k}"))
        .collect::<Vec<_>>()
        .join(", ");
    (on, answers.len(), summary)
}

pub fn describe(f: &Fault) -> String {
    format!(
        "{} at {:#x} by tid {} node {} object {}",
        f.kind.label(),
        f.address,
        f.tid,
        f.node.map_or("-".into(), |n| n.to_string()),
        f.object_id.map_or("-".into(), |n| n.to_string())
    )
}

#[cfg(test)]
mod tests;
