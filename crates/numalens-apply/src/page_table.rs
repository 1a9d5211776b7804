//! The engine's page indices: pages get the next index in order of first sight, and the engine
//! turns indices back into (process, page number) to move them. Pages of a program come in
//! runs (arrays, heaps, stacks), so indices live in blocks of 64 neighbouring pages found by one
//! hash lookup, and the pages of a block are mostly first seen close together: a block holds
//! the index of its first page seen and each page's distance from it in 16 bits, some 3 bytes
//! a page where pages are dense (a page first seen 65,535 or more indices after its block's
//! first is kept aside, whole). The way back is a walk over the blocks ([`PageTable::keys`]),
//! made once per batch of moves, so that no reverse table is kept per page.

use ahash::AHashMap;

/// Pages a block covers (a power of two).
const BLOCK: u64 = 64;
/// A slot of a page not seen yet.
const UNSEEN: u16 = u16::MAX;

#[derive(Default)]
pub struct PageTable {
    /// (pid, page number / BLOCK) → block.
    blocks: AHashMap<(u32, u64), u32>,
    /// Per block: each page's index minus the block's base (`UNSEEN`: not seen, or kept in
    /// `far`).
    slots: Vec<[u16; BLOCK as usize]>,
    /// Per block: its process, first page number and base index (its first page seen).
    origins: Vec<(u32, u64, u32)>,
    /// (block, offset) → index, for pages too far from their block's base.
    far: AHashMap<(u32, u8), u32>,
    pages: u32,
}

impl PageTable {
    /// The index of (pid, page number), and whether it is new.
    pub fn index(&mut self, pid: u32, number: u64) -> (u32, bool) {
        let key = (pid, number / BLOCK);
        let next_block = self.slots.len() as u32;
        let block = *self.blocks.entry(key).or_insert(next_block);
        if block == next_block {
            if self.slots.len() == self.slots.capacity() {
                // Grow by an eighth: the blocks are most of what the table holds.
                self.slots.reserve_exact((self.slots.len() / 8).max(4));
                self.origins.reserve_exact((self.origins.len() / 8).max(4));
            }
            self.slots.push([UNSEEN; BLOCK as usize]);
            self.origins.push((pid, key.1 * BLOCK, self.pages));
        }
        let offset = (number % BLOCK) as u8;
        if let Some(index) = self.get_in(block, offset) {
            return (index, false);
        }
        let index = self.pages;
        self.pages += 1;
        let delta = index - self.origins[block as usize].2;
        match u16::try_from(delta).ok().filter(|d| *d != UNSEEN) {
            Some(d) => self.slots[block as usize][usize::from(offset)] = d,
            None => {
                self.far.insert((block, offset), index);
            }
        }
        (index, true)
    }

    fn get_in(&self, block: u32, offset: u8) -> Option<u32> {
        match self.slots[block as usize][usize::from(offset)] {
            UNSEEN => self.far.get(&(block, offset)).copied(),
            d => Some(self.origins[block as usize].2 + u32::from(d)),
        }
    }

    /// The index of (pid, page number) if the table gave it one.
    pub fn get(&self, pid: u32, number: u64) -> Option<u32> {
        let block = *self.blocks.get(&(pid, number / BLOCK))?;
        self.get_in(block, (number % BLOCK) as u8)
    }

    /// The process and page number of each of `indices` (in their order; `None` for an index
    /// the table never gave): one walk over the blocks, with a bit per page saying which are
    /// wanted, that stops once all are found.
    pub fn keys(&self, indices: &[u32]) -> Vec<Option<(u32, u64)>> {
        let mut out = vec![None; indices.len()];
        let mut wanted = vec![0u64; (self.pages as usize).div_ceil(64)];
        let mut slots_of: AHashMap<u32, Vec<usize>> = AHashMap::new();
        for (at, &index) in indices.iter().enumerate() {
            if index < self.pages {
                wanted[index as usize / 64] |= 1 << (index % 64);
                slots_of.entry(index).or_default().push(at);
            }
        }
        let mut left = slots_of.len();
        for block in 0..self.slots.len() as u32 {
            if left == 0 {
                break;
            }
            let (pid, first, _) = self.origins[block as usize];
            for offset in 0..BLOCK as u8 {
                let Some(index) = self.get_in(block, offset) else {
                    continue;
                };
                if wanted[index as usize / 64] & (1 << (index % 64)) == 0 {
                    continue;
                }
                for &at in &slots_of[&index] {
                    out[at] = Some((pid, first + offset as u64));
                }
                left -= 1;
            }
        }
        out
    }

    /// The process and page number of one index (a walk over the blocks: for a few).
    pub fn key(&self, index: u32) -> Option<(u32, u64)> {
        self.keys(&[index])[0]
    }

    pub fn len(&self) -> usize {
        self.pages as usize
    }

    pub fn is_empty(&self) -> bool {
        self.pages == 0
    }

    /// Bytes held, by capacity.
    pub fn memory_bytes(&self) -> usize {
        use std::mem::size_of;
        self.blocks.capacity() * (size_of::<((u32, u64), u32)>() + 1)
            + self.slots.capacity() * size_of::<[u16; BLOCK as usize]>()
            + self.origins.capacity() * size_of::<(u32, u64, u32)>()
            + self.far.capacity() * (size_of::<((u32, u8), u32)>() + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indices_follow_first_sight_and_map_back() {
        let mut t = PageTable::default();
        let keys = [
            (7, 1000),
            (7, 1001),
            (8, 1000),
            (7, 63),
            (7, 64),
            (7, u64::MAX / 4096),
        ];
        for (i, (pid, number)) in keys.iter().enumerate() {
            assert_eq!(t.index(*pid, *number), (i as u32, true));
        }
        for (i, (pid, number)) in keys.iter().enumerate() {
            assert_eq!(t.index(*pid, *number), (i as u32, false));
            assert_eq!(t.key(i as u32), Some((*pid, *number)));
        }
        assert_eq!(t.len(), keys.len());
    }

    #[test]
    fn dense_pages_cost_a_few_bytes_each() {
        let mut t = PageTable::default();
        for number in 0..1_000_000u64 {
            t.index(1, 1 << 20 | number);
        }
        let per_page = t.memory_bytes() as f64 / t.len() as f64;
        assert!(per_page < 3.5, "{per_page} bytes a page");
        let back = t.keys(&[999_999, 0, 500_000, 0, 2_000_000]);
        let key = |n: u64| Some((1, 1 << 20 | n));
        assert_eq!(back, vec![key(999_999), key(0), key(500_000), key(0), None]);
    }

    #[test]
    fn a_page_seen_long_after_its_block_s_first_is_kept_aside() {
        let mut t = PageTable::default();
        t.index(1, 0);
        // 70,000 pages of other blocks, then the rest of block 0.
        for number in 0..70_000u64 {
            t.index(1, 1 << 30 | number);
        }
        let (late, new) = t.index(1, 5);
        assert_eq!((late, new), (70_001, true));
        assert_eq!(t.index(1, 5), (70_001, false));
        assert_eq!(t.get(1, 5), Some(70_001));
        assert_eq!(t.get(1, 6), None);
        assert_eq!(
            t.keys(&[70_001, 0, 1]),
            [Some((1, 5)), Some((1, 0)), Some((1, 1 << 30))]
        );
    }
}
