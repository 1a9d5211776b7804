//! The engine's page moves between deciding and moving, a byte each per tracked page: the
//! backlog (the node of the move waiting for the mover; a page's latest decision wins) and the
//! ping-pong guard (a page moved `moves` times within `epochs` epochs is not moved again until
//! the window has passed). Kept by page index, beside the policy's own state, rather than in
//! tables keyed by address: the pages an online policy moves are often most of those it
//! tracks (SPM's round moves every page whose users are elsewhere).

use ahash::AHashMap;

/// A pending byte: no move waiting.
const NONE: u8 = 0;
/// A pending byte whose node (position 254 and up) is kept aside.
const FAR: u8 = u8::MAX;
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

    /// The policy moves `page` to node position `to` (its latest decision wins).
    pub fn request(&mut self, page: u32, to: usize) {
        let p = page as usize;
        if self.pending[p] == NONE {
            self.waiting += 1;
        }
        self.far.remove(&page);
        self.pending[p] = match u8::try_from(to + 1) {
            Ok(b) if b != FAR => b,
            _ => {
                self.far.insert(page, to);
                FAR
            }
        };
    }

    /// Moves waiting for the mover.
    pub fn waiting(&self) -> usize {
        self.waiting
    }

    /// Every waiting move, in page order, as (page, node position), the backlog emptied; and
    /// how many of them the guard froze (left out).
    pub fn take(&mut self, epoch: u64) -> (Vec<(u32, usize)>, u64) {
        let mut out = Vec::with_capacity(self.waiting);
        let mut frozen = 0;
        for p in 0..self.pending.len() {
            let b = std::mem::replace(&mut self.pending[p], NONE);
            let to = match b {
                NONE => continue,
                FAR => self.far.remove(&(p as u32)).unwrap_or(0),
                b => usize::from(b - 1),
            };
            if self.frozen(p as u32, epoch) {
                frozen += 1;
            } else {
                out.push((p as u32, to));
            }
        }
        self.waiting = 0;
        self.far.shrink_to_fit();
        (out, frozen)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_s_latest_decision_waits_and_is_taken_once() {
        let mut m = PageMoves::new(2, 4);
        m.grow_to(4);
        m.request(2, 1);
        m.request(0, 3);
        m.request(2, 300);
        assert_eq!(m.waiting(), 2);
        assert_eq!(m.take(1), (vec![(0, 3), (2, 300)], 0));
        assert_eq!((m.waiting(), m.take(1).0.len()), (0, 0));
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
        m.request(1, 0);
        m.request(0, 0);
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
