//! Where each page's users are, as tiering needs them: a promoted page goes to the fast node
//! with the lowest latency-weighted cost for its users' decayed accesses, and that choice
//! depends only on the shares of those accesses per node, not on their sum. The sum is the
//! page's hotness, which tiering keeps anyway. So a page holds a byte per node with CPUs, its
//! share of the page's accesses, the largest 255: shares need no decay of their own (decay
//! scales them alike), and within one part in 510 of the largest they choose the same node
//! (the latencies of a machine's nodes differ by far more than that).

use super::online::grow_lean;

pub(crate) struct Users {
    /// Column of each node position in a row (`usize::MAX`: no CPUs, no users).
    column: Vec<usize>,
    /// The node position of each column.
    nodes: Vec<usize>,
    /// A row of shares per page (all 0: no users yet).
    shares: Vec<u8>,
}

impl Users {
    /// Users on `cpu_nodes` (positions among `node_count`).
    pub fn new(node_count: usize, cpu_nodes: &[usize]) -> Users {
        let mut column = vec![usize::MAX; node_count];
        for (i, &n) in cpu_nodes.iter().enumerate() {
            column[n] = i;
        }
        Users {
            column,
            nodes: cpu_nodes.to_vec(),
            shares: Vec::new(),
        }
    }

    pub fn grow_to(&mut self, pages: usize) {
        grow_lean(&mut self.shares, pages * self.nodes.len(), 0);
    }

    /// `count` accesses to `page` from `node`; `hot` is the page's decayed hotness before them,
    /// the sum of its users' decayed accesses.
    pub fn add(&mut self, page: u32, node: usize, count: f64, hot: f64) {
        let Some(&col) = self.column.get(node).filter(|c| **c != usize::MAX) else {
            return;
        };
        let width = self.nodes.len();
        let row = &mut self.shares[page as usize * width..][..width];
        let sum: f64 = row.iter().map(|&v| f64::from(v)).sum();
        let mut real: Vec<f64> = row
            .iter()
            .map(|&v| {
                if sum > 0.0 {
                    hot * f64::from(v) / sum
                } else {
                    0.0
                }
            })
            .collect();
        real[col] += count;
        let max = real.iter().copied().fold(0.0, f64::max);
        if max <= 0.0 {
            return;
        }
        for (v, r) in row.iter_mut().zip(&real) {
            *v = (r / max * f64::from(u8::MAX)).round() as u8;
        }
    }

    /// Each user node's share of the page's accesses, scaled alike, into `out` (node positions);
    /// false for a page without users.
    pub fn shares(&self, page: u32, out: &mut [f64]) -> bool {
        out.fill(0.0);
        let width = self.nodes.len();
        let Some(row) = self
            .shares
            .get(page as usize * width..(page as usize + 1) * width)
        else {
            return false;
        };
        for (&node, &v) in self.nodes.iter().zip(row) {
            out[node] = f64::from(v);
        }
        row.iter().any(|&v| v > 0)
    }

    pub fn memory_bytes(&self) -> usize {
        self.shares.capacity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_follow_the_decayed_accesses() {
        // Nodes 0 and 2 have CPUs; node 1 is memory only.
        let mut u = Users::new(3, &[0, 2]);
        u.grow_to(2);
        let mut out = vec![0.0; 3];
        assert!(!u.shares(0, &mut out));
        u.add(0, 2, 10.0, 0.0);
        u.add(0, 2, 10.0, 10.0);
        assert!(u.shares(0, &mut out));
        assert_eq!(out, [0.0, 0.0, 255.0]);
        // Hotness 20 decayed to 5 (all node 2's), then 15 from node 0: shares 3 to 1.
        u.add(0, 0, 15.0, 5.0);
        u.shares(0, &mut out);
        assert_eq!(out, [255.0, 0.0, 85.0]);
        // Decayed to 10 in all, then 10 more from node 2: 7.5 : 12.5.
        u.add(0, 2, 10.0, 10.0);
        u.shares(0, &mut out);
        assert!((out[0] / out[2] - 0.6).abs() < 1.0 / 255.0, "{out:?}");
        // A node without CPUs has no users.
        u.add(1, 1, 5.0, 0.0);
        assert!(!u.shares(1, &mut out));
    }
}
