//! What one page says: its significant users, its sharing class, its first toucher and dominant
//! user. The thresholds are in [`THRESHOLDS`] and docs/FINDINGS.md says why each is what it is.

use crate::access::SaturatingSum;
use crate::access::{PageAcc, User};
use crate::model::Thresholds;
use crate::phases::Running;

pub(crate) const THRESHOLDS: Thresholds = Thresholds {
    user_fraction: 0.1,
    exclusivity: 0.8,
    min_object_share: 0.01,
    majority: 0.5,
    mismatch_share: 0.4,
    read_ratio: 0.75,
    hotspot_cv: 0.5,
    neighbour_share: 0.9,
    min_communication_share: 0.001,
    false_sharing_share: 0.1,
    hammer_writes_per_word: HAMMER_WRITES_PER_WORD,
    confidence: crate::stats::CONFIDENCE,
};

/// Sharing classes, in the order the model lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Class {
    Private,
    SharedReadOnly,
    SharedReadWrite,
    Migratory,
    FalseSharing,
}

pub(crate) const CLASSES: [Class; 5] = [
    Class::Private,
    Class::SharedReadOnly,
    Class::SharedReadWrite,
    Class::Migratory,
    Class::FalseSharing,
];

impl Class {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Class::Private => "private",
            Class::SharedReadOnly => "shared-read-only",
            Class::SharedReadWrite => "shared-read-write",
            Class::Migratory => "migratory",
            Class::FalseSharing => "false-sharing",
        }
    }
}

/// The verdict on one page.
#[derive(Debug, Clone)]
pub(crate) struct PageView {
    pub accesses: u64,
    /// Significant users (thread ids), most accesses first.
    pub users: Vec<u32>,
    pub class: Class,
    /// The user with more than the exclusivity share (kMAF locality), if any.
    pub dominant: Option<u32>,
    pub first_toucher: Option<u32>,
    /// Writes (sampled) on lines that several threads wrote at distinct bytes, alternating in
    /// time: false sharing.
    pub false_shared_writes: u64,
    /// Writes (exact) of threads that each hammer the page without store samples to say more:
    /// a false-sharing candidate.
    pub candidate_writes: u64,
    /// Store samples on the page when it is a candidate: too few, or none, to show whether its
    /// writers alternate on its lines.
    pub candidate_store_samples: u64,
    /// Accesses of its users that are remote under the placement (set by the engine).
    pub remote: u64,
}

/// Classifies `page`; `exact` when counts come from `page_stats` (no times beyond the first);
/// `lines` is what the store samples on the page say of its cache lines; `running` when the
/// threads ran, from the samples.
pub(crate) fn view(
    page: &PageAcc,
    exact: bool,
    lines: LineEvidence,
    page_size: u64,
    running: &Running,
) -> PageView {
    let mut users: Vec<&User> = page.users.iter().filter(|u| u.accesses() > 0).collect();
    users.sort_by_key(|u| (std::cmp::Reverse(u.accesses()), u.thread));
    let accesses: u64 = users.iter().map(|u| u.accesses()).saturating_sum();
    let top = users.first().map_or(0, |u| u.accesses());
    let second = users.get(1).map_or(0, |u| u.accesses());
    let cut = (top as f64 * THRESHOLDS.user_fraction).max(1.0);
    let significant: Vec<&User> = users
        .iter()
        .copied()
        .filter(|u| u.accesses() as f64 >= cut)
        .collect();
    // kMAF's locality rule, on threads: one implementation with the policy's. kMAF counts
    // samples, and its "more than twice the second plus one" asks a lone user for two of them:
    // one sample on a page is an instant, not a user's majority. Weighted samples keep that
    // floor (the weights themselves would make the "+ 1" nothing; and a first-touch fault,
    // weight 1, stands for far fewer accesses than a load sample, so counts of samples of
    // different weights are not compared).
    let dominant =
        (numalens_place::policies::dominates(top, second, accesses, THRESHOLDS.exclusivity)
            && (exact || users[0].samples >= 2))
            .then(|| users[0].thread);
    // Exact counts hold no time below the run, so a hammered page is only a candidate; and
    // store samples showing its shared lines written at other times than each other rule even
    // that out.
    let candidate_writes = if exact && dominant.is_none() && lines.shared_line_writes == 0 {
        hammered_writes(&significant, page_size)
    } else {
        0
    };
    let false_shared_writes = lines.interleaved_writes;
    let class = if false_shared_writes > 0 || candidate_writes > 0 {
        Class::FalseSharing
    } else if significant.len() <= 1 || dominant.is_some() {
        Class::Private
    } else if !exact && handed_over(&significant, running) {
        Class::Migratory
    } else if writers(&significant) <= 1 {
        Class::SharedReadOnly
    } else {
        Class::SharedReadWrite
    };
    PageView {
        accesses,
        users: significant.iter().map(|u| u.thread).collect(),
        class,
        dominant,
        first_toucher: first_toucher(page, exact),
        false_shared_writes,
        candidate_writes,
        candidate_store_samples: if candidate_writes > 0 {
            lines.store_samples
        } else {
            0
        },
        remote: 0,
    }
}

/// Writes per 8-byte word of a page, per writer, above which exact counts call a page written by
/// several threads a false-sharing candidate: a few words written over and over in turn by
/// several threads (counters, flags), which page counts cannot tell from one contended variable.
pub(crate) const HAMMER_WRITES_PER_WORD: u64 = 64;

/// With exact counts only (no addresses below the page): the writes of the users that each write
/// the page more than [`HAMMER_WRITES_PER_WORD`] times per word, when at least two do.
fn hammered_writes(users: &[&User], page_size: u64) -> u64 {
    let cut = HAMMER_WRITES_PER_WORD * (page_size / 8).max(1);
    let hammering: Vec<u64> = users
        .iter()
        .map(|u| u.writes)
        .filter(|w| *w >= cut)
        .collect();
    if hammering.len() >= 2 {
        hammering.iter().saturating_sum()
    } else {
        0
    }
}

/// Threads that write a significant part of what they access (a stray write does not count).
fn writers(users: &[&User]) -> usize {
    let top_writes = users.iter().map(|u| u.writes + u.other).max().unwrap_or(0);
    let cut = (top_writes as f64 * THRESHOLDS.user_fraction).max(1.0);
    users
        .iter()
        .filter(|u| (u.writes + u.other) as f64 >= cut)
        .count()
}

/// Whether the users came to the page one after the other: no two sampled lifetimes on it
/// overlap, each came while the one before it was still running elsewhere (or the one before
/// ran on while it had the page), and their samples are too many for that order to be luck.
/// A thread with one sample on a page has a lifetime of one instant, which overlaps nothing:
/// four threads reading a page at once, one sample each, would otherwise look like four threads
/// taking it in turns. And threads that take turns on the cores use every page one after the
/// other without handing anything over.
fn handed_over(users: &[&User], running: &Running) -> bool {
    if overlapping(users) {
        return false;
    }
    let mut spans: Vec<&User> = users.to_vec();
    spans.sort_by_key(|u| (u.first_ns, u.thread));
    let side_by_side = spans.windows(2).all(|w| {
        running.ran_within(w[1].thread, w[0].first_ns, w[0].last_ns)
            || running.ran_within(w[0].thread, w[1].first_ns, w[1].last_ns)
    });
    let samples: Vec<u64> = users.iter().map(|u| u.samples).collect();
    side_by_side && crate::stats::grouped_by_chance(&samples) <= crate::stats::ALPHA
}

/// Whether some two users' sampled lifetimes on the page overlap in time.
fn overlapping(users: &[&User]) -> bool {
    let mut spans: Vec<(u64, u64)> = users.iter().map(|u| (u.first_ns, u.last_ns)).collect();
    spans.sort_unstable();
    spans.windows(2).any(|w| w[1].0 <= w[0].1)
}

/// The thread that placed the page: the first-touch fault's, else the earliest access's.
fn first_toucher(page: &PageAcc, exact: bool) -> Option<u32> {
    if !exact && let Some(t) = page.touch {
        return Some(t.thread);
    }
    page.users
        .iter()
        .min_by_key(|u| (u.first_ns, u.thread))
        .map(|u| u.thread)
}

/// What the store samples of one page say of its cache lines.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct LineEvidence {
    /// Writes on lines that two or more threads wrote at distinct bytes, at any times.
    pub shared_line_writes: u64,
    /// The part of them that alternated with another writer of the line within
    /// [`crate::access::INTERLEAVE_NS`].
    pub interleaved_writes: u64,
    /// Store samples on the page, of any thread.
    pub store_samples: u64,
}

/// Writes on cache lines of the page that two or more threads wrote at distinct bytes: all of
/// them, and those whose writers alternated on the line in time. Writers that share lines only
/// across phases (one thread writes every line, later another does) are not false sharing.
pub(crate) fn line_evidence(page: &PageAcc) -> LineEvidence {
    let store_samples = page.users.iter().map(|u| u.write_samples).saturating_sum();
    let writers: Vec<&User> = page.users.iter().filter(|u| u.written_lines != 0).collect();
    if writers.len() < 2 {
        return LineEvidence {
            store_samples,
            ..LineEvidence::default()
        };
    }
    let mut shared = vec![false; writers.len()];
    let mut alternating = vec![false; writers.len()];
    for (i, a) in writers.iter().enumerate() {
        for (j, b) in writers.iter().enumerate().skip(i + 1) {
            if a.written_bytes & b.written_bytes != 0 {
                // The same bytes: one shared variable, not false sharing.
                continue;
            }
            if a.written_lines & b.written_lines != 0 {
                shared[i] = true;
                shared[j] = true;
            }
            if a.interleaved_lines & b.interleaved_lines != 0 {
                alternating[i] = true;
                alternating[j] = true;
            }
        }
    }
    let sum = |involved: &[bool], writes: fn(&User) -> u64| {
        writers
            .iter()
            .zip(involved)
            .filter(|(_, inv)| **inv)
            .map(|(u, _)| writes(u))
            .saturating_sum()
    };
    LineEvidence {
        shared_line_writes: sum(&shared, |u| u.writes),
        interleaved_writes: sum(&alternating, |u| u.interleaved_writes),
        store_samples,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(thread: u32, reads: u64, writes: u64, span: (u64, u64)) -> User {
        User {
            thread,
            reads,
            writes,
            first_ns: span.0,
            last_ns: span.1,
            ..User::default()
        }
    }

    fn page(users: Vec<User>) -> PageAcc {
        PageAcc {
            object: 0,
            users: users.into(),
            touch: None,
        }
    }

    #[test]
    fn classes_of_pages() {
        let none = LineEvidence::default();
        let ran = Running::in_buckets(1, &[(0, 0..64), (1, 0..64)]);
        let private = page(vec![user(0, 100, 100, (0, 9)), user(1, 5, 0, (0, 9))]);
        let v = view(&private, true, none, 4096, &ran);
        assert_eq!(
            (v.class, v.dominant, v.users.len()),
            (Class::Private, Some(0), 1)
        );
        // From samples, one sample does not make a dominant user; two do.
        let mut lone = page(vec![user(0, 1024, 0, (0, 0))]);
        lone.users[0].samples = 1;
        assert_eq!(view(&lone, false, none, 4096, &ran).dominant, None);
        lone.users[0].samples = 2;
        assert_eq!(view(&lone, false, none, 4096, &ran).dominant, Some(0));
        let ro = page(vec![user(0, 50, 10, (0, 9)), user(1, 60, 0, (0, 9))]);
        assert_eq!(
            view(&ro, true, none, 4096, &ran).class,
            Class::SharedReadOnly
        );
        let rw = page(vec![user(0, 50, 10, (0, 9)), user(1, 60, 20, (0, 9))]);
        assert_eq!(
            view(&rw, true, none, 4096, &ran).class,
            Class::SharedReadWrite
        );
        let mut moved = page(vec![user(0, 50, 10, (0, 9)), user(1, 60, 20, (10, 19))]);
        // Two samples each, one thread's before the other's: a third of all orders do that.
        moved.users.iter_mut().for_each(|u| u.samples = 2);
        assert_eq!(
            view(&moved, false, none, 4096, &ran).class,
            Class::SharedReadWrite
        );
        moved.users.iter_mut().for_each(|u| u.samples = 8);
        assert_eq!(
            view(&moved, false, none, 4096, &ran).class,
            Class::Migratory
        );
        // The same, each thread running only while it had the page: turns on a core.
        let turns = Running::in_buckets(1, &[(0, 0..10), (1, 10..20)]);
        assert_eq!(
            view(&moved, false, none, 4096, &turns).class,
            Class::SharedReadWrite
        );
        assert_eq!(
            view(&moved, true, none, 4096, &ran).class,
            Class::SharedReadWrite
        );
        let alternating = LineEvidence {
            shared_line_writes: 30,
            interleaved_writes: 3,
            ..LineEvidence::default()
        };
        let v = view(&rw, false, alternating, 4096, &ran);
        assert_eq!((v.class, v.false_shared_writes), (Class::FalseSharing, 3));
        // Lines shared only at different times: not false sharing.
        let in_turns = LineEvidence {
            shared_line_writes: 30,
            interleaved_writes: 0,
            ..LineEvidence::default()
        };
        assert_eq!(
            view(&rw, false, in_turns, 4096, &ran).class,
            Class::SharedReadWrite
        );
        let hammered = page(vec![user(0, 0, 40_000, (0, 9)), user(1, 0, 40_000, (0, 9))]);
        let v = view(&hammered, true, none, 4096, &ran);
        assert_eq!(
            (v.class, v.false_shared_writes, v.candidate_writes),
            (Class::FalseSharing, 0, 80_000)
        );
        // Store samples that saw the lines written in turns rule the candidate out.
        let v = view(&hammered, true, in_turns, 4096, &ran);
        assert_eq!((v.class, v.candidate_writes), (Class::SharedReadWrite, 0));
        assert_eq!(
            view(&hammered, false, none, 4096, &ran).class,
            Class::SharedReadWrite
        );
    }

    #[test]
    fn distinct_bytes_of_one_line_alternating_are_false_sharing() {
        let w = |thread, byte: u64, interleaved: bool| User {
            thread,
            writes: 10,
            written_lines: 1,
            written_bytes: 1 << byte,
            interleaved_writes: if interleaved { 4 } else { 0 },
            interleaved_lines: u64::from(interleaved),
            ..User::default()
        };
        let e = |users| line_evidence(&page(users));
        assert_eq!(
            e(vec![w(0, 0, true), w(1, 8, true)]),
            LineEvidence {
                shared_line_writes: 20,
                interleaved_writes: 8,
                ..LineEvidence::default()
            }
        );
        assert_eq!(
            e(vec![w(0, 0, false), w(1, 8, false)]),
            LineEvidence {
                shared_line_writes: 20,
                interleaved_writes: 0,
                ..LineEvidence::default()
            }
        );
        assert_eq!(
            e(vec![w(0, 0, true), w(1, 0, true)]),
            LineEvidence::default()
        );
    }
}
