//! Findings from what the PMU measured (MemProf's and Carrefour's inputs): an object whose
//! sampled accesses the hardware saw served by another node, and cache lines the hardware saw
//! move between writing threads (HITM). They rest on the samples' data sources, latency and
//! snoop results, not on the placement model, and say so; they fire only when those samples
//! can support them (docs/FINDINGS.md, "Findings from measured data sources").

use std::cmp::Reverse;

use numalens_format::Object;

use crate::basis::{at_least, basis, data, share_at_least};
use crate::index::ObjectIndex;
use crate::model::{
    Basis, Cost, Evidence, Finding, HitmSharing, ObjectSources, ReportModel, SourceCounts,
};

/// Samples served beyond the node's caches an object needs before its remote share is judged.
pub(crate) const MIN_MEMORY_SAMPLES: u64 = 30;
/// HITM samples following another thread's store an object needs before a sharing finding.
pub(crate) const MIN_HITM_SAMPLES: u64 = 10;
/// Carrefour migrates when the local access ratio falls below 80 %: a remote share above 20 %
/// of the accesses served by memory or remote caches (its lower confidence bound, here).
pub(crate) const REMOTE_SHARE: f64 = 0.2;
/// Among the HITM samples matched to a store, the share on another word of the line that makes
/// the sharing false rather than true.
const FALSE_SHARING_SHARE: f64 = 0.5;

/// Adds the measured findings to the model's and keeps the report's object list short.
pub(crate) fn add_findings(
    model: &mut ReportModel,
    objects: &[Object],
    sites: &std::collections::HashMap<u64, crate::model::SiteReport>,
) {
    let Some(sources) = model.data_sources.as_mut() else {
        return;
    };
    let all = sources.totals.known().max(1);
    let mut fired: Vec<(u64, Fired)> = Vec::new();
    for o in &sources.objects {
        fired.extend(remote(&o.counts).map(|f| (o.object_id, f)));
        if let Some(s) = &o.sharing {
            fired.extend(sharing(o, s).map(|f| (o.object_id, f)));
        }
    }
    crate::sources::keep_top_objects(sources);
    // Object ids are unique, not row positions (FORMAT.md).
    let index = ObjectIndex::new(objects);
    for (id, f) in fired {
        let Some(o) = index.get(id).map(|p| &objects[p as usize]) else {
            continue;
        };
        list_advice(model, o, f.advice);
        let rests_on = format!("{}: {}", f.rests_on, crate::basis::sentence(&f.basis));
        model.findings.push(Finding {
            id: f.id.into(),
            advice: f.advice.into(),
            object: crate::fill::finding_object(o, sites),
            summary: format!("{}: {}", o.name, f.summary),
            evidence: f
                .evidence
                .into_iter()
                .map(|(key, value)| Evidence {
                    key: key.into(),
                    value,
                })
                .collect(),
            fix: f.fix.into(),
            why: f.why.into(),
            cost: Cost {
                accesses: f.accesses,
                share: f.accesses as f64 / all as f64,
                remote: f.remote,
            },
            predicted: None,
            rests_on: Some(rests_on),
            basis: Some(f.basis),
        });
    }
    // The measured findings sort among the others by the same key: remote accesses first.
    model.findings.sort_by_key(|f| {
        (
            Reverse(f.cost.remote),
            Reverse(f.cost.accesses),
            f.id.clone(),
            f.object.id,
        )
    });
}

/// Names the advice of a measured finding beside the others of its object: in the object's row
/// and in its site group's, as the findings from accesses are.
fn list_advice(model: &mut ReportModel, o: &Object, advice: &str) {
    let add = |list: &mut Vec<String>| {
        if !list.iter().any(|a| a == advice) {
            list.push(advice.into());
        }
    };
    for r in &mut model.objects {
        if r.id == o.object_id
            && r.pid == o.pid
            && let Some(a) = r.access.as_mut()
        {
            add(&mut a.advice);
        }
    }
    for g in &mut model.groups {
        if g.pid == o.pid && g.members.contains(&o.object_id) {
            add(&mut g.advice);
        }
    }
}

struct Fired {
    id: &'static str,
    advice: &'static str,
    summary: String,
    evidence: Vec<(&'static str, f64)>,
    fix: &'static str,
    why: &'static str,
    rests_on: &'static str,
    basis: Basis,
    accesses: u64,
    remote: u64,
}

/// Remote DRAM and remote cache as a share of the accesses served beyond the node's caches.
fn remote(c: &SourceCounts) -> Option<Fired> {
    let beyond = c.local_dram.saturating_add(c.remote());
    if c.beyond_cache_samples < MIN_MEMORY_SAMPLES || beyond == 0 {
        return None;
    }
    let share = c.remote() as f64 / beyond as f64;
    if !crate::stats::supports(share, c.beyond_cache_samples, REMOTE_SHARE) {
        return None;
    }
    let mut evidence = vec![
        ("measured_remote_share", share),
        ("remote_dram_share", c.remote_dram as f64 / beyond as f64),
        ("remote_cache_share", c.remote_cache as f64 / beyond as f64),
    ];
    evidence.extend(crate::stats::evidence(share, c.beyond_cache_samples));
    let remote_latency = c.mean_remote_latency();
    let local_latency = c.mean_local_dram_latency();
    evidence.extend(remote_latency.map(|l| ("measured_remote_cycles", l)));
    evidence.extend(local_latency.map(|l| ("measured_local_dram_cycles", l)));
    let latency = match (remote_latency, local_latency) {
        (Some(r), Some(l)) => format!(", at {r:.0} cycles against {l:.0} for local DRAM"),
        (Some(r), None) => format!(", at {r:.0} cycles"),
        _ => String::new(),
    };
    Some(Fired {
        id: "measured-remote",
        advice: "place-near-users",
        summary: format!(
            "the PMU saw {:.0}% of its accesses served beyond the caches come from another node ({:.0}% remote DRAM, {:.0}% remote caches){latency}; from {} samples: at least {:.0}% at {:.0}% confidence",
            100.0 * share,
            100.0 * c.remote_dram as f64 / beyond as f64,
            100.0 * c.remote_cache as f64 / beyond as f64,
            c.beyond_cache_samples,
            100.0 * crate::stats::wilson(share, c.beyond_cache_samples).0,
            100.0 * crate::stats::CONFIDENCE,
        ),
        evidence,
        fix: "put its pages on the node of the threads that use them most (its other findings and placement say which), or interleave it when every node uses it alike",
        why: "the hardware measured that its accesses missing the local caches were served by another node's memory or caches, each paying the remote latency",
        rests_on: "measured data sources of its load/store samples (remote DRAM and remote cache against local DRAM) and their measured latency",
        basis: basis(
            vec![data(
                "data-source-samples",
                c.beyond_cache_samples,
                "samples",
            )],
            vec![
                at_least(
                    "samples_beyond_caches",
                    c.beyond_cache_samples as f64,
                    MIN_MEMORY_SAMPLES as f64,
                ),
                share_at_least(
                    "measured_remote_share",
                    share,
                    REMOTE_SHARE,
                    Some(c.beyond_cache_samples),
                ),
            ],
        ),
        accesses: beyond,
        remote: c.remote(),
    })
}

/// HITM samples that followed another thread's store to the line.
fn sharing(o: &ObjectSources, s: &HitmSharing) -> Option<Fired> {
    let matched = s.same_word + s.other_word;
    // Every matched sample pairs two threads (a reader and another writer), so the count alone
    // is the minimum.
    if matched < MIN_HITM_SAMPLES {
        return None;
    }
    let other = s.other_word as f64 / matched as f64;
    let same = 1.0 - other;
    // Which of the two, on the samples' bounds: neither when they cannot tell (5 of 10 on
    // another word says nothing about padding).
    let false_sharing = crate::stats::supports(other, matched, FALSE_SHARING_SHARE);
    if !false_sharing && crate::stats::wilson(same, matched).0 <= 1.0 - FALSE_SHARING_SHARE {
        return None;
    }
    let c = &o.counts;
    let mut evidence = vec![
        ("hitm_samples_after_other_writer", matched as f64),
        ("other_word_share", other),
        ("lines", s.lines as f64),
        ("threads", s.threads as f64),
        ("hitm_local", c.hitm_local as f64),
        ("hitm_remote", c.hitm_remote as f64),
    ];
    evidence.push(("window_ns", crate::hitm::SHARING_WINDOW_NS as f64));
    let (id, advice, fix, why) = if false_sharing {
        (
            "hitm-false-sharing",
            "pad-per-thread-data",
            "pad or align each thread's data to its own cache line (64 bytes)",
            "the hardware found these lines modified in another core's cache right after another thread wrote a different word of them: distinct variables share the lines, which bounce between the writers' caches",
        )
    } else {
        (
            "hitm-true-sharing",
            "per-thread-copies",
            "give each thread its own copy of the written variable (counters, accumulators) and combine them at the end, or write it less often",
            "the hardware found these lines modified in another core's cache right after another thread wrote the same word: several threads write one variable, and each write pulls the line from the last writer's cache",
        )
    };
    Some(Fired {
        id,
        advice,
        summary: format!(
            "{matched} HITM samples on {} cache lines came within {} ms of another thread's store to the line ({:.0}% on another word), among {} threads",
            s.lines,
            crate::hitm::SHARING_WINDOW_NS / 1_000_000,
            100.0 * other,
            s.threads,
        ),
        evidence,
        fix,
        why,
        rests_on: "HITM snoops of its load/store samples matched with sampled stores of other threads to the same cache line",
        basis: basis(
            vec![data("hitm-samples", matched, "samples")],
            vec![
                at_least(
                    "hitm_samples_after_other_writer",
                    matched as f64,
                    MIN_HITM_SAMPLES as f64,
                ),
                if false_sharing {
                    share_at_least(
                        "other_word_share",
                        other,
                        FALSE_SHARING_SHARE,
                        Some(matched),
                    )
                } else {
                    share_at_least(
                        "same_word_share",
                        same,
                        1.0 - FALSE_SHARING_SHARE,
                        Some(matched),
                    )
                },
            ],
        ),
        accesses: c.hitm(),
        remote: c.hitm_remote,
    })
}
