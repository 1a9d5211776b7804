//! Which HITM samples show cache lines moving between writers: a sample that found its line
//! modified in another core's cache (HITM), with a sampled store of another thread to the same
//! line shortly before it. The samples are stored by thread, so the HITM samples are kept from the
//! first pass (they are few: a HITM is a sampled access that missed every local cache) and the
//! stores are matched against them in a second pass.

use std::collections::{HashMap, HashSet};

use numalens_format::Sample;

use crate::model::HitmSharing;

/// A store and a HITM this close in time are one exchange of the line between two threads:
/// the false-sharing rule's millisecond (docs/FINDINGS.md).
pub(crate) const SHARING_WINDOW_NS: u64 = 1_000_000;

/// HITM samples kept at most; beyond, later ones are counted but not matched (memory stays
/// bounded whatever the profile).
const MAX_HITM_SAMPLES: usize = 1 << 20;

const LINE_SHIFT: u32 = 6;

struct HitmSample {
    tid: u32,
    time_ns: u64,
    word: u8,
    /// The closest store of another thread seen so far: (distance in ns, same word, writer).
    matched: Option<(u64, bool, u32)>,
}

/// HITM samples by (object, cache line), sorted by time once the first pass is over.
#[derive(Default)]
pub(crate) struct HitmLines {
    lines: HashMap<(u64, u64), Vec<HitmSample>>,
    kept: usize,
    sorted: bool,
}

fn word(address: u64) -> u8 {
    ((address >> 3) & 7) as u8
}

impl HitmLines {
    pub(crate) fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    pub(crate) fn add_hitm(&mut self, object: u64, s: &Sample) {
        if self.kept >= MAX_HITM_SAMPLES {
            return;
        }
        self.kept += 1;
        self.lines
            .entry((object, s.address >> LINE_SHIFT))
            .or_default()
            .push(HitmSample {
                tid: s.tid,
                time_ns: s.time_ns,
                word: word(s.address),
                matched: None,
            });
    }

    /// Matches a store against the HITM samples of other threads on its line within the window
    /// after it.
    pub(crate) fn add_store(&mut self, s: &Sample) {
        let Some(object) = s.object_id else { return };
        if !self.sorted {
            for v in self.lines.values_mut() {
                v.sort_by_key(|h| h.time_ns);
            }
            self.sorted = true;
        }
        let Some(hitms) = self.lines.get_mut(&(object, s.address >> LINE_SHIFT)) else {
            return;
        };
        // The store must come first: the HITM found the line modified in the writer's cache.
        let from = hitms.partition_point(|h| h.time_ns < s.time_ns);
        let same = word(s.address);
        for h in hitms[from..]
            .iter_mut()
            .take_while(|h| h.time_ns <= s.time_ns.saturating_add(SHARING_WINDOW_NS))
        {
            if h.tid == s.tid {
                continue;
            }
            let distance = h.time_ns.abs_diff(s.time_ns);
            if h.matched.is_none_or(|(d, _, _)| distance < d) {
                h.matched = Some((distance, h.word == same, s.tid));
            }
        }
    }

    /// Per object, the HITM samples that came with another thread's store, by word.
    pub(crate) fn sharing(&mut self) -> HashMap<u64, HitmSharing> {
        let mut out: HashMap<u64, (HitmSharing, HashSet<u32>)> = HashMap::new();
        for ((object, _), hitms) in &self.lines {
            let mut line_counted = false;
            for h in hitms {
                let Some((_, same_word, writer)) = h.matched else {
                    continue;
                };
                let (s, threads) = out.entry(*object).or_default();
                if same_word {
                    s.same_word += 1;
                } else {
                    s.other_word += 1;
                }
                if !line_counted {
                    s.lines += 1;
                    line_counted = true;
                }
                threads.insert(h.tid);
                threads.insert(writer);
            }
        }
        out.into_iter()
            .map(|(object, (mut s, threads))| {
                s.threads = threads.len() as u64;
                (object, s)
            })
            .collect()
    }
}
