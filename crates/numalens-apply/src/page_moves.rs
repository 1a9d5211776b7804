//! The engine's page moves between deciding and moving, a byte each per tracked page: the
//! backlog (the node of the move waiting for the mover and its priority, the log2 of the page's
//! accesses in the window that decided it, so that the mover takes the most used pages first;
//! a page's latest decision wins) and the ping-pong guard (a page moved `moves` times within `epochs` epochs is not moved again until
//! the window has passed). Kept by page index, beside the policy's own state, rather than in
//! tables keyed by address: the pages an online policy moves are often most of those it
//! tracks (SPM's round moves every page whose users are elsewhere).

use ahash::AHashMap;

/// A pending byte: the node position + 1 of the move waiting in the low 4 bits (0: no move
/// waiting; [`FAR`]: the node, position 14 and up, is kept aside), its priority in the top 4.
const NODE_BITS: u8 = 0x0f;
const PRIORITY_SHIFT: u32 = 4;
const NONE: u8 = 0;
const FAR: u8 = NODE_BITS;
/// Priorities 0 (the deciding window did not see the page) to 15.
const TOP_PRIORITY: u8 = NODE_BITS;
/// Guard bytes: the epoch of the first move counted, modulo 64, in the low 6 bits; the moves
/// since in the top 2 (saturating at 3).
const EPOCH_BITS: u8 = 0x3f;
const COUNT_SHIFT: u32 = 6;

pub struct PageMoves {
    pending: Vec<u8>,
    far: AHashMap<u32, usize>,
    waiting: usize,
    guard: Vec<u8>,
    /// Moves that freeze a page (1-3) and the window they count in (epochs, below 64; 0: no
    /// guard).
    moves: u8,
    epochs: u64,
}

impl PageMoves {
    /// A guard of `moves` moves within `epochs` epochs (clamped to 3 moves and 63 epochs).
    pub fn new(moves: u8, epochs: u64) -> PageMoves {
        PageMoves {
            pending: Vec::new(),
            far: AHashMap::new(),
            waiting: 0,
            guard: Vec::new(),
            moves: moves.clamp(1, 3),
            epochs: epochs.min(u64::from(EPOCH_BITS)),
        }
    }

    /// Room for pages up to `pages`, growing by an eighth (as the policies' state does).
    pub fn grow_to(&mut self, pages: usize) {
        for v in [&mut self.pending, &mut self.guard] {
            if pages > v.len() {
                let more = (pages - v.len()).max(v.len() / 8);
                if v.capacity() - v.len() < more {
                    v.reserve_exact(more);
                }
                v.resize(pages, 0);
            }
        }
    }

    /// The policy moves `page` to node position `to`, seen `accesses` times in the window that
    /// decided it (its latest decision wins, with its priority).
    pub fn request(&mut self, page: u32, to: usize, accesses: u64) {
        let p = page as usize;
        if self.pending[p] & NODE_BITS == NONE {
            self.waiting += 1;
        }
        self.far.remove(&page);
        let node = match u8::try_from(to + 1) {
            Ok(b) if b < FAR => b,
            _ => {
                self.far.insert(page, to);
                FAR
            }
        };
        self.pending[p] = priority(accesses) << PRIORITY_SHIFT | node;
    }

    /// A move taken and not made (deferred by the rate limit, refused for a reason that
    /// passes) waits again at priority `level`, unless a later decision for the page already
    /// waits: that one wins.
    pub fn retry(&mut self, page: u32, to: usize, level: u8) {
        let p = page as usize;
        if p >= self.pending.len() || self.pending[p] & NODE_BITS != NONE {
            return;
        }
        self.waiting += 1;
        let node = match u8::try_from(to + 1) {
            Ok(b) if b < FAR => b,
            _ => {
                self.far.insert(page, to);
                FAR
            }
        };
        self.pending[p] = level.min(TOP_PRIORITY) << PRIORITY_SHIFT | node;
    }

    /// Moves waiting for the mover.
    pub fn waiting(&self) -> usize {
        self.waiting
    }

    /// Every waiting move, in page order, as (page, node position), the backlog emptied; and
    /// how many of them the guard froze (left out).
    pub fn take(&mut self, epoch: u64) -> (Vec<(u32, usize)>, u64) {
        self.take_first(usize::MAX, epoch)
    }

    /// At most `most` waiting moves, those of the highest priority (in page order within a
    /// priority), taken from the backlog as (page, node position), in page order; and how many
    /// of the moves taken the guard froze (left out). Two passes over the backlog's bytes.
    pub fn take_first(&mut self, most: usize, epoch: u64) -> (Vec<(u32, usize)>, u64) {
        let (taken, frozen) = self.take_first_levels(most, epoch);
        (
            taken.into_iter().map(|(p, to, _)| (p, to)).collect(),
            frozen,
        )
    }

    /// As [`PageMoves::take_first`], each move with its priority: (page, node position,
    /// priority).
    pub fn take_first_levels(&mut self, most: usize, epoch: u64) -> (Vec<(u32, usize, u8)>, u64) {
        let (level, mut at_level) = if most >= self.waiting {
            (0, usize::MAX)
        } else {
            self.threshold(most)
        };
        let mut out = Vec::with_capacity(self.waiting.min(most));
        let mut frozen = 0;
        for p in 0..self.pending.len() {
            let b = self.pending[p];
            let level_here = b >> PRIORITY_SHIFT;
            if b & NODE_BITS == NONE || level_here < level {
                continue;
            }
            if level_here == level {
                if at_level == 0 {
                    continue;
                }
                at_level -= 1;
            }
            self.pending[p] = NONE;
            self.waiting -= 1;
            let to = match b & NODE_BITS {
                FAR => self.far.remove(&(p as u32)).unwrap_or(0),
                node => usize::from(node - 1),
            };
            if self.frozen(p as u32, epoch) {
                frozen += 1;
            } else {
                out.push((p as u32, to, level_here));
            }
        }
        if self.waiting == 0 {
            self.far.shrink_to_fit();
        }
        (out, frozen)
    }

    /// The lowest priority taken when `most` of the waiting moves are, and how many moves of
    /// that priority fit.
    fn threshold(&self, most: usize) -> (u8, usize) {
        let mut count = [0usize; TOP_PRIORITY as usize + 1];
        for b in &self.pending {
            if b & NODE_BITS != NONE {
                count[usize::from(b >> PRIORITY_SHIFT)] += 1;
            }
        }
        let mut above = 0;
        for level in (0..=TOP_PRIORITY).rev() {
            let here = count[usize::from(level)];
            if above + here >= most {
                return (level, most - above);
            }
            above += here;
        }
        (0, usize::MAX)
    }

    fn age(&self, b: u8, epoch: u64) -> u64 {
        (epoch.wrapping_sub(u64::from(b & EPOCH_BITS))) & u64::from(EPOCH_BITS)
    }

    /// Whether the guard keeps `page` where it is at `epoch`.
    pub fn frozen(&self, page: u32, epoch: u64) -> bool {
        let b = self.guard[page as usize];
        let count = b >> COUNT_SHIFT;
        count >= self.moves && self.age(b, epoch) < self.epochs
    }

    /// `page` was moved at `epoch`.
    pub fn moved(&mut self, page: u32, epoch: u64) {
        if self.epochs == 0 {
            return;
        }
        let b = self.guard[page as usize];
        let count = b >> COUNT_SHIFT;
        self.guard[page as usize] = if count == 0 || self.age(b, epoch) >= self.epochs {
            (epoch as u8 & EPOCH_BITS) | 1 << COUNT_SHIFT
        } else {
            (b & EPOCH_BITS) | (count + 1).min(3) << COUNT_SHIFT
        };
    }

    /// Forgets the moves older than the guard's window (once an epoch): a byte's epoch is
    /// modulo 64, so no count may outlive 63 epochs.
    pub fn prune(&mut self, epoch: u64) {
        for p in 0..self.guard.len() {
            let b = self.guard[p];
            if b != 0 && self.age(b, epoch) >= self.epochs {
                self.guard[p] = 0;
            }
        }
    }

    pub fn memory_bytes(&self) -> usize {
        self.pending.capacity()
            + self.guard.capacity()
            + self.far.capacity() * (size_of::<(u32, usize)>() + 1)
    }
}

/// A page's priority: 0 for a page the deciding window did not see, else 1 + log2 of its
/// accesses there, at most [`TOP_PRIORITY`] (16 Ki accesses and more alike).
fn priority(accesses: u64) -> u8 {
    ((u64::BITS - accesses.leading_zeros()) as u8).min(TOP_PRIORITY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_s_latest_decision_waits_and_is_taken_once() {
        let mut m = PageMoves::new(2, 4);
        m.grow_to(4);
        m.request(2, 1, 5);
        m.request(0, 3, 5);
        m.request(2, 300, 5);
        m.request(1, 13, 5);
        m.request(3, 14, 5);
        assert_eq!(m.waiting(), 4);
        assert_eq!(m.take(1), (vec![(0, 3), (1, 13), (2, 300), (3, 14)], 0));
        assert_eq!((m.waiting(), m.take(1).0.len()), (0, 0));
    }

    #[test]
    fn the_most_used_pages_are_taken_first() {
        let mut m = PageMoves::new(2, 4);
        m.grow_to(8);
        // Accesses in the deciding window: page 5 most, then 1 and 6 alike, 3 unseen.
        for (page, accesses) in [(1, 40), (3, 0), (5, 1_000), (6, 33), (7, 2)] {
            m.request(page, 2, accesses);
        }
        let (first, frozen) = m.take_first(2, 1);
        assert_eq!((first, frozen), (vec![(1, 2), (5, 2)], 0));
        // 1 and 6 share a priority: the one left waits with the rest.
        assert_eq!(m.waiting(), 3);
        assert_eq!(m.take_first(2, 1).0, vec![(6, 2), (7, 2)]);
        assert_eq!(m.take_first(2, 1).0, vec![(3, 2)]);
        assert_eq!(m.waiting(), 0);
    }

    #[test]
    fn a_page_decided_again_replaces_its_destination_and_priority() {
        let mut m = PageMoves::new(2, 4);
        m.grow_to(4);
        m.request(0, 1, 1_000);
        m.request(2, 1, 10);
        // Page 0 again: elsewhere, and now barely used; still one move waiting for it.
        m.request(0, 3, 1);
        assert_eq!(m.waiting(), 2);
        assert_eq!(m.take_first(1, 1).0, vec![(2, 1)]);
        assert_eq!(m.take_first(1, 1).0, vec![(0, 3)]);
    }

    #[test]
    fn a_move_tried_again_waits_unless_a_later_decision_does() {
        let mut m = PageMoves::new(2, 4);
        m.grow_to(4);
        m.request(0, 1, 1_000);
        m.request(1, 2, 1_000);
        m.request(2, 3, 1);
        let (taken, _) = m.take_first_levels(2, 1);
        assert_eq!(taken, [(0, 1, 10), (1, 2, 10)]);
        // Page 1 decided again meanwhile, elsewhere: its new decision stays.
        m.request(1, 0, 1);
        m.retry(0, 1, 9);
        m.retry(1, 2, 9);
        m.retry(3, 20, 4);
        assert_eq!(m.waiting(), 4);
        assert_eq!(
            m.take_first_levels(4, 1).0,
            [(0, 1, 9), (1, 0, 1), (2, 3, 1), (3, 20, 4)]
        );
    }

    #[test]
    fn frozen_pages_taken_first_are_counted_not_moved() {
        let mut m = PageMoves::new(1, 4);
        m.grow_to(3);
        m.moved(0, 1);
        m.request(0, 1, 100);
        m.request(1, 1, 50);
        m.request(2, 1, 1);
        assert_eq!(m.take_first(2, 2), (vec![(1, 1)], 1));
        assert_eq!(m.take_first(2, 2), (vec![(2, 1)], 0));
    }

    #[test]
    fn a_page_moved_back_and_forth_is_frozen_for_a_while() {
        let mut m = PageMoves::new(2, 4);
        m.grow_to(2);
        m.moved(1, 10);
        assert!(!m.frozen(1, 11));
        m.moved(1, 11);
        assert!(m.frozen(1, 12), "two moves in the window");
        assert!(!m.frozen(1, 14), "the window has passed");
        m.request(1, 0, 1);
        m.request(0, 0, 1);
        assert_eq!(m.take(12), (vec![(0, 0)], 1));
        // Pruned once the window has passed: 64 epochs later the byte says nothing.
        m.prune(14);
        m.moved(1, 74);
        assert!(!m.frozen(1, 75), "one move since the guard forgot");
    }

    #[test]
    fn no_guard_with_a_window_of_no_epochs() {
        let mut m = PageMoves::new(2, 0);
        m.grow_to(1);
        for e in 0..5 {
            m.moved(0, e);
            assert!(!m.frozen(0, e));
        }
    }
}
