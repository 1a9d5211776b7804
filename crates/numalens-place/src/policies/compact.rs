//! Per-page state of the online policies in a few bytes a page: the online engine keeps it for
//! every page it tracks, for as long as the program runs (docs/PLACEMENT.md, "Cost").
//!
//! [`PageNodes`] is a node position per page in one byte. [`NodeCounts`] is a page's accesses
//! per node (kMAF's NUMA vector, SPM's samples): a row of counts per page, in 16 bits each on
//! machines of up to four nodes (8 bits beyond), with a shift per page: every count of the row
//! halves (rounding up: a node seen stays seen) when one would overflow, and later accesses
//! count in units of 2^shift. Counts are exact below 65,536 (256 on larger machines) and
//! beyond that within about one part in 32,768 (128) of the row's largest. A page's counts
//! are 9 bytes up to eight nodes. (A sparse layout, one word for a page used from one node, loses
//! to this one as soon as pages are used from two nodes, which is the common case: a page
//! first touched by one thread and used by another.)

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

/// Machines with up to this many nodes keep 16-bit counts, larger ones 8-bit counts: either
/// way a page's counts fit 9 bytes up to 8 nodes.
const WIDE_UP_TO: usize = 4;

/// Accesses per page and node (see the module docs): a row of counts per page, each worth
/// `count << shift`, the shift the row's own.
pub(crate) struct NodeCounts {
    nodes: usize,
    /// The largest count a cell holds (`u16::MAX` or `u8::MAX`).
    max: u64,
    /// Bytes per cell, little-endian.
    bytes: usize,
    cells: Vec<u8>,
    shifts: Vec<u8>,
}

impl NodeCounts {
    pub fn new(nodes: usize) -> NodeCounts {
        let wide = nodes <= WIDE_UP_TO;
        NodeCounts {
            nodes,
            max: if wide {
                u64::from(u16::MAX)
            } else {
                u64::from(u8::MAX)
            },
            bytes: if wide { 2 } else { 1 },
            cells: Vec::new(),
            shifts: Vec::new(),
        }
    }

    /// Room for pages up to `pages` (index order), with no accesses yet.
    pub fn grow_to(&mut self, pages: usize) {
        grow_lean(&mut self.shifts, pages, 0);
        grow_lean(&mut self.cells, pages * self.nodes * self.bytes, 0);
    }

    /// Every count back to zero.
    pub fn clear(&mut self) {
        self.cells.fill(0);
        self.shifts.fill(0);
    }

    fn cell(&self, page: usize, node: usize) -> u64 {
        let at = (page * self.nodes + node) * self.bytes;
        self.cells[at..at + self.bytes]
            .iter()
            .rev()
            .fold(0, |v, &b| v << 8 | u64::from(b))
    }

    fn set_cell(&mut self, page: usize, node: usize, value: u64) {
        let at = (page * self.nodes + node) * self.bytes;
        for (i, b) in self.cells[at..at + self.bytes].iter_mut().enumerate() {
            *b = (value >> (8 * i)) as u8;
        }
    }

    pub fn add(&mut self, page: u32, node: usize, count: u64) {
        if count == 0 {
            return;
        }
        let page = page as usize;
        loop {
            let sum = self.cell(page, node) + scaled(count, self.shifts[page]);
            if sum <= self.max {
                self.set_cell(page, node, sum);
                return;
            }
            // Halving rounds up, so that a node that was seen stays seen.
            for n in 0..self.nodes {
                let half = self.cell(page, n).div_ceil(2);
                self.set_cell(page, n, half);
            }
            self.shifts[page] += 1;
        }
    }

    /// The page's count per node position into `out` (`nodes` long).
    pub fn counts(&self, page: u32, out: &mut [u64]) {
        let shift = self.shifts[page as usize];
        for (n, o) in out.iter_mut().enumerate().take(self.nodes) {
            let c = self.cell(page as usize, n);
            *o = u64::try_from(u128::from(c) << shift).unwrap_or(u64::MAX);
        }
    }

    pub fn memory_bytes(&self) -> usize {
        self.cells.capacity() + self.shifts.capacity()
    }
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
    fn counts_are_exact_below_sixteen_bits_and_close_beyond() {
        let mut c = NodeCounts::new(4);
        c.grow_to(3);
        c.add(0, 2, 7);
        c.add(0, 2, 5);
        assert_eq!(counts(&c, 0), [0, 0, 12, 0]);
        c.add(0, 1, 65_000);
        c.add(0, 3, 1);
        assert_eq!(counts(&c, 0), [0, 65_000, 12, 1]);
        // One node's count past 16 bits: the row halves, small counts stay seen.
        c.add(0, 1, 1_000_000);
        let got = counts(&c, 0);
        assert!(
            (got[1] as f64 / 1_065_000.0 - 1.0).abs() < 1.0 / 32_768.0 * 2.0,
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
    }
}
