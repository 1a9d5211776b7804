//! Fills the analysis sections of a model whose objects and threads are already listed: thread
//! positions, per-object views, per-thread totals, findings, placement, communication.

use std::cmp::Reverse;
use std::collections::HashMap;

use numalens_format::{Label, Object, ObjectKind};

use crate::access::SaturatingSum;
use crate::access::{AccessTally, PageAcc, PageKey};
use crate::build::{self, ViewCtx};
use crate::engine::{Aggregates, handover_accesses, page_cv, thresholds, total};
use crate::findings::{Facts, Fired, advice, fix_of, object_findings};
use crate::index::ObjectIndex;
use crate::model::*;
use crate::placement::Placement;
use crate::samples::ThreadKey;
use crate::timeline::BUCKETS;

pub(crate) struct Inputs<'a> {
    pub objects: &'a [Object],
    /// Every allocation site, listed objects or not: a finding names its object's site.
    pub sites: &'a HashMap<u64, SiteReport>,
    pub index: &'a ObjectIndex,
    pub keys: &'a [ThreadKey],
    pub pages: &'a [(PageKey, PageAcc)],
    pub exact: bool,
    /// Whether the accesses are load and store samples (else, without exact counts, faults).
    pub memory_samples: bool,
    pub sampled: &'a AccessTally,
    pub agg: &'a Aggregates,
    pub placement: &'a Placement,
    pub page_size: u64,
    pub block_size: u64,
}

impl Inputs<'_> {
    /// The exact counts, when the accesses come from them.
    fn exact_pages(&self) -> &[(PageKey, PageAcc)] {
        if self.exact { self.pages } else { &[] }
    }
}

/// The model's thread position of each thread key (0 for one the model lacks).
pub(crate) fn thread_positions(model: &ReportModel, keys: &[ThreadKey]) -> Vec<usize> {
    let at: HashMap<ThreadKey, usize> = model
        .threads
        .iter()
        .enumerate()
        .map(|(p, t)| ((t.pid, t.tid), p))
        .collect();
    keys.iter()
        .map(|k| at.get(k).copied().unwrap_or(0))
        .collect()
}

pub(crate) fn fill(model: &mut ReportModel, i: &Inputs) {
    let pos = thread_positions(model, i.keys);
    let all = total(&i.agg.rw);
    let times = crate::phases::times(i.sampled);
    let (findings, advice_of) = findings(model, i, &times, all);
    let ctx = ViewCtx {
        pages: i.pages,
        agg: i.agg,
        pos: &pos,
        page_size: i.page_size,
        all,
        times: &times,
    };
    for o in &mut model.objects {
        let Some(p) = i.index.get(o.id) else { continue };
        let advice = advice_of.get(&(p as usize)).cloned().unwrap_or_default();
        o.access = build::object_access(&ctx, &i.objects[p as usize], p as usize, advice);
    }
    threads(model, i, &times, &pos);
    let n = model.threads.len();
    model.findings = findings;
    model.placement = build::placement_report(i.placement, i.agg, &pos, n);
    model.communication = build::communication(&i.agg.communication, &pos, n, i.block_size);
    model.analysis = info(i, &times, all);
    if !model.selection.filters() {
        // Under a selection its first touches would be judged against other threads' counts.
        model.analysis.coverage =
            crate::coverage::of_exact_counts(i.objects, i.exact_pages(), i.sampled);
    }
}

fn info(i: &Inputs, times: &crate::phases::Times, all: u64) -> AnalysisInfo {
    let stores = i
        .sampled
        .pages
        .iter()
        .any(|(_, p)| p.users.iter().any(|u| u.writes > 0));
    let touches = i.sampled.pages.iter().any(|(_, p)| p.touch.is_some());
    AnalysisInfo {
        access_source: match (i.exact, i.pages.is_empty()) {
            (_, true) => "none",
            (true, _) => "page_stats",
            (false, _) => "samples",
        }
        .into(),
        accesses: all,
        reads: i.agg.rw[0],
        writes: i.agg.rw[1],
        unknown_direction: i.agg.rw[2],
        pages: i.agg.pages,
        active_threads: i.agg.threads.iter().filter(|t| total(&t.rw) > 0).count() as u64,
        page_size: i.page_size,
        first_touch_source: match (i.exact, touches, i.pages.is_empty()) {
            (_, _, true) => "none",
            (true, _, _) => "page_stats first_access_ns",
            (false, true, _) => "first-touch samples",
            (false, false, _) => "earliest sample",
        }
        .into(),
        false_sharing: if stores {
            "cache lines of 64 bytes, from the addresses and times of store samples: writes of two threads to distinct bytes of one line within 1 ms of each other".into()
        } else if i.exact {
            "candidates only: page_stats count whole pages and carry no write times, so a page that several threads each write more than 64 times per word is a candidate (false sharing, phases taking the lines in turns, or one contended variable); record store samples to confirm".into()
        } else {
            "not available: no store samples with addresses".into()
        },
        time: TimeAxis {
            bucket_ns: if times.by_object.is_empty() {
                0
            } else {
                i.sampled.timelines.width()
            },
            buckets: if times.by_object.is_empty() {
                0
            } else {
                BUCKETS
            },
        },
        thresholds: thresholds(),
        limits: None,
        coverage: None,
    }
}

/// Findings, most costly first, and the advice ids by object position.
fn findings(
    model: &ReportModel,
    i: &Inputs,
    times: &crate::phases::Times,
    all: u64,
) -> (Vec<Finding>, HashMap<usize, Vec<String>>) {
    let mut fired: Vec<(usize, Fired)> = Vec::new();
    for (p, agg) in i.agg.objects.iter().enumerate() {
        let facts = Facts {
            all,
            page_cv: page_cv(agg, &i.agg.views),
            phase_accesses: times
                .phase
                .get(&(p as u32))
                .copied()
                .unwrap_or(0)
                .max(handover_accesses(&agg.handovers)),
            nodes: i.placement.machine.nodes.len(),
            private_kind: matches!(i.objects[p].kind, ObjectKind::Stack | ObjectKind::Tls),
            sampled: !i.exact,
        };
        fired.extend(object_findings(agg, &facts).into_iter().map(|f| (p, f)));
    }
    let tids: Vec<u32> = i.keys.iter().map(|k| k.1).collect();
    let mixed = build::mixed_ownership(i.objects, i.pages, i.agg, i.page_size, &tids);
    fired.extend(
        mixed
            .into_iter()
            .filter(|(_, f)| f.accesses as f64 >= MIXED_SITE_SHARE * all as f64),
    );
    // A page without a first-touch fault is placed by its earliest sample: the label says
    // which of the two the pages rest on (faults sampled or partly recorded give both).
    let with_fault = i
        .sampled
        .pages
        .iter()
        .filter(|(_, p)| p.touch.is_some())
        .count();
    let placed_by = match (i.exact, with_fault) {
        (true, _) => "first-access-times",
        (false, 0) => "earliest-samples",
        (false, n) if n == i.sampled.pages.len() => "first-touch-faults",
        (false, _) => "first-touch-faults-else-earliest-samples",
    };
    let setting = |key: &str| {
        model
            .profile
            .backend
            .settings
            .get(key)
            .and_then(serde_json::Value::as_u64)
            .filter(|n| *n > 0)
    };
    let sample_every = setting("sample_every");
    // A recording whose threads' sampling was capped gets no more samples from a shorter
    // interval alone (profiles from before the cap have no such setting).
    let rate_capped = setting("max_sample_rate").is_some();
    let mut advice_of: HashMap<usize, Vec<String>> = HashMap::new();
    let mut out: Vec<Finding> = fired
        .into_iter()
        .map(|(p, f)| {
            let o = &i.objects[p];
            let (advice_id, _, why) = advice(f.id);
            let fix = fix_of(&f, sample_every, rate_capped);
            advice_of.entry(p).or_default().push(advice_id.into());
            let basis = basis_of(i, &f, p, all, placed_by);
            Finding {
                id: f.id.into(),
                advice: advice_id.into(),
                object: finding_object(o, i.sites),
                summary: summary(&f, &o.name),
                evidence: f
                    .evidence
                    .iter()
                    .map(|(k, v)| Evidence {
                        key: (*k).into(),
                        value: *v,
                    })
                    .collect(),
                fix,
                why: why.into(),
                cost: Cost {
                    accesses: f.accesses,
                    share: if all == 0 {
                        0.0
                    } else {
                        f.accesses as f64 / all as f64
                    },
                    remote: f.remote,
                },
                predicted: None,
                rests_on: Some(crate::basis::sentence(&basis)),
                basis: Some(basis),
            }
        })
        .collect();
    out.sort_by(|a, b| {
        (
            Reverse(a.cost.remote),
            Reverse(a.cost.accesses),
            &a.id,
            a.object.id,
        )
            .cmp(&(
                Reverse(b.cost.remote),
                Reverse(b.cost.accesses),
                &b.id,
                b.object.id,
            ))
    });
    (out, advice_of)
}

/// A site's mixed pages are a finding when they hold at least this share of all accesses.
const MIXED_SITE_SHARE: f64 = 0.01;

/// What a finding of object position `p` rests on: the accesses or samples its tests looked at
/// (and, for a first-touch mismatch, who placed the pages), and the tests.
fn basis_of(i: &Inputs, f: &Fired, p: usize, all: u64, placed_by: &str) -> Basis {
    use crate::basis::data;
    let agg = &i.agg.objects[p];
    let mut tests = f.tests.clone();
    let mut sources = vec![if i.exact {
        data(
            "exact-counts",
            f.data_count.unwrap_or(total(&agg.rw)),
            "accesses",
        )
    } else {
        let kind = if i.memory_samples {
            "load-store-samples"
        } else {
            "fault-samples"
        };
        data(kind, f.data_count.unwrap_or(agg.raw_samples), "samples")
    }];
    if f.id == "first-touch-mismatch" {
        sources.push(data(placed_by, agg.touched_pages, "pages"));
    }
    if f.id == "mixed-page-ownership" {
        // A site's mixed pages: their share of all accesses is its gate (`findings`).
        let share = f.accesses as f64 / all.max(1) as f64;
        tests.insert(
            0,
            crate::basis::at_least("access_share_of_all", share, MIXED_SITE_SHARE),
        );
    }
    crate::basis::basis(sources, tests)
}

/// The object a finding is about, with its site (listed among the top objects or not).
pub(crate) fn finding_object(o: &Object, sites: &HashMap<u64, SiteReport>) -> FindingObject {
    FindingObject {
        id: o.object_id,
        pid: o.pid,
        name: o.name.clone(),
        kind: o.kind.label().into(),
        site: o.site_key.and_then(|k| sites.get(&k)).map(site_text),
    }
}

/// `function file:line` of an allocation site (its function shortened when long), `file:line`
/// of a static's definition, or what is known.
pub fn site_text(site: &SiteReport) -> String {
    let f = &site.location;
    let function = f
        .function
        .as_deref()
        .map(numalens_format::short_function_name);
    match (function, &f.file, f.line) {
        (Some(function), Some(file), Some(line)) => format!("{function} {file}:{line}"),
        // A static's definition outside any function.
        (None, Some(file), Some(line)) => format!("{file}:{line}"),
        (function, _, _) => function.unwrap_or_else(|| "?".into()),
    }
}

/// The finding in one sentence; from samples, with the samples it rests on and how low its
/// share can be at the confidence the rule used.
fn summary(f: &Fired, name: &str) -> String {
    let text = pattern_summary(f, name);
    let ev = |k: &str| {
        f.evidence
            .iter()
            .find(|(key, _)| *key == k)
            .map(|(_, v)| *v)
    };
    match (ev("samples"), ev("share_lower_bound"), ev("confidence")) {
        (Some(n), Some(lower), Some(c)) => format!(
            "{text}; from {n} samples: at least {:.0}% at {:.0}% confidence",
            100.0 * lower,
            100.0 * c
        ),
        _ => text,
    }
}

fn pattern_summary(f: &Fired, name: &str) -> String {
    let ev = |k: &str| {
        f.evidence
            .iter()
            .find(|(key, _)| *key == k)
            .map_or(0.0, |(_, v)| *v)
    };
    let pct = |k: &str| format!("{:.0}%", 100.0 * ev(k));
    match f.id {
        "first-touch-mismatch" => format!(
            "{name}: {} of {} pages are used mostly by another thread than the one that touched them first ({} of its accesses)",
            ev("mismatched_pages"),
            ev("pages"),
            pct("mismatched_access_share")
        ),
        "shared-read-only" => format!(
            "{name}: read by {} threads ({} reads), written by one",
            ev("users"),
            pct("read_ratio")
        ),
        "shared-read-write" => format!(
            "{name}: read and written by {} threads on {} of its accesses",
            ev("users"),
            pct("shared_access_share")
        ),
        "hotspot" => format!(
            "{name}: accesses concentrate on part of its pages (stddev/mean per page {:.2}), shared by {} threads",
            ev("page_cv"),
            ev("users")
        ),
        "neighbour-sharing" => format!(
            "{name}: {} pairs of neighbouring threads carry {} of the sharing on its pages",
            ev("neighbour_pairs"),
            pct("neighbour_communication_share")
        ),
        "phase-change" => format!(
            "{name}: the threads using its parts change during the run ({} of its accesses)",
            pct("phase_access_share")
        ),
        "false-sharing" => format!(
            "{name}: threads write distinct bytes of the same cache lines, alternating within a millisecond ({} of its writes)",
            pct("false_shared_write_share")
        ),
        "false-sharing-candidate" => format!(
            "{name}: possible false sharing, not confirmed: {} threads each write its pages many times per word ({} of its writes), but {} it may as well be phases or one contended variable",
            ev("writers"),
            pct("candidate_write_share"),
            match ev("candidate_store_samples") {
                0.0 => "without write times".to_string(),
                n =>
                    format!("with only {n} store samples there, none on a line two threads wrote,"),
            }
        ),
        _ => format!(
            "{name}: {} small objects used by {} threads share {} pages",
            ev("objects"),
            ev("threads"),
            ev("mixed_pages")
        ),
    }
}

/// Per-thread totals, local ratio, node and most accessed objects over time.
fn threads(model: &mut ReportModel, i: &Inputs, times: &crate::phases::Times, pos: &[usize]) {
    let mut by_pos: HashMap<usize, u32> = HashMap::new();
    for (dense, p) in pos.iter().enumerate() {
        if i.keys
            .get(dense)
            .is_some_and(|k| model.threads.get(*p).is_some_and(|t| (t.pid, t.tid) == *k))
        {
            by_pos.insert(*p, dense as u32);
        }
    }
    let mut per_thread: HashMap<u32, Vec<(u32, Vec<u64>)>> = HashMap::new();
    for (object, lines) in &times.by_object {
        for (thread, values) in lines {
            per_thread
                .entry(*thread)
                .or_default()
                .push((*object, values.clone()));
        }
    }
    for (p, t) in model.threads.iter_mut().enumerate() {
        let Some(&dense) = by_pos.get(&p) else {
            continue;
        };
        let agg = &i.agg.threads[dense as usize];
        let known = agg.local.saturating_add(agg.remote);
        let mut objects: Vec<ObjectTimeline> = per_thread
            .remove(&dense)
            .unwrap_or_default()
            .into_iter()
            .map(|(o, buckets)| {
                let o = &i.objects[o as usize];
                ObjectTimeline {
                    object: o.object_id,
                    name: o.name.clone(),
                    accesses: buckets.iter().saturating_sum(),
                    buckets,
                }
            })
            .collect();
        objects.sort_by_key(|o| (Reverse(o.accesses), o.object));
        objects.truncate(8);
        t.access = ThreadAccess {
            accesses: total(&agg.rw),
            reads: agg.rw[0],
            writes: agg.rw[1],
            node: i.placement.thread_node[dense as usize],
            local_ratio: (known > 0).then(|| agg.local as f64 / known as f64),
            objects,
        };
    }
}
