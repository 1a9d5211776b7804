//! How many pages the engine hands a mover at a time, from how long the movers' `move_pages`
//! calls take: a call lands none of its pages until it ends, so a long call holds back the
//! pages behind it (decided since, maybe more used), while each call also has a cost of its own
//! whatever its pages (a TLB flush on every CPU of the process from Linux 6.4, the per-CPU page
//! lists emptied before the pages are isolated). Each call is aimed at [`TARGET_CALL_NS`]: a
//! call that took longer makes the next smaller, one that took less makes it larger, by the
//! geometric mean of the size now and the size that would have taken the target, within
//! [`MIN_PAGES`]–[`MAX_PAGES`].

/// How long a call should take. With calls of c(n) = a + b·n the size settles where a call
/// takes this long (or at [`MIN_PAGES`] when a call's own cost is larger).
pub const TARGET_CALL_NS: u64 = 250_000_000;
/// The first jobs' size: one call of the default batch.
pub const START_PAGES: usize = 1024;
pub const MIN_PAGES: usize = 128;
pub const MAX_PAGES: usize = 8192;

#[derive(Debug, Clone)]
pub struct JobSize {
    pages: f64,
    /// The smallest and largest size used, for the run's summary.
    pub range: (usize, usize),
}

impl Default for JobSize {
    fn default() -> Self {
        JobSize {
            pages: START_PAGES as f64,
            range: (START_PAGES, START_PAGES),
        }
    }
}

impl JobSize {
    /// Pages for the next job.
    pub fn pages(&self) -> usize {
        self.pages.round() as usize
    }

    /// A moving call of `pages` pages took `ns`. A call of less than a quarter of the size
    /// now (the backlog's last few pages, a job whose pages were mostly in place) says little
    /// of a full one's time, and is not counted.
    pub fn observe(&mut self, pages: usize, ns: u64) {
        if pages == 0 || (pages as f64) < self.pages / 4.0 {
            return;
        }
        let ideal = pages as f64 * TARGET_CALL_NS as f64 / ns.max(1) as f64;
        self.pages = (self.pages * ideal)
            .sqrt()
            .clamp(MIN_PAGES as f64, MAX_PAGES as f64);
        let now = self.pages();
        self.range = (self.range.0.min(now), self.range.1.max(now));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// Calls costing `fixed_ms` each plus `per_page_us` per page: the sizes the jobs take.
    fn settle(fixed_ms: f64, per_page_us: f64, calls: usize) -> usize {
        let mut s = JobSize::default();
        for _ in 0..calls {
            let n = s.pages();
            let ns = (fixed_ms * 1e6 + per_page_us * 1e3 * n as f64) as u64;
            s.observe(n, ns);
        }
        s.pages()
    }

    #[test]
    fn calls_settle_where_they_take_the_target() {
        // 20 ms a call and 100 µs a page: (250 - 20) / 0.1 = 2,300 pages take 250 ms.
        let n = settle(20.0, 100.0, 30);
        assert!((2_250..=2_350).contains(&n), "{n}");
        // Pages copied slowly (1 ms each): 230 pages.
        let n = settle(20.0, 1_000.0, 30);
        assert!((220..=240).contains(&n), "{n}");
    }

    #[test]
    fn sizes_stay_within_bounds() {
        // A call's own cost above the target: the smallest jobs; calls that cost nothing: the
        // largest.
        assert_eq!(settle(400.0, 10.0, 30), MIN_PAGES);
        assert_eq!(settle(0.0, 0.001, 30), MAX_PAGES);
    }

    #[test]
    fn a_small_call_does_not_shrink_the_jobs() {
        let mut s = JobSize::default();
        // 100 pages in 200 ms (a job of the backlog's last pages): not counted.
        s.observe(100, 200 * MS);
        assert_eq!(s.pages(), START_PAGES);
        // A full job that took four times the target: the next is half the size.
        s.observe(1024, 4 * TARGET_CALL_NS);
        assert_eq!(s.pages(), 512);
        assert_eq!(s.range, (512, 1024));
    }
}
