//! The engine's page indices: pages get the next index in order of first sight, and the engine
//! turns an index back into (process, page number) to move it. Pages of a program come in
//! runs (arrays, heaps, stacks), so indices live in blocks of 64 neighbouring pages found by one
//! hash lookup: some 8.5 bytes a page where pages are dense, instead of a hash entry each.

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
    /// Per page index: its block × BLOCK + its place in the block.
    places: Vec<u32>,
}

impl PageTable {
    /// The index of (pid, page number), and whether it is new.
    pub fn index(&mut self, pid: u32, number: u64) -> (u32, bool) {
        let key = (pid, number / BLOCK);
        let next_block = self.slots.len() as u32;
        let block = *self.blocks.entry(key).or_insert(next_block);
        if block == next_block {
            self.slots.push([0; BLOCK as usize]);
            self.origins.push((pid, key.1 * BLOCK));
        }
        let offset = (number % BLOCK) as usize;
        let slot = &mut self.slots[block as usize][offset];
        if *slot != 0 {
            return (*slot - 1, false);
        }
        let index = self.places.len() as u32;
        *slot = index + 1;
        self.places.push(block * BLOCK as u32 + offset as u32);
        (index, true)
    }

    /// The process and page number of an index.
    pub fn key(&self, index: u32) -> (u32, u64) {
        let place = self.places[index as usize];
        let (pid, first) = self.origins[(place / BLOCK as u32) as usize];
        (pid, first + u64::from(place % BLOCK as u32))
    }

    pub fn len(&self) -> usize {
        self.places.len()
    }

    pub fn is_empty(&self) -> bool {
        self.places.is_empty()
    }

    /// Bytes held, by capacity.
    pub fn memory_bytes(&self) -> usize {
        use std::mem::size_of;
        self.blocks.capacity() * (size_of::<((u32, u64), u32)>() + 1)
            + self.slots.capacity() * size_of::<[u32; BLOCK as usize]>()
            + self.origins.capacity() * size_of::<(u32, u64)>()
            + self.places.capacity() * size_of::<u32>()
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
            assert_eq!(t.key(i as u32), (*pid, *number));
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
        assert!(per_page < 10.0, "{per_page} bytes a page");
    }
}
