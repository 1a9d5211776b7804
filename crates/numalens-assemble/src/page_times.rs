//! The time of the last fault on each page of each process, for telling first touches from later
//! faults.
//!
//! A run that first-touches 4 GiB has a million faults to check, one per page. A hash map keyed
//! by page spends most of that check on two cache misses (its control bytes, then its slot): the
//! pages are spread over the whole table. Here pages are kept in blocks of 512 consecutive pages,
//! so faults that walk through memory (the common case: each thread streams through its part of
//! an array) stay in the block they are in, and the blocks of the last few threads are found
//! without any lookup.

use ahash::AHashMap;

/// Pages per block: 2 MiB of 4 KiB pages, one 4 KiB block of times.
const BLOCK_PAGES: usize = 512;
const BLOCK_SHIFT: u32 = BLOCK_PAGES.trailing_zeros();
/// Blocks remembered without a lookup: a few threads interleaving their faults.
const RECENT: usize = 8;
/// A time no fault has: the page had no fault yet.
const NEVER: u64 = u64::MAX;

type Block = [u64; BLOCK_PAGES];

pub struct PageTimes {
    /// log2 of the base page size: page numbers are addresses shifted by it.
    page_shift: u32,
    /// (pid, block number) → index into `blocks`.
    index: AHashMap<(u32, u64), u32>,
    blocks: Vec<Box<Block>>,
    /// (pid, block number, index) of recently used blocks; replaced round-robin.
    recent: [(u32, u64, u32); RECENT],
    next_recent: usize,
}

impl PageTimes {
    /// A table for pages of `base_page` bytes (a power of two), sized for about `pages` pages.
    pub fn new(base_page: u64, pages: usize) -> Self {
        assert!(base_page.is_power_of_two(), "page sizes are powers of two");
        let blocks = pages / BLOCK_PAGES + 1;
        PageTimes {
            page_shift: base_page.trailing_zeros(),
            index: AHashMap::with_capacity(blocks),
            blocks: Vec::with_capacity(blocks),
            recent: [(u32::MAX, u64::MAX, 0); RECENT],
            next_recent: 0,
        }
    }

    /// Records a fault at `time_ns` on the page starting at `page` (an address) and returns the
    /// time of the page's previous fault, if it had one.
    pub fn insert(&mut self, pid: u32, page: u64, time_ns: u64) -> Option<u64> {
        let number = page >> self.page_shift;
        let block = self.block(pid, number >> BLOCK_SHIFT);
        let slot = &mut self.blocks[block as usize][number as usize % BLOCK_PAGES];
        let previous = std::mem::replace(slot, time_ns);
        (previous != NEVER).then_some(previous)
    }

    fn block(&mut self, pid: u32, block: u64) -> u32 {
        if let Some(&(_, _, i)) = self
            .recent
            .iter()
            .find(|(p, b, _)| *p == pid && *b == block)
        {
            return i;
        }
        let blocks = &mut self.blocks;
        let i = *self.index.entry((pid, block)).or_insert_with(|| {
            blocks.push(Box::new([NEVER; BLOCK_PAGES]));
            (blocks.len() - 1) as u32
        });
        self.recent[self.next_recent] = (pid, block, i);
        self.next_recent = (self.next_recent + 1) % RECENT;
        i
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// The same answers as a plain map, over pages, processes and huge pages that share blocks
    /// and evict each other from the recent blocks.
    #[test]
    fn answers_like_a_map_of_every_page() {
        let mut times = PageTimes::new(4096, 16);
        let mut plain: HashMap<(u32, u64), u64> = HashMap::new();
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for t in 0..200_000u64 {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            let pid = 1 + (state >> 61) as u32 % 3;
            // Twelve regions of 4 blocks each, so that more blocks are live than RECENT holds.
            let region = (state >> 40) % 12;
            let page = (region << 32) + ((state >> 20) % 2048) * 4096;
            let page = if state & 1 == 0 {
                page & !(2 * 1024 * 1024 - 1) // a huge page starts at its 2 MiB boundary
            } else {
                page
            };
            assert_eq!(
                times.insert(pid, page, t),
                plain.insert((pid, page), t),
                "fault {t}"
            );
        }
        assert!(times.blocks.len() > RECENT);
    }

    #[test]
    fn a_page_without_a_fault_has_no_previous_time() {
        let mut times = PageTimes::new(4096, 0);
        assert_eq!(times.insert(7, 0x1000, 5), None);
        assert_eq!(times.insert(7, 0x1000, 9), Some(5));
        assert_eq!(times.insert(8, 0x1000, 10), None, "another process");
        assert_eq!(times.insert(7, 0x2000, 11), None, "the next page");
        assert_eq!(times.insert(7, 0x1000, 12), Some(9));
    }
}
