//! The findings of docs/FINDINGS.md: each rule looks at one object's aggregates (or, for
//! mixed page ownership, at the pages small objects share) and says what is wrong, the evidence,
//! the fix and what it costs.

use crate::basis::{at_least, below, share_at_least};
use crate::classify::THRESHOLDS;
use crate::engine::{ObjAgg, total};
use crate::model::BasisTest;

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
    /// Whether its accesses are samples (else exact counts).
    pub sampled: bool,
}

/// One rule that fired: (finding id, evidence, the accesses it concerns, their remote part, the
/// thresholds it passed).
pub(crate) struct Fired {
    pub id: &'static str,
    pub evidence: Vec<(&'static str, f64)>,
    pub accesses: u64,
    pub remote: u64,
    /// Every threshold the rule passed (`basis`).
    pub tests: Vec<BasisTest>,
    /// The accesses (exact) or samples its tests looked at, when not the object's own (the
    /// pages of a site's small objects).
    pub data_count: Option<u64>,
}

/// How a share of an object's accesses is held against a rule's threshold. Exact counts are the
/// accesses themselves: the share is compared as it is. Samples give an estimate: the share
/// counts only when its lower confidence bound (`stats::wilson`) reaches the threshold, so an
/// object with a few dozen samples needs a clear share, and one with thousands about the share
/// exact counts would need. `samples` is how many samples the share is measured on.
#[derive(Clone, Copy)]
struct Judge {
    sampled: bool,
    samples: u64,
}

impl Judge {
    /// Whether a share `part / whole` reaches `threshold`; the share is of the samples in
    /// proportion to `whole` among the object's `acc` accesses.
    fn reaches(self, part: u64, whole: u64, acc: u64, threshold: f64) -> bool {
        self.reaches_on(part, whole, whole, acc, threshold)
    }

    /// Whether a share `part / whole` reaches `threshold`, measured on the samples of `basis`
    /// of the object's `acc` accesses.
    fn reaches_on(self, part: u64, whole: u64, basis: u64, acc: u64, threshold: f64) -> bool {
        if whole == 0 {
            return false;
        }
        let share = part as f64 / whole as f64;
        if !self.sampled {
            return share >= threshold;
        }
        crate::stats::supports(share, self.on(basis, acc), threshold)
    }

    /// The samples behind `whole` of the object's `acc` accesses.
    fn on(self, whole: u64, acc: u64) -> u64 {
        if acc == 0 {
            return 0;
        }
        (self.samples as f64 * (whole.min(acc) as f64 / acc as f64)) as u64
    }

    /// What a finding from samples rests on (`stats::evidence`); nothing for exact counts.
    fn evidence(self, part: u64, whole: u64, acc: u64) -> Vec<(&'static str, f64)> {
        self.evidence_on(part, whole, whole, acc)
    }

    fn evidence_on(self, part: u64, whole: u64, basis: u64, acc: u64) -> Vec<(&'static str, f64)> {
        if !self.sampled || whole == 0 {
            return Vec::new();
        }
        crate::stats::evidence(part as f64 / whole as f64, self.on(basis, acc))
    }

    /// The test [`Judge::reaches`] made, for the finding's basis.
    fn test(self, measure: &str, part: u64, whole: u64, acc: u64, threshold: f64) -> BasisTest {
        self.test_on(measure, part, whole, whole, acc, threshold)
    }

    /// The test [`Judge::reaches_on`] made.
    fn test_on(
        self,
        measure: &str,
        part: u64,
        whole: u64,
        basis: u64,
        acc: u64,
        threshold: f64,
    ) -> BasisTest {
        let share = part as f64 / whole.max(1) as f64;
        let samples = self.sampled.then(|| self.on(basis, acc));
        share_at_least(measure, share, threshold, samples)
    }
}

/// The rules, in the order of docs/FINDINGS.md.
pub(crate) fn object_findings(agg: &ObjAgg, f: &Facts) -> Vec<Fired> {
    let acc = total(&agg.rw);
    if acc == 0 || (acc as f64) < THRESHOLDS.min_object_share * f.all as f64 {
        return Vec::new();
    }
    let judge = Judge {
        sampled: f.sampled,
        samples: agg.samples,
    };
    let phase = f.phase_accesses.max(agg.migratory.accesses);
    // What a pattern rules out it rules out on its measured share, even where the samples
    // cannot support that share enough to report the pattern itself.
    let major = |n: u64| n as f64 >= THRESHOLDS.majority * acc as f64;
    let (phased, wide) = (major(phase), major(agg.wide_shared.accesses));
    let mut out = Vec::new();
    // Every finding of the object passed this first.
    let gate = at_least(
        "object_access_share",
        acc as f64 / f.all.max(1) as f64,
        THRESHOLDS.min_object_share,
    );
    out.extend(first_touch(agg, acc, judge));
    // A thread's stack (or TLS) is its own: what other threads read there are a few shared
    // variables, which no placement of the stack improves.
    let shared = judge.reaches(agg.wide_shared.accesses, acc, acc, THRESHOLDS.majority);
    if shared && !phased && !f.private_kind {
        out.extend(sharing(agg, acc, f, judge));
    }
    if !wide && !phased && !f.private_kind {
        out.extend(neighbours(agg, acc, judge));
    }
    if judge.reaches(phase, acc, acc, THRESHOLDS.majority) {
        let mut evidence = vec![
            ("phase_access_share", phase as f64 / acc as f64),
            ("migratory_pages", agg.migratory.pages as f64),
        ];
        evidence.extend(judge.evidence(phase, acc, acc));
        out.push(Fired {
            id: "phase-change",
            evidence,
            accesses: phase,
            remote: agg.remote.min(phase),
            data_count: None,
            tests: vec![judge.test("phase_access_share", phase, acc, acc, THRESHOLDS.majority)],
        });
    }
    out.extend(false_sharing(agg, acc, judge));
    for fired in &mut out {
        fired.tests.insert(0, gate.clone());
    }
    out
}

fn first_touch(agg: &ObjAgg, acc: u64, judge: Judge) -> Option<Fired> {
    let mismatched = agg.mismatched.accesses;
    if !judge.reaches(mismatched, acc, acc, THRESHOLDS.mismatch_share) {
        return None;
    }
    let toucher_pages = agg.touchers.values().copied().max().unwrap_or(0);
    let mut evidence = vec![
        ("mismatched_pages", agg.mismatched.pages as f64),
        ("pages", agg.pages as f64),
        ("mismatched_access_share", mismatched as f64 / acc as f64),
        (
            "top_first_toucher_page_share",
            toucher_pages as f64 / agg.touched_pages.max(1) as f64,
        ),
        ("users", agg.users.len() as f64),
    ];
    evidence.extend(judge.evidence(mismatched, acc, acc));
    Some(Fired {
        id: "first-touch-mismatch",
        evidence,
        accesses: mismatched,
        remote: agg.mismatched.remote,
        data_count: None,
        tests: vec![judge.test(
            "mismatched_access_share",
            mismatched,
            acc,
            acc,
            THRESHOLDS.mismatch_share,
        )],
    })
}

/// Widely shared objects: read-only, a hotspot, or read and written all over.
fn sharing(agg: &ObjAgg, acc: u64, f: &Facts, judge: Judge) -> Option<Fired> {
    let reads = agg.rw[0] as f64 / acc as f64;
    let read_only = judge.reaches(agg.classes[1].1, acc, acc, THRESHOLDS.majority)
        && judge.reaches(agg.rw[0], acc, acc, THRESHOLDS.read_ratio);
    let wide = agg.wide_shared.accesses;
    let mut tests = vec![judge.test("shared_access_share", wide, acc, acc, THRESHOLDS.majority)];
    let cv = ("page_cv", f.page_cv, THRESHOLDS.hotspot_cv);
    let (id, extra) = if read_only {
        tests.extend([
            judge.test(
                "read_only_access_share",
                agg.classes[1].1,
                acc,
                acc,
                THRESHOLDS.majority,
            ),
            judge.test("read_ratio", agg.rw[0], acc, acc, THRESHOLDS.read_ratio),
        ]);
        ("shared-read-only", judge.evidence(agg.rw[0], acc, acc))
    } else if f.page_cv >= THRESHOLDS.hotspot_cv {
        tests.push(at_least(cv.0, cv.1, cv.2));
        ("hotspot", vec![("page_cv", f.page_cv)])
    } else if agg.pages as usize >= f.nodes {
        tests.extend([
            below(cv.0, cv.1, cv.2),
            at_least("pages", agg.pages as f64, f.nodes as f64),
        ]);
        ("shared-read-write", vec![("page_cv", f.page_cv)])
    } else {
        return None;
    };
    let mut evidence = vec![
        (
            "shared_access_share",
            agg.wide_shared.accesses as f64 / acc as f64,
        ),
        ("users", agg.users.len() as f64),
        ("read_ratio", reads),
    ];
    evidence.extend(extra);
    if id != "shared-read-only" {
        evidence.extend(judge.evidence(agg.wide_shared.accesses, acc, acc));
    }
    Some(Fired {
        id,
        evidence,
        accesses: agg.wide_shared.accesses,
        remote: agg.wide_shared.remote,
        data_count: None,
        tests,
    })
}

/// Communication between neighbours. A pair communicates on a page by the smaller of its two
/// counts, so the share is measured on the samples of the pages with two or more users, not on
/// that minimum.
fn neighbours(agg: &ObjAgg, acc: u64, judge: Judge) -> Option<Fired> {
    let comm = agg.neighbour_comm.saturating_add(agg.other_comm);
    let on = agg.communicating;
    let share = THRESHOLDS.neighbour_share;
    let comm_share = comm as f64 / acc.max(1) as f64;
    if comm == 0
        || agg.neighbour_pairs < 2
        || comm_share < THRESHOLDS.min_communication_share
        || !judge.reaches_on(agg.neighbour_comm, comm, on, acc, share)
    {
        return None;
    }
    let mut evidence = vec![
        ("neighbour_pairs", agg.neighbour_pairs as f64),
        (
            "neighbour_communication_share",
            agg.neighbour_comm as f64 / comm as f64,
        ),
        ("communication", comm as f64),
        ("communication_access_share", comm_share),
    ];
    evidence.extend(judge.evidence_on(agg.neighbour_comm, comm, on, acc));
    Some(Fired {
        id: "neighbour-sharing",
        evidence,
        accesses: agg.neighbour_comm,
        remote: agg.neighbour.remote,
        data_count: None,
        tests: vec![
            at_least("neighbour_pairs", agg.neighbour_pairs as f64, 2.0),
            at_least(
                "communication_access_share",
                comm_share,
                THRESHOLDS.min_communication_share,
            ),
            judge.test_on(
                "neighbour_communication_share",
                agg.neighbour_comm,
                comm,
                on,
                acc,
                share,
            ),
        ],
    })
}

fn false_sharing(agg: &ObjAgg, acc: u64, judge: Judge) -> Option<Fired> {
    let writes = agg.rw[1].max(1);
    let share = THRESHOLDS.false_sharing_share;
    let enough = |n: u64| n > 0 && judge.reaches(n, writes, acc, share);
    if enough(agg.false_shared_writes) {
        let mut evidence = vec![
            ("false_shared_pages", agg.false_shared.pages as f64),
            (
                "false_shared_write_share",
                agg.false_shared_writes as f64 / writes as f64,
            ),
            ("writers", agg.users.len() as f64),
        ];
        evidence.extend(judge.evidence(agg.false_shared_writes, writes, acc));
        return Some(Fired {
            id: "false-sharing",
            evidence,
            accesses: agg.false_shared.accesses,
            remote: agg.false_shared.remote,
            data_count: None,
            tests: vec![judge.test(
                "false_shared_write_share",
                agg.false_shared_writes,
                writes,
                acc,
                share,
            )],
        });
    }
    // Page counts cannot tell writers alternating on a line from writers taking the lines in
    // turns between phases, or from one contended variable: a padding made on that evidence
    // alone can cost a day for nothing, so this only says what to record.
    let mut evidence = vec![
        ("candidate_pages", agg.candidate.pages as f64),
        (
            "candidate_write_share",
            agg.candidate_writes as f64 / writes as f64,
        ),
        ("writers", agg.users.len() as f64),
    ];
    if agg.candidate_store_samples > 0 {
        evidence.push((
            "candidate_store_samples",
            agg.candidate_store_samples as f64,
        ));
    }
    enough(agg.candidate_writes).then(|| Fired {
        id: "false-sharing-candidate",
        evidence,
        accesses: agg.candidate.accesses,
        remote: agg.candidate.remote,
        data_count: None,
        tests: vec![judge.test(
            "candidate_write_share",
            agg.candidate_writes,
            writes,
            acc,
            share,
        )],
    })
}

/// Store samples wanted on each candidate page before its lines can show writers alternating:
/// one per 64-byte line of a 4 KiB page.
pub(crate) const STORE_SAMPLES_WANTED_PER_PAGE: u64 = 64;

/// The fix of a fired finding: its rule's, except for a false-sharing candidate whose pages
/// already had store samples, too few of them: then recording again with store samples is no
/// news, and the fix says how much more often to sample. `sample_every` is the recording's
/// `--sample-every`, when the `inst` backend sampled, and `rate_capped` whether it had a
/// `--max-sample-rate`, which must then be lifted too.
pub(crate) fn fix_of(f: &Fired, sample_every: Option<u64>, rate_capped: bool) -> String {
    let fixed = advice(f.id).1;
    let ev = |k: &str| {
        f.evidence
            .iter()
            .find(|(key, _)| *key == k)
            .map(|(_, v)| *v)
    };
    let Some(samples) = ev("candidate_store_samples").filter(|_| f.id == "false-sharing-candidate")
    else {
        return fixed.into();
    };
    let samples = samples as u64;
    let pages = ev("candidate_pages").unwrap_or(1.0).max(1.0) as u64;
    let wanted = pages.saturating_mul(STORE_SAMPLES_WANTED_PER_PAGE);
    let shorter = match sample_every {
        Some(every) => {
            let n = (every.saturating_mul(samples) / wanted.max(1)).clamp(1, (every / 2).max(1));
            let uncapped = if rate_capped {
                " --max-sample-rate 0"
            } else {
                ""
            };
            format!(
                "record again sampling more often: `--sample-every {n}{uncapped}` instead of {every} would give about {} store samples there, {STORE_SAMPLES_WANTED_PER_PAGE} a page",
                samples.saturating_mul(every) / n
            )
        }
        None => format!(
            "record again with store samples about {} times as often (a shorter sampling period), for {STORE_SAMPLES_WANTED_PER_PAGE} a page",
            wanted.div_ceil(samples.max(1)).max(2)
        ),
    };
    format!(
        "change nothing yet: {samples} store samples fell on its {pages} candidate pages, none on a line two threads wrote: too few to see whether the writers alternate on the same cache lines; {shorter}; pad only if the report then says false-sharing"
    )
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
