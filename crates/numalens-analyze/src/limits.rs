//! What a profile's evidence cannot tell, said before anything else.
//!
//! A profile of page faults alone (the `faults` backend on a machine whose kernel sends no NUMA
//! hinting faults: one node, or balancing off) knows which thread first touched each page and
//! where the page went, not which threads use it afterwards. Counting those faults as accesses
//! made every object "private" to its first toucher and the findings "nothing wrong", on
//! programs with a first-touch mismatch and shared arrays. So such a profile's sharing and main
//! users are unknown, no finding or what-if is drawn from it, and the report says how to record
//! what can tell.

use crate::model::{KindCounts, Limits, ReportModel};

/// The sharing class shown where the evidence cannot tell one.
pub const UNKNOWN: &str = "unknown";

/// Whether the only evidence of accesses is page faults: no exact counts and no load, store or
/// hinting-fault samples. A selection (`--thread`, `--object`) may hold none of those while the
/// profile does (the hints went to other threads, the counts to other objects): then only a
/// faults recording where the kernel could send no hint is faults-only.
pub(crate) fn faults_only(
    samples: &KindCounts,
    exact: bool,
    selected: bool,
    recording: Recording,
) -> bool {
    if selected {
        return recording.backend_faults && !recording.hints_possible;
    }
    !exact && samples.load + samples.store + samples.hint == 0 && samples.total > 0
}

/// What the recording could have seen.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Recording {
    /// Recorded with the `faults` backend.
    pub backend_faults: bool,
    /// The kernel could send NUMA hinting faults: several nodes and balancing on.
    pub hints_possible: bool,
}

impl Recording {
    pub(crate) fn of(model: &ReportModel) -> Self {
        let p = &model.profile;
        Recording {
            backend_faults: p.backend.name == "faults",
            hints_possible: p.topology_nodes.as_ref().is_some_and(|n| n.len() > 1)
                && p.numa_balancing.unwrap_or(0) != 0,
        }
    }
}

/// The limits of a faults-only profile, with the ways to record what it lacks on this host.
pub(crate) fn of_faults_only(model: &ReportModel) -> Limits {
    Limits {
        evidence: "page faults only: one when a thread first touches a page, and later faults \
                   (copy-on-write, a write after a read), not the program's loads and stores"
            .into(),
        cannot_tell: vec![
            "which threads use each object and how much (main user)".into(),
            "how objects are shared (private, read-only, read-write) or falsely shared".into(),
            "remote accesses: the access counts and local ratios here count faults".into(),
            "findings and the what-if: none can be drawn, so an empty list of findings says \
             nothing about the program"
                .into(),
        ],
        remedies: remedies(model),
    }
}

/// Ways to get access data, the ones this host can use first.
fn remedies(model: &ReportModel) -> Vec<String> {
    let rebuild = "rebuild the program with `numalens cc` / `c++` / `fortran` (e.g. `make \
                   CC=\"numalens cc\"`) and record it again: every load and store of each thread \
                   is counted (the `inst` backend, which `record` picks for such a program)"
        .to_string();
    let p = &model.profile;
    let nodes = p.topology_nodes.as_ref().map_or(1, Vec::len);
    let balancing = if nodes < 2 {
        "or record on a machine with several NUMA nodes and NUMA balancing on: the kernel's \
         hinting faults then sample the accesses of the unmodified program (this machine has one \
         node, where the kernel sends none)"
            .to_string()
    } else if p.numa_balancing.unwrap_or(0) == 0 {
        "or record with NUMA balancing on (`sysctl kernel.numa_balancing=1`): the kernel's \
         hinting faults then sample the accesses of the unmodified program"
            .to_string()
    } else {
        "or record a longer run: NUMA balancing was on but sent no hinting fault before the \
         program ended (its first scan waits `kernel.numa_balancing_scan_delay_ms`, 1 s by \
         default)"
            .to_string()
    };
    vec![rebuild, balancing]
}

/// Takes out every verdict that counted faults as accesses: sharing classes and main users of
/// objects and groups, their local ratios, the findings and the what-if.
pub(crate) fn withhold_verdicts(model: &mut ReportModel) {
    for o in &mut model.objects {
        if let Some(a) = &mut o.access {
            a.sharing = UNKNOWN.into();
            a.classes.clear();
            a.main_user = None;
            a.local_ratio = None;
            a.advice.clear();
        }
    }
    for g in &mut model.groups {
        if g.sharing.is_some() {
            g.sharing = Some(UNKNOWN.into());
        }
        g.main_user = None;
        g.local_ratio = None;
        g.advice.clear();
        for i in &mut g.largest {
            i.local_ratio = None;
        }
    }
    for t in &mut model.threads {
        t.access.local_ratio = None;
    }
    model.findings.clear();
    model.what_if = None;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(first_touch: u64, load: u64, hint: u64) -> KindCounts {
        KindCounts {
            load,
            store: 0,
            first_touch,
            hint,
            fault: 0,
            total: first_touch + load + hint,
        }
    }

    const FAULTS: Recording = Recording {
        backend_faults: true,
        hints_possible: false,
    };

    #[test]
    fn faults_alone_are_not_accesses_but_hints_and_loads_are() {
        assert!(faults_only(&kinds(100, 0, 0), false, false, FAULTS));
        assert!(!faults_only(&kinds(100, 0, 3), false, false, FAULTS));
        assert!(!faults_only(&kinds(100, 5, 0), false, false, FAULTS));
        assert!(!faults_only(&kinds(100, 0, 0), true, false, FAULTS));
        assert!(!faults_only(&kinds(0, 0, 0), false, false, FAULTS));
    }

    #[test]
    fn a_selection_without_access_samples_is_faults_only_only_where_no_hint_could_come() {
        let first_touches = kinds(100, 0, 0);
        assert!(faults_only(&first_touches, false, true, FAULTS));
        let inst = Recording {
            backend_faults: false,
            ..FAULTS
        };
        assert!(!faults_only(&first_touches, false, true, inst));
        let balancing = Recording {
            hints_possible: true,
            ..FAULTS
        };
        assert!(!faults_only(&first_touches, false, true, balancing));
    }
}
