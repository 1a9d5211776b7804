//! The last step of an object's search: its hottest blocks of pages, each tried on every memory
//! node. A spread decides shares per Eq. 2 home; where a few blocks of an object carry most of
//! its accesses (a hot region in a large array), the best node for each block can differ from
//! its home's share, and one block moved alone can relieve a saturated controller that a whole
//! share cannot. The moves stay what a plan can state: an object's page ranges never grow past
//! the plan's limit.

use crate::accesses::Accesses;
use crate::layout::Layout;
use crate::plan::MAX_RANGES;
use crate::sim::Split;

use super::Input;

/// Pages per block at least: small enough to single out a hot region, large enough that an
/// object of thousands of pages has few blocks worth trying.
const BLOCK_PAGES: usize = 16;

/// Blocks tried per object, the hottest first.
const BLOCKS: usize = 32;

/// Tries `pages`' (one object's, sorted) hottest blocks on every memory node, keeping each move
/// that makes the simulated `time` fall. Returns the placements simulated and whether the
/// layout changed.
pub(super) fn refine(
    input: &Input,
    split: &Split,
    layout: &mut Layout,
    pages: &[u32],
    time: &mut f64,
) -> (u64, bool) {
    let a = input.accesses;
    let memory = input.machine.memory_nodes();
    if memory.len() < 2 || pages.len() <= BLOCK_PAGES {
        return (0, false);
    }
    let budget = super::per_object::within_cell_budget(split, (BLOCKS * memory.len()) as u64);
    let mut ranges = range_count(a, layout, pages, 0, pages.len());
    let limit = ranges.max(MAX_RANGES / 2);
    let mut evaluated = 0;
    let mut changed = false;
    let mut saved = Vec::with_capacity(BLOCK_PAGES);
    for block in hottest_blocks(a, pages) {
        let (lo, hi) = (
            block.start.saturating_sub(1),
            (block.end + 1).min(pages.len()),
        );
        for &node in &memory {
            if evaluated >= budget {
                return (evaluated, changed);
            }
            let block_pages = &pages[block.clone()];
            if block_pages
                .iter()
                .all(|&p| layout.page_node[p as usize] == node)
            {
                continue;
            }
            let around = range_count(a, layout, pages, lo, hi);
            saved.clear();
            saved.extend(block_pages.iter().map(|&p| layout.page_node[p as usize]));
            for &p in block_pages {
                layout.page_node[p as usize] = node;
            }
            let after = ranges + range_count(a, layout, pages, lo, hi) - around;
            let kept = after <= limit && {
                let t = split.time_s(layout);
                evaluated += 1;
                t < *time && {
                    *time = t;
                    true
                }
            };
            if kept {
                ranges = after;
                changed = true;
            } else {
                for (&p, &n) in block_pages.iter().zip(&saved) {
                    layout.page_node[p as usize] = n;
                }
            }
        }
    }
    (evaluated, changed)
}

/// Index ranges into `pages` of `BLOCK_PAGES` each, by accesses, the hottest `BLOCKS` first.
fn hottest_blocks(a: &Accesses, pages: &[u32]) -> Vec<std::ops::Range<usize>> {
    let mut blocks: Vec<(u64, std::ops::Range<usize>)> = (0..pages.len())
        .step_by(BLOCK_PAGES)
        .map(|start| {
            let end = (start + BLOCK_PAGES).min(pages.len());
            let heat = pages[start..end]
                .iter()
                .fold(0u64, |s, &p| s.saturating_add(a.pages[p as usize].total()));
            (heat, start..end)
        })
        .collect();
    blocks.sort_by_key(|b| (std::cmp::Reverse(b.0), b.1.start));
    blocks.into_iter().take(BLOCKS).map(|b| b.1).collect()
}

/// Page ranges that start within `pages[lo..hi]`, counted as a plan writes them (a new range at
/// each change of node or gap in page numbers).
fn range_count(a: &Accesses, layout: &Layout, pages: &[u32], lo: usize, hi: usize) -> usize {
    (lo..hi)
        .filter(|&i| {
            i == 0 || {
                let (p, q) = (pages[i - 1] as usize, pages[i] as usize);
                layout.page_node[p] != layout.page_node[q]
                    || a.pages[p].number + 1 != a.pages[q].number
            }
        })
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accesses::Cell;
    use crate::fixture::{self, cell, exact, pages_placed_by};
    use crate::policies::Params;
    use crate::sim::tests::machine;

    /// 64 pages of one object: thread 0 (node 0) reads them all a little, thread 1 (node 1)
    /// reads pages 16..32 a lot.
    fn hot_region() -> Accesses {
        let mut cells: Vec<Cell> = (0..64).map(|page| cell(page, 0, 1_000, 0)).collect();
        cells.extend((16..32).map(|page| cell(page, 1, 2_000_000, 0)));
        let threads = fixture::threads(1, 10, 2);
        exact(
            threads,
            Vec::new(),
            pages_placed_by(64, 0),
            1_000_000_000,
            vec![cells],
        )
    }

    #[test]
    fn the_hot_block_moves_to_its_user_and_the_cold_ones_stay() {
        let a = hot_region();
        let m = machine("machine-b");
        let params = Params::default();
        let threads = vec![0, 1];
        let input = Input {
            accesses: &a,
            machine: &m,
            threads: &threads,
            params: &params,
        };
        let mut layout = Layout {
            thread_node: threads.clone(),
            page_node: vec![0; 64],
            replicated: Vec::new(),
        };
        let pages: Vec<u32> = (0..64).collect();
        let split = Split::new(&a, &m, &layout, &params.model, &pages);
        let before = split.time_s(&layout);
        let mut time = before;
        let (evaluated, changed) = refine(&input, &split, &mut layout, &pages, &mut time);
        assert!(changed && evaluated > 0);
        assert!(time < before, "{time} vs {before}");
        assert_eq!(
            time,
            split.time_s(&layout),
            "the time returned is the layout's"
        );
        assert!(
            layout.page_node[16..32].iter().all(|&n| n == 1),
            "{layout:?}"
        );
        assert!(layout.page_node[..16].iter().all(|&n| n == 0), "{layout:?}");
        assert!(layout.page_node[32..].iter().all(|&n| n == 0), "{layout:?}");
    }

    #[test]
    fn ranges_are_counted_as_a_plan_writes_them() {
        let mut a = hot_region();
        // Pages 0..64 with a gap after page 40: a plan starts a range there whatever the nodes.
        for p in 41..64 {
            a.pages[p].number += 10;
        }
        let mut layout = Layout {
            thread_node: vec![0, 1],
            page_node: vec![0; 64],
            replicated: Vec::new(),
        };
        let pages: Vec<u32> = (0..64).collect();
        assert_eq!(range_count(&a, &layout, &pages, 0, 64), 2);
        layout.page_node[16..32].fill(1);
        assert_eq!(range_count(&a, &layout, &pages, 0, 64), 4);
        // Only the boundaries within the window count: those at 16 and 32.
        assert_eq!(range_count(&a, &layout, &pages, 15, 33), 2);
    }
}
