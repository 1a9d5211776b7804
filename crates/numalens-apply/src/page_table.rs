//! The engine's page indices: pages get the next index in order of first sight, and the engine
//! turns indices back into (process, page number) to move them. Pages of a program come in
//! runs (arrays, heaps, stacks), so indices live in blocks of 64 neighbouring pages found by one
//! hash lookup: some 4.5 bytes a page where pages are dense, instead of a hash entry each. The
//! way back is a walk over the blocks ([`PageTable::keys`]), made once per batch of moves, so
//! that no reverse table is kept per page.

use ahash::AHashMap;

/// Pages a block covers (a power of two).
const BLOCK: u64 = 64;

#[derive(Default)]
pub struct PageTable {
    /// (pid, page number / BLOCK) → block.
    blocks: AHashMap<(u32, u64), u32>,
    /// Per block: index + 1 of each of its pages (0: not seen).
    slots: Vec<[u32; BLOCK as usize]>,
    /// Per block: its process and first page number.
    origins: Vec<(u32, u64)>,
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
            }
            self.slots.push([0; BLOCK as usize]);
            self.origins.push((pid, key.1 * BLOCK));
        }
        let offset = (number % BLOCK) as usize;
        let slot = &mut self.slots[block as usize][offset];
        if *slot != 0 {
            return (*slot - 1, false);
        }
        let index = self.pages;
        *slot = index + 1;
        self.pages += 1;
        (index, true)
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
        for (block, slots) in self.slots.iter().enumerate() {
            if left == 0 {
                break;
            }
            let (pid, first) = self.origins[block];
            for (offset, &slot) in slots.iter().enumerate() {
                let Some(index) = slot.checked_sub(1) else {
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
            + self.slots.capacity() * size_of::<[u32; BLOCK as usize]>()
            + self.origins.capacity() * size_of::<(u32, u64)>()
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
        assert!(per_page < 6.0, "{per_page} bytes a page");
        let back = t.keys(&[999_999, 0, 500_000, 0, 2_000_000]);
        let key = |n: u64| Some((1, 1 << 20 | n));
        assert_eq!(back, vec![key(999_999), key(0), key(500_000), key(0), None]);
    }
}
