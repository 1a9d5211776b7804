//! The findings of docs/FINDINGS.md: each rule looks at one object's aggregates (or, for
//! mixed page ownership, at the pages small objects share) and says what is wrong, the evidence,
//! the fix and what it costs.

use crate::classify::THRESHOLDS;
use crate::engine::{ObjAgg, Part, total};

/// What the rules need to know about one object besides its aggregates.
pub(crate) struct Facts {
    /// All accesses of the profile.
    pub all: u64,
    /// Stddev/mean of accesses over its accessed pages.
    pub page_cv: f64,
    /// Accesses in regions whose owner thread changed between time buckets (samples), or on
    /// pages handed over from one thread to another (first-access times of exact counts).
    pub phase_accesses: u64,
    /// A stack or thread-local block: sharing findings do not apply.
    pub private_kind: bool,
    /// Nodes of the machine it is placed on.
    pub nodes: usize,
}

/// One rule that fired: (finding id, evidence, the accesses it concerns, their remote part).
pub(crate) struct Fired {
    pub id: &'static str,
    pub evidence: Vec<(&'static str, f64)>,
    pub accesses: u64,
    pub remote: u64,
}

/// The rules, in the order of docs/FINDINGS.md.
pub(crate) fn object_findings(agg: &ObjAgg, f: &Facts) -> Vec<Fired> {
    let acc = total(&agg.rw);
    if acc == 0 || (acc as f64) < THRESHOLDS.min_object_share * f.all as f64 {
        return Vec::new();
    }
    let major = |part: &Part| part.accesses as f64 >= THRESHOLDS.majority * acc as f64;
    let share = |n: u64| n as f64 / acc as f64;
    let mut out = Vec::new();
    let phase = f.phase_accesses.max(agg.migratory.accesses);
    let phased = phase as f64 >= THRESHOLDS.majority * acc as f64;
    // A thread's stack (or TLS) is its own: what other threads read there are a few shared
    // variables, which no placement of the stack improves.
    let private_kind = f.private_kind;
    if agg.mismatched.accesses as f64 >= THRESHOLDS.mismatch_share * acc as f64 {
        let toucher_pages = agg.touchers.values().copied().max().unwrap_or(0);
        out.push(Fired {
            id: "first-touch-mismatch",
            evidence: vec![
                ("mismatched_pages", agg.mismatched.pages as f64),
                ("pages", agg.pages as f64),
                ("mismatched_access_share", share(agg.mismatched.accesses)),
                (
                    "top_first_toucher_page_share",
                    toucher_pages as f64 / agg.pages.max(1) as f64,
                ),
                ("users", agg.users.len() as f64),
            ],
            accesses: agg.mismatched.accesses,
            remote: agg.mismatched.remote,
        });
    }
    let reads = agg.rw[0] as f64 / acc as f64;
    let read_only = agg.classes[1].1 as f64 >= THRESHOLDS.majority * acc as f64;
    if major(&agg.wide_shared) && !phased && !private_kind {
        let shared = |id, extra: Vec<(&'static str, f64)>| {
            let mut evidence = vec![
                ("shared_access_share", share(agg.wide_shared.accesses)),
                ("users", agg.users.len() as f64),
                ("read_ratio", reads),
            ];
            evidence.extend(extra);
            Fired {
                id,
                evidence,
                accesses: agg.wide_shared.accesses,
                remote: agg.wide_shared.remote,
            }
        };
        if read_only && reads >= THRESHOLDS.read_ratio {
            out.push(shared("shared-read-only", vec![]));
        } else if f.page_cv >= THRESHOLDS.hotspot_cv {
            out.push(shared("hotspot", vec![("page_cv", f.page_cv)]));
        } else if agg.pages as usize >= f.nodes {
            out.push(shared("shared-read-write", vec![("page_cv", f.page_cv)]));
        }
    }
    let comm = agg.neighbour_comm + agg.other_comm;
    if comm > 0
        && agg.neighbour_pairs >= 2
        && agg.neighbour_comm as f64 >= THRESHOLDS.neighbour_share * comm as f64
        && !major(&agg.wide_shared)
        && !phased
        && !private_kind
    {
        out.push(Fired {
            id: "neighbour-sharing",
            evidence: vec![
                ("neighbour_pairs", agg.neighbour_pairs as f64),
                (
                    "neighbour_communication_share",
                    agg.neighbour_comm as f64 / comm as f64,
                ),
                ("communication", comm as f64),
            ],
            accesses: agg.neighbour_comm,
            remote: agg.neighbour.remote,
        });
    }
    if phased {
        out.push(Fired {
            id: "phase-change",
            evidence: vec![
                ("phase_access_share", share(phase)),
                ("migratory_pages", agg.migratory.pages as f64),
            ],
            accesses: phase,
            remote: agg.remote.min(phase),
        });
    }
    let writes = agg.rw[1].max(1) as f64;
    let enough = |n: u64| n > 0 && n as f64 >= THRESHOLDS.false_sharing_share * writes;
    if enough(agg.false_shared_writes) {
        out.push(Fired {
            id: "false-sharing",
            evidence: vec![
                ("false_shared_pages", agg.false_shared.pages as f64),
                (
                    "false_shared_write_share",
                    agg.false_shared_writes as f64 / writes,
                ),
                ("writers", agg.users.len() as f64),
            ],
            accesses: agg.false_shared.accesses,
            remote: agg.false_shared.remote,
        });
    } else if enough(agg.candidate_writes) {
        // Page counts cannot tell writers alternating on a line from writers taking the lines
        // in turns between phases, or from one contended variable: a padding made on that
        // evidence alone can cost a day for nothing, so this only says what to record.
        out.push(Fired {
            id: "false-sharing-candidate",
            evidence: vec![
                ("candidate_pages", agg.candidate.pages as f64),
                (
                    "candidate_write_share",
                    agg.candidate_writes as f64 / writes,
                ),
                ("writers", agg.users.len() as f64),
            ],
            accesses: agg.candidate.accesses,
            remote: agg.candidate.remote,
        });
    }
    out
}

/// (advice id, fix, why) of a finding id.
pub(crate) fn advice(id: &str) -> (&'static str, &'static str, &'static str) {
    match id {
        "first-touch-mismatch" => (
            "parallel-first-touch",
            "initialise the object in a parallel loop with the same distribution as the compute loops",
            "Linux places a page on the node of the thread that touches it first; the threads that use these pages did not touch them first, so their accesses go to another node",
        ),
        "shared-read-only" => (
            "replicate",
            "keep one copy per node after initialisation, each thread reading its node's copy",
            "it is read by threads on every node and not written after its initialisation, so a copy per node makes every read local",
        ),
        "shared-read-write" => (
            "interleave",
            "interleave the object's pages over all nodes so no memory controller is the bottleneck",
            "all threads read and write all of it at once: no placement makes it local, but spreading it spreads the load over every memory controller",
        ),
        "hotspot" => (
            "cyclic-split-schedule",
            "change the loop schedule so each thread (node) owns a part of the hot band: cyclic, then split",
            "most accesses hit a band of its pages that every thread uses, so the node holding the band serves most of the traffic",
        ),
        "neighbour-sharing" => (
            "co-locate-threads",
            "place neighbouring threads on the same node, so shared pages are local to both",
            "threads share pages only with their logical neighbours; threads on one node make those pages local to both",
        ),
        "phase-change" => (
            "migrate-between-phases",
            "move the pages (or re-initialise in parallel) at the phase boundary, or interleave if phases are short",
            "the thread using each part of the object changes between phases of the run, so a placement right for one phase is wrong for the next",
        ),
        "false-sharing" => (
            "pad-per-thread-data",
            "pad or align each thread's data to its own cache line (64 bytes)",
            "several threads write distinct bytes of the same cache lines, alternating within a millisecond, so the line bounces between their caches (and nodes) on every write",
        ),
        "false-sharing-candidate" => (
            "record-write-times",
            "change nothing yet: record again with write samples (`--backend inst` with `--inst-mode both` or `sampled`, or a PMU backend with store samples) to see whether the writers alternate on the same cache lines; pad only if the report then says false-sharing",
            "several threads each write its pages many times per word, but exact page counts carry no write times and no addresses within the page: writers alternating on a line (false sharing), writers taking the lines in turns in different phases, and one contended variable all look the same",
        ),
        _ => (
            "allocate-in-thread",
            "allocate each thread's objects in that thread (per-thread arenas place them locally)",
            "small objects used by different threads were allocated together by another thread, so they share pages, and no page can be local to all its users",
        ),
    }
}
