//! Fitting the model's matrices into a bounded number of drawn cells, and the colour scale.
//!
//! Every chart of the HTML report goes through here, so the file stays small whatever the
//! profile: a matrix wider or taller than its bound is merged into groups of consecutive rows or
//! columns, and the chart says how many each drawn cell stands for.

use numalens_analyze::model::{Heatmap, ThreadShare};

/// The smallest group size that brings `n` items down to at most `max` groups.
pub(crate) fn group_size(n: usize, max: usize) -> usize {
    if n <= max.max(1) {
        1
    } else {
        n.div_ceil(max.max(1))
    }
}

/// Ranges of `group` consecutive indices covering `0..n`, the last one possibly shorter.
pub(crate) fn groups(n: usize, group: usize) -> impl Iterator<Item = std::ops::Range<usize>> {
    let group = group.max(1);
    (0..n.div_ceil(group)).map(move |g| g * group..((g + 1) * group).min(n))
}

/// A matrix of densities ready to draw, with how many source rows and columns each cell holds.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Grid {
    /// `cells[row][column]`.
    pub cells: Vec<Vec<f64>>,
    /// Source rows merged into one drawn row.
    pub rows_per_cell: usize,
    /// Source columns merged into one drawn column.
    pub cols_per_cell: usize,
}

impl Grid {
    /// Merges `values` (rows × columns of counts) into at most `max_rows` × `max_cols` cells, each
    /// the mean of the counts it covers (so the unit of a cell does not change with binning).
    pub(crate) fn mean_of(values: &[Vec<f64>], max_rows: usize, max_cols: usize) -> Grid {
        let cols = values.iter().map(Vec::len).max().unwrap_or(0);
        let weights = vec![1.0; cols];
        Grid::weighted(values, &weights, max_rows, max_cols)
    }

    /// Like [`Grid::mean_of`], where source column `c` holds `weights[c]` units (pages): a cell
    /// is the sum of its counts over the units and rows it covers.
    pub(crate) fn weighted(
        values: &[Vec<f64>],
        weights: &[f64],
        max_rows: usize,
        max_cols: usize,
    ) -> Grid {
        let cols = weights.len();
        let rows_per_cell = group_size(values.len(), max_rows);
        let cols_per_cell = group_size(cols, max_cols);
        let cells = groups(values.len(), rows_per_cell)
            .map(|rows| {
                groups(cols, cols_per_cell)
                    .map(|cs| {
                        let units: f64 =
                            cs.clone().map(|c| weights[c]).sum::<f64>() * rows.len() as f64;
                        let sum: f64 = values[rows.clone()]
                            .iter()
                            .flat_map(|r| cs.clone().filter_map(move |c| r.get(c)))
                            .sum();
                        if units > 0.0 { sum / units } else { 0.0 }
                    })
                    .collect()
            })
            .collect();
        Grid {
            cells,
            rows_per_cell,
            cols_per_cell,
        }
    }

    pub(crate) fn rows(&self) -> usize {
        self.cells.len()
    }

    pub(crate) fn cols(&self) -> usize {
        self.cells.first().map_or(0, Vec::len)
    }

    pub(crate) fn max(&self) -> f64 {
        self.cells.iter().flatten().copied().fold(0.0, f64::max)
    }
}

/// Pages in each column of the model's heatmap (the last column may hold fewer).
pub(crate) fn column_pages(h: &Heatmap) -> Vec<f64> {
    let columns = h.page_average.len();
    let per = h.pages_per_column.max(1);
    (0..columns as u64)
        .map(|c| per.min(h.pages.saturating_sub(c * per)).max(1) as f64)
        .collect()
}

/// Means of `values` over groups of `group` consecutive items, each item weighing `weights[i]`.
pub(crate) fn weighted_means(values: &[f64], weights: &[f64], group: usize) -> Vec<f64> {
    groups(values.len(), group)
        .map(|g| {
            let w: f64 = g
                .clone()
                .map(|i| weights.get(i).copied().unwrap_or(1.0))
                .sum();
            let s: f64 = g
                .map(|i| values[i] * weights.get(i).copied().unwrap_or(1.0))
                .sum();
            if w > 0.0 { s / w } else { 0.0 }
        })
        .collect()
}

/// The first toucher of each group of `group` columns: the thread that first touched most of
/// the group's pages, with its share of the group's touched pages.
pub(crate) fn merge_first_touch(
    columns: &[Option<ThreadShare>],
    group: usize,
) -> Vec<Option<(usize, f64)>> {
    groups(columns.len(), group)
        .map(|g| {
            let mut by_thread: Vec<(usize, f64)> = Vec::new();
            let mut touched = 0.0;
            for share in columns[g].iter().flatten() {
                // The model gives the top toucher's pages and its share of touched pages.
                if share.share > 0.0 {
                    touched += share.count as f64 / share.share;
                }
                match by_thread.iter_mut().find(|(t, _)| *t == share.thread) {
                    Some((_, n)) => *n += share.count as f64,
                    None => by_thread.push((share.thread, share.count as f64)),
                }
            }
            let (thread, pages) = by_thread
                .into_iter()
                .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)))?;
            Some((thread, if touched > 0.0 { pages / touched } else { 1.0 }))
        })
        .collect()
}

/// Colour levels of every scale: a cell is drawn in one of these, so equal neighbours merge.
pub(crate) const LEVELS: usize = 24;

/// The level of `value` on a linear scale from 0 to `max`: 0 only for no access at all, so the
/// smallest count still shows.
pub(crate) fn level(value: f64, max: f64) -> usize {
    if value <= 0.0 || max <= 0.0 {
        return 0;
    }
    let scaled = (value / max * (LEVELS - 1) as f64).ceil() as usize;
    scaled.clamp(1, LEVELS - 1)
}

/// TABARNAC's gradient: white, through orange (#C86400), to dark red (#640000).
pub(crate) fn level_rgb(level: usize) -> (u8, u8, u8) {
    let t = level.min(LEVELS - 1) as f64 / (LEVELS - 1) as f64;
    let lerp = |a: f64, b: f64, f: f64| (a + (b - a) * f).round() as u8;
    let (from, to, f) = if t <= 0.5 {
        ((255.0, 255.0, 255.0), (200.0, 100.0, 0.0), t * 2.0)
    } else {
        ((200.0, 100.0, 0.0), (100.0, 0.0, 0.0), (t - 0.5) * 2.0)
    };
    (
        lerp(from.0, to.0, f),
        lerp(from.1, to.1, f),
        lerp(from.2, to.2, f),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_sizes_bound_the_number_of_groups() {
        assert_eq!(group_size(10, 64), 1);
        assert_eq!(group_size(64, 64), 1);
        assert_eq!(group_size(65, 64), 2);
        assert_eq!(group_size(1_000_000, 96), 10_417);
        for n in [0usize, 1, 95, 96, 97, 1000, 123_457] {
            assert!(n.div_ceil(group_size(n, 96)) <= 96, "{n}");
        }
        let g: Vec<_> = groups(7, 3).collect();
        assert_eq!(g, vec![0..3, 3..6, 6..7]);
    }

    #[test]
    fn a_wide_matrix_is_merged_into_bounded_cells_keeping_its_unit() {
        // 3 rows × 1000 columns, row r holding r+1 in every column.
        let values: Vec<Vec<f64>> = (0..3).map(|r| vec![r as f64 + 1.0; 1000]).collect();
        let grid = Grid::mean_of(&values, 2, 96);
        assert_eq!((grid.rows_per_cell, grid.cols_per_cell), (2, 11));
        assert_eq!((grid.rows(), grid.cols()), (2, 91));
        // Rows 0 and 1 merge into their mean; the means stay per source cell.
        assert!(grid.cells[0].iter().all(|v| (*v - 1.5).abs() < 1e-9));
        assert!(grid.cells[1].iter().all(|v| (*v - 3.0).abs() < 1e-9));
        assert_eq!(grid.max(), 3.0);
    }

    #[test]
    fn weighted_columns_give_counts_per_page() {
        // Two columns of 16 pages and a last one of 4 pages.
        let values = vec![vec![32.0, 16.0, 8.0]];
        let grid = Grid::weighted(&values, &[16.0, 16.0, 4.0], 8, 8);
        assert_eq!(grid.cells, vec![vec![2.0, 1.0, 2.0]]);
        let merged = Grid::weighted(&values, &[16.0, 16.0, 4.0], 8, 2);
        assert_eq!(merged.cells, vec![vec![48.0 / 32.0, 2.0]]);
        assert_eq!(
            weighted_means(&[2.0, 1.0, 2.0], &[16.0, 16.0, 4.0], 2),
            vec![1.5, 2.0]
        );
    }

    #[test]
    fn merged_first_touch_keeps_the_main_toucher_and_its_share() {
        let s = |thread, count, share| {
            Some(ThreadShare {
                thread,
                count,
                share,
            })
        };
        let columns = vec![s(0, 16, 1.0), s(1, 12, 0.75), None, s(1, 8, 1.0)];
        let merged = merge_first_touch(&columns, 2);
        assert_eq!(merged[0].unwrap().0, 0);
        assert!((merged[0].unwrap().1 - 16.0 / 32.0).abs() < 1e-9);
        assert_eq!(merged[1], Some((1, 1.0)));
        assert_eq!(merge_first_touch(&[None, None], 2), vec![None]);
    }

    #[test]
    fn levels_show_any_access_and_span_the_gradient() {
        assert_eq!(level(0.0, 10.0), 0);
        assert_eq!(level(0.001, 10.0), 1);
        assert_eq!(level(10.0, 10.0), LEVELS - 1);
        assert_eq!(level(20.0, 10.0), LEVELS - 1);
        assert_eq!(level_rgb(0), (255, 255, 255));
        assert_eq!(level_rgb(LEVELS - 1), (100, 0, 0));
    }
}
