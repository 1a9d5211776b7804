//! Per-page state of the online policies in a few bytes a page: the online engine keeps it for
//! every page it tracks, for as long as the program runs (docs/PLACEMENT.md, "Cost").
//!
//! [`PageNodes`] is a node position per page in one byte. [`NodeCounts`] is a page's accesses
//! per node (kMAF's NUMA vector, SPM's samples): a row of bits per page, a 6-bit shift and one
//! count per node, in 64 bits on machines of up to four nodes (14 bits a count on four, 29 on
//! two) and 8 bits a count beyond (a row of nodes + 1 bytes). When a count would overflow,
//! every count of the row halves (rounding up: a node seen stays seen) and later accesses count
//! in units of 2^shift. Counts are exact below 2^bits (16,384 on four nodes, 256 beyond eight)
//! and beyond that within about one part in 2^(bits-1) of the row's largest. (A sparse layout,
//! one word for a page used from one node, loses to this one as soon as pages are used from
//! two nodes, which is the common case: a page first touched by one thread and used by
//! another.)

use std::collections::HashMap;

use super::online::{grow_lean, reserve_lean};

/// Positions from this one up are kept beside the bytes (machines have far fewer nodes).
const FAR: u8 = u8::MAX;

/// A node position per page, in a byte each.
#[derive(Default)]
pub(crate) struct PageNodes {
    near: Vec<u8>,
    far: HashMap<u32, usize>,
}

impl PageNodes {
    pub fn extend(&mut self, nodes: &[usize]) {
        reserve_lean(&mut self.near, nodes.len());
        for &n in nodes {
            let page = self.near.len() as u32;
            let byte = self.byte(page, n);
            self.near.push(byte);
        }
    }

    fn byte(&mut self, page: u32, node: usize) -> u8 {
        match u8::try_from(node) {
            Ok(b) if b < FAR => b,
            _ => {
                self.far.insert(page, node);
                FAR
            }
        }
    }

    pub fn get(&self, page: u32) -> usize {
        match self.near[page as usize] {
            FAR => self.far[&page],
            b => usize::from(b),
        }
    }

    pub fn set(&mut self, page: u32, node: usize) {
        self.far.remove(&page);
        self.near[page as usize] = self.byte(page, node);
    }

    pub fn len(&self) -> usize {
        self.near.len()
    }

    pub fn memory_bytes(&self) -> usize {
        self.near.capacity() + self.far.capacity() * (size_of::<(u32, usize)>() + 1)
    }
}

/// Bits of a row's shift (counts of a page reach u64's end at most: a shift below 64).
const SHIFT_BITS: u32 = 6;
/// Machines with up to this many nodes share 64 bits a page among their counts.
const ONE_WORD_UP_TO: usize = 4;

/// Accesses per page and node (see the module docs): a row of bits per page, its shift then
/// one count per node, each worth `count << shift`.
pub(crate) struct NodeCounts {
    nodes: usize,
    /// Bits per count: 58 / nodes up to four nodes (14 on four), else 8.
    bits: u32,
    /// Bytes per row.
    row: usize,
    rows: Vec<u8>,
}

impl NodeCounts {
    pub fn new(nodes: usize) -> NodeCounts {
        let nodes = nodes.max(1);
        let bits = if nodes <= ONE_WORD_UP_TO {
            (64 - SHIFT_BITS) / nodes as u32
        } else {
            8
        };
        let row = (SHIFT_BITS as usize + nodes * bits as usize).div_ceil(8);
        NodeCounts {
            nodes,
            bits,
            row,
            rows: Vec::new(),
        }
    }

    /// Room for pages up to `pages` (index order), with no accesses yet.
    pub fn grow_to(&mut self, pages: usize) {
        grow_lean(&mut self.rows, pages * self.row, 0);
    }

    /// Every count back to zero.
    pub fn clear(&mut self) {
        self.rows.fill(0);
    }

    /// Every count divided by 2^`halvings`, rounding down: accesses of earlier windows weigh
    /// less than the latest ones, and a count that halves to nothing is forgotten. A row in
    /// units of 2^shift lowers its shift first, which is exact.
    pub fn age(&mut self, halvings: u32) {
        if halvings == 0 {
            return;
        }
        if self.nodes <= ONE_WORD_UP_TO {
            let (counts, keep) = self.word_masks(halvings);
            for word in self.rows.chunks_exact_mut(8) {
                let w = u64::from_le_bytes(word.try_into().unwrap_or_default());
                word.copy_from_slice(&age_word(w, halvings, counts, &keep).to_le_bytes());
            }
            return;
        }
        for page in 0..self.rows.len() / self.row {
            let bytes = &self.rows[page * self.row..(page + 1) * self.row];
            if bytes.iter().all(|b| *b == 0) {
                continue;
            }
            let shift = u32::from(self.shift(page));
            let lowered = shift.min(halvings);
            self.set_field(page, 0, SHIFT_BITS, u64::from(shift - lowered));
            let rest = halvings - lowered;
            if rest > 0 {
                for n in 0..self.nodes {
                    let c = self.cell(page, n).checked_shr(rest).unwrap_or(0);
                    self.set_cell(page, n, c);
                }
            }
        }
    }

    /// For one-word rows: the bits of the counts, and for each right shift r of the counts up
    /// to `halvings`, the bits that stay in each count's own field (the low bits of each
    /// count's upper neighbour must not move into it; nothing stays from `bits` on).
    fn word_masks(&self, halvings: u32) -> (u64, Vec<u64>) {
        let ones = |width: u32| 1u64.checked_shl(width).map_or(u64::MAX, |v| v - 1);
        let fields = |width: u32| {
            (0..self.nodes as u32).fold(0, |m, n| m | ones(width) << (SHIFT_BITS + n * self.bits))
        };
        let keep = (0..=halvings.min(self.bits))
            .map(|r| fields(self.bits - r))
            .collect();
        (fields(self.bits), keep)
    }

    /// `width` bits at bit `at` of `page`'s row.
    fn field(&self, page: usize, at: u32, width: u32) -> u64 {
        let first = page * self.row + at as usize / 8;
        let last = page * self.row + (at + width).div_ceil(8) as usize;
        let v = self.rows[first..last]
            .iter()
            .rev()
            .fold(0u128, |v, &b| v << 8 | u128::from(b));
        ((v >> (at % 8)) & ((1u128 << width) - 1)) as u64
    }

    fn set_field(&mut self, page: usize, at: u32, width: u32, value: u64) {
        let first = page * self.row + at as usize / 8;
        let last = page * self.row + (at + width).div_ceil(8) as usize;
        let bytes = &mut self.rows[first..last];
        let mut v = bytes
            .iter()
            .rev()
            .fold(0u128, |v, &b| v << 8 | u128::from(b));
        let mask = ((1u128 << width) - 1) << (at % 8);
        v = (v & !mask) | (u128::from(value) << (at % 8)) & mask;
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = (v >> (8 * i)) as u8;
        }
    }

    fn cell(&self, page: usize, node: usize) -> u64 {
        self.field(page, SHIFT_BITS + node as u32 * self.bits, self.bits)
    }

    fn set_cell(&mut self, page: usize, node: usize, value: u64) {
        self.set_field(page, SHIFT_BITS + node as u32 * self.bits, self.bits, value);
    }

    fn shift(&self, page: usize) -> u8 {
        self.field(page, 0, SHIFT_BITS) as u8
    }

    pub fn add(&mut self, page: u32, node: usize, count: u64) {
        if count == 0 {
            return;
        }
        let page = page as usize;
        let max = (1u64 << self.bits) - 1;
        loop {
            let shift = self.shift(page);
            let sum = self.cell(page, node).saturating_add(scaled(count, shift));
            if sum <= max {
                self.set_cell(page, node, sum);
                return;
            }
            // Halving rounds up, so that a node that was seen stays seen.
            for n in 0..self.nodes {
                let half = self.cell(page, n).div_ceil(2);
                self.set_cell(page, n, half);
            }
            self.set_field(page, 0, SHIFT_BITS, u64::from(shift) + 1);
        }
    }

    /// The page's count per node position into `out` (`nodes` long).
    pub fn counts(&self, page: u32, out: &mut [u64]) {
        let shift = self.shift(page as usize);
        for (n, o) in out.iter_mut().enumerate().take(self.nodes) {
            let c = self.cell(page as usize, n);
            *o = u64::try_from(u128::from(c) << shift).unwrap_or(u64::MAX);
        }
    }

    pub fn memory_bytes(&self) -> usize {
        self.rows.capacity()
    }
}

/// A one-word row (shift in its low [`SHIFT_BITS`], counts above) divided by 2^`halvings`: its
/// shift lowered as far as it goes, then each count shifted right by what is left.
fn age_word(word: u64, halvings: u32, counts: u64, keep: &[u64]) -> u64 {
    if word == 0 {
        return 0;
    }
    let shift = (word & ((1 << SHIFT_BITS) - 1)) as u32;
    let lowered = shift.min(halvings);
    let rest = halvings - lowered;
    let kept = keep.get(rest as usize).copied().unwrap_or(0);
    ((word & counts).checked_shr(rest).unwrap_or(0) & kept) | u64::from(shift - lowered)
}

/// `count` in units of 2^shift, rounded to the nearest, and at least 1: an access is never lost.
fn scaled(count: u64, shift: u8) -> u64 {
    let half = (1u128 << shift) >> 1;
    let units = ((u128::from(count) + half) >> shift).max(1);
    u64::try_from(units).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(c: &NodeCounts, page: u32) -> Vec<u64> {
        let mut out = vec![0; c.nodes];
        c.counts(page, &mut out);
        out
    }

    #[test]
    fn counts_are_exact_below_fourteen_bits_and_close_beyond() {
        let mut c = NodeCounts::new(4);
        c.grow_to(3);
        assert_eq!(c.memory_bytes(), 3 * 8);
        c.add(0, 2, 7);
        c.add(0, 2, 5);
        assert_eq!(counts(&c, 0), [0, 0, 12, 0]);
        c.add(0, 1, 16_000);
        c.add(0, 3, 1);
        assert_eq!(counts(&c, 0), [0, 16_000, 12, 1]);
        assert_eq!(counts(&c, 1), [0; 4], "rows apart");
        // One node's count past 14 bits: the row halves, small counts stay seen.
        c.add(0, 1, 1_000_000);
        let got = counts(&c, 0);
        assert!(
            (got[1] as f64 / 1_016_000.0 - 1.0).abs() < 2.0 / 8_192.0,
            "{got:?}"
        );
        assert!(got[2] > 0 && got[3] > 0 && got[0] == 0, "{got:?}");
        // Counts at u64's end saturate instead of wrapping.
        c.add(1, 0, u64::MAX);
        c.add(1, 0, u64::MAX);
        assert!(counts(&c, 1)[0] >= u64::MAX / 2);
        // A power of two stays exact however large.
        c.add(2, 0, 1 << 30);
        assert_eq!(counts(&c, 2), [1 << 30, 0, 0, 0]);
        c.clear();
        assert_eq!(counts(&c, 0), [0; 4]);
    }

    /// Ageing on one-word rows (4 and 2 nodes) and on byte rows (8 nodes): counts halve
    /// exactly, a row in units lowers its shift, neighbours' bits do not leak into a count.
    #[test]
    fn ageing_divides_every_count_and_forgets_small_ones() {
        for nodes in [4, 2, 8] {
            let mut c = NodeCounts::new(nodes);
            c.grow_to(3);
            c.add(0, 0, 201);
            c.add(0, 1, 6);
            c.add(0, nodes - 1, 1);
            // Page 1 in units of 2^shift: its largest count past the field.
            c.add(1, 0, 3 << 20);
            c.add(1, 1, 1 << 20);
            let before = counts(&c, 1);
            c.age(1);
            let mut want = vec![0; nodes];
            want[0] = 100;
            want[1] = 3;
            assert_eq!(counts(&c, 0), want, "{nodes} nodes");
            let halved: Vec<u64> = before.iter().map(|v| v / 2).collect();
            assert_eq!(counts(&c, 1), halved, "{nodes} nodes: exact by the shift");
            assert_eq!(counts(&c, 2), vec![0; nodes]);
            c.age(3);
            want[0] = 12;
            want[1] = 0;
            assert_eq!(counts(&c, 0), want, "{nodes} nodes");
            c.age(0);
            assert_eq!(counts(&c, 0), want, "no ageing");
            c.age(63);
            assert_eq!(counts(&c, 0), vec![0; nodes]);
            assert_eq!(counts(&c, 1), vec![0; nodes]);
            // Counting goes on exactly after ageing.
            c.add(0, 1, 9);
            want[0] = 0;
            want[1] = 9;
            assert_eq!(counts(&c, 0), want, "{nodes} nodes");
        }
    }

    #[test]
    fn nodes_beyond_a_byte_are_kept_exactly() {
        let mut p = PageNodes::default();
        p.extend(&[0, 254, 255, 1000]);
        assert_eq!(
            (0..4).map(|i| p.get(i)).collect::<Vec<_>>(),
            [0, 254, 255, 1000]
        );
        p.set(3, 2);
        p.set(0, 700);
        assert_eq!(
            (0..4).map(|i| p.get(i)).collect::<Vec<_>>(),
            [700, 254, 255, 2]
        );
        assert_eq!(p.len(), 4);
    }

    #[test]
    fn larger_machines_count_in_bytes() {
        let mut c = NodeCounts::new(8);
        c.grow_to(2);
        c.add(1, 7, 200);
        c.add(1, 7, 55);
        c.add(1, 3, 1);
        assert_eq!(counts(&c, 1), [0, 0, 0, 1, 0, 0, 0, 255]);
        c.add(1, 7, 10_000);
        let got = counts(&c, 1);
        assert!(
            (got[7] as f64 / 10_255.0 - 1.0).abs() < 1.0 / 64.0,
            "{got:?}"
        );
        assert!(got[3] > 0, "{got:?}");
        assert_eq!(counts(&c, 0), [0; 8]);
        assert_eq!(c.memory_bytes(), 2 * 9);
        // Two nodes: 29 bits a count.
        let mut two = NodeCounts::new(2);
        two.grow_to(1);
        two.add(0, 1, 500_000_000);
        two.add(0, 0, 3);
        let mut out = [0; 2];
        two.counts(0, &mut out);
        assert_eq!(out, [3, 500_000_000]);
    }
}
