//! Fixed-count time buckets whose width doubles as later times arrive, so that a timeline stays
//! bounded without knowing the run's length before reading it.

/// Buckets per timeline.
pub(crate) const BUCKETS: usize = 64;

/// Width of the first buckets, before any doubling: 1 µs.
const FIRST_WIDTH: u64 = 1 << 10;

/// Rows of [`BUCKETS`] counters sharing one width.
#[derive(Debug, Clone)]
pub(crate) struct Buckets {
    /// A power of two, so that a bucket is a shift away (`shift` is its log2).
    width: u64,
    shift: u32,
    cells: Vec<u64>,
}

impl Buckets {
    pub(crate) fn new() -> Self {
        Buckets {
            width: FIRST_WIDTH,
            shift: FIRST_WIDTH.trailing_zeros(),
            cells: Vec::new(),
        }
    }

    pub(crate) fn width(&self) -> u64 {
        self.width
    }

    pub(crate) fn push_row(&mut self) {
        self.cells.resize(self.cells.len() + BUCKETS, 0);
    }

    pub(crate) fn row(&self, row: usize) -> &[u64] {
        &self.cells[row * BUCKETS..(row + 1) * BUCKETS]
    }

    pub(crate) fn add(&mut self, row: usize, time_ns: u64, weight: u64) {
        while time_ns >> self.shift >= BUCKETS as u64 {
            self.double();
        }
        self.cells[row * BUCKETS + (time_ns >> self.shift) as usize] += weight;
    }

    /// Adds a row of the same width.
    pub(crate) fn add_row(&mut self, row: usize, values: &[u64]) {
        for (mine, v) in self.cells[row * BUCKETS..].iter_mut().zip(values) {
            *mine += v;
        }
    }

    /// Doubles the width until it is at least `width`.
    pub(crate) fn widen_to(&mut self, width: u64) {
        while self.width < width {
            self.double();
        }
    }

    /// Each pair of buckets becomes one; the upper half is empty afterwards.
    fn double(&mut self) {
        for row in self.cells.chunks_mut(BUCKETS) {
            for i in 0..BUCKETS / 2 {
                row[i] = row[2 * i] + row[2 * i + 1];
            }
            row[BUCKETS / 2..].fill(0);
        }
        self.width *= 2;
        self.shift += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubling_keeps_every_count_in_its_time() {
        let mut b = Buckets::new();
        b.push_row();
        b.add(0, 0, 1);
        b.add(0, FIRST_WIDTH * 63, 2);
        assert_eq!(b.row(0)[63], 2);
        b.add(0, FIRST_WIDTH * 64, 4);
        assert_eq!(b.width(), 2 * FIRST_WIDTH);
        assert_eq!((b.row(0)[0], b.row(0)[31], b.row(0)[32]), (1, 2, 4));
        let mut other = Buckets::new();
        other.push_row();
        other.add(0, 5, 10);
        other.widen_to(b.width());
        b.add_row(0, other.row(0));
        assert_eq!(b.row(0)[0], 11);
        assert_eq!(b.row(0).iter().sum::<u64>(), 17);
    }
}
