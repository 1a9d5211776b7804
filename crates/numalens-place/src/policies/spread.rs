//! Weighted spreads found by local search. An object's pages are grouped by their Eq. 2 home;
//! each group's pages go round-robin over the memory nodes in proportion to a weight per node
//! (in 24ths), and one 24th at a time moves from one node to another while the simulated time
//! falls; a group of at most 24 pages moves page by page instead. Where one controller or link
//! saturates, the best share of a group on its home node lies between "all of it" (Eq. 2) and an
//! even spread (interleave); a weighted spread finds it, and it also learns to avoid slow links
//! (machine-b's 8-bit 0↔3 link).

use crate::layout::Layout;
use crate::sim::Split;

use super::Input;

/// Weight units per group: shares move in 24ths (8, 6, 4, 3 and 2 nodes share them evenly). A
/// group of no more pages than that moves page by page: a share would move no page.
const SLOTS: u32 = 24;

/// Placements simulated at most per object.
const BUDGET_PER_OBJECT: u64 = 400;

/// Improve `layout` for `pages` (one object's, sorted) whose Eq. 2 homes are `homes`. `time` is
/// the layout's simulated time, updated. Returns the placements simulated and whether the
/// layout changed.
pub(super) fn refine(
    input: &Input,
    split: &Split,
    layout: &mut Layout,
    pages: &[u32],
    homes: &[usize],
    time: &mut f64,
) -> (u64, bool) {
    let memory = input.machine.memory_nodes();
    if memory.len() < 2 {
        return (0, false);
    }
    let mut search = Search {
        split,
        layout,
        time: *time,
        budget: super::per_object::within_cell_budget(split, BUDGET_PER_OBJECT),
        evaluated: 0,
        changed: false,
    };
    // Pages take turns in runs long enough for the object's plan to stay within its range limit
    // (a run a range at worst), so that the plan does what was simulated.
    let run = pages.len().div_ceil(crate::plan::MAX_RANGES / 2).max(1);
    for group in groups(input, pages, homes) {
        let order = near_first(input, homes[pages_pos(pages, group[0])], &memory);
        if group.len() <= SLOTS as usize {
            search.page_by_page(input, &group, &order);
        } else {
            search.weighted(&group, &order, &memory, run);
        }
    }
    *time = search.time;
    (search.evaluated, search.changed)
}

/// A local search's state: the layout, its simulated time and what was spent.
struct Search<'s, 'a> {
    split: &'s Split<'a>,
    layout: &'s mut Layout,
    time: f64,
    budget: u64,
    evaluated: u64,
    changed: bool,
}

impl Search<'_, '_> {
    /// Simulates the layout as changed; keeps the change if it is faster, else calls `undo`.
    fn try_change(&mut self, undo: impl FnOnce(&mut Layout)) -> bool {
        let t = self.split.time_s(self.layout);
        self.evaluated += 1;
        if t < self.time {
            self.time = t;
            self.changed = true;
            true
        } else {
            undo(self.layout);
            false
        }
    }

    fn spent(&self) -> bool {
        self.evaluated >= self.budget
    }

    /// A group of few pages: each page, hottest first, to whichever node makes the run faster
    /// (a weight per node says nothing of which page goes where, and one hot page can weigh
    /// more than all the others).
    fn page_by_page(&mut self, input: &Input, group: &[usize], order: &[usize]) {
        let mut hottest: Vec<usize> = group.to_vec();
        hottest.sort_by_key(|&p| std::cmp::Reverse(input.accesses.pages[p].total()));
        let mut improved = true;
        while improved && !self.spent() {
            improved = false;
            for &p in &hottest {
                for &to in order {
                    let from = self.layout.page_node[p];
                    if to == from || self.spent() {
                        continue;
                    }
                    self.layout.page_node[p] = to;
                    improved |= self.try_change(|l| l.page_node[p] = from);
                }
            }
        }
    }

    /// A group of many pages: their shares per node, one unit at a time from one node to
    /// another.
    fn weighted(&mut self, group: &[usize], order: &[usize], memory: &[usize], run: usize) {
        let mut weights = current_weights(self.layout, group, memory, SLOTS);
        let mut saved = Vec::with_capacity(group.len());
        let mut improved = true;
        while improved && !self.spent() {
            improved = false;
            for &from in order {
                for &to in order {
                    if from == to || weights[from] == 0 || self.spent() {
                        continue;
                    }
                    saved.clear();
                    saved.extend(group.iter().map(|&p| self.layout.page_node[p]));
                    weights[from] -= 1;
                    weights[to] += 1;
                    assign(self.layout, group, &weights, memory, run);
                    let kept = self.try_change(|l| {
                        for (&p, &n) in group.iter().zip(&saved) {
                            l.page_node[p] = n;
                        }
                    });
                    if kept {
                        improved = true;
                    } else {
                        weights[from] += 1;
                        weights[to] -= 1;
                    }
                }
            }
        }
    }
}

fn pages_pos(pages: &[u32], p: usize) -> usize {
    pages.binary_search(&(p as u32)).unwrap_or(0)
}

/// The object's pages by home, the group with most accesses first; pages in address order.
fn groups(input: &Input, pages: &[u32], homes: &[usize]) -> Vec<Vec<usize>> {
    let a = input.accesses;
    let mut by_home: std::collections::BTreeMap<usize, (u64, Vec<usize>)> = Default::default();
    for (&p, &h) in pages.iter().zip(homes) {
        let g = by_home.entry(h).or_default();
        g.0 = g.0.saturating_add(a.pages[p as usize].total());
        g.1.push(p as usize);
    }
    let mut list: Vec<(u64, Vec<usize>)> = by_home.into_values().collect();
    list.sort_by_key(|g| std::cmp::Reverse(g.0));
    list.into_iter().map(|g| g.1).collect()
}

/// Weights (indexed by node position, in `slots` units) close to the group's present distribution.
fn current_weights(layout: &Layout, group: &[usize], memory: &[usize], slots: u32) -> Vec<u32> {
    let mut count = vec![0usize; memory.iter().max().map_or(0, |&m| m + 1)];
    for &p in group {
        if let Some(c) = count.get_mut(layout.page_node[p]) {
            *c += 1;
        }
    }
    let mut w: Vec<u32> = count
        .iter()
        .map(|&c| (c as u64 * slots as u64 / group.len() as u64) as u32)
        .collect();
    // Rounding down leaves slots over: they go to the nodes holding most pages.
    let mut by_count: Vec<usize> = memory.to_vec();
    by_count.sort_by_key(|&n| std::cmp::Reverse(count[n]));
    let mut left = slots - w.iter().sum::<u32>();
    for &n in by_count.iter().cycle().take(memory.len() * slots as usize) {
        if left == 0 {
            break;
        }
        w[n] += 1;
        left -= 1;
    }
    w
}

/// Memory nodes, `home` first, then by distance from it.
fn near_first(input: &Input, home: usize, memory: &[usize]) -> Vec<usize> {
    let order = input.machine.fallback_order(home);
    order.into_iter().filter(|n| memory.contains(n)).collect()
}

/// The group's pages round-robin over the nodes in proportion to `weights`, each node's turns
/// spread evenly over the cycle (smooth weighted round-robin), `run` pages a turn.
fn assign(layout: &mut Layout, group: &[usize], weights: &[u32], memory: &[usize], run: usize) {
    let cycle = smooth_cycle(weights, memory);
    for (i, &p) in group.iter().enumerate() {
        layout.page_node[p] = cycle[(i / run) % cycle.len()];
    }
}

fn smooth_cycle(weights: &[u32], memory: &[usize]) -> Vec<usize> {
    let total: i64 = memory.iter().map(|&n| weights[n] as i64).sum();
    let mut current = vec![0i64; weights.len()];
    let mut out = Vec::with_capacity(total as usize);
    for _ in 0..total {
        let mut pick = memory[0];
        for &n in memory {
            current[n] += weights[n] as i64;
            if current[n] > current[pick] || (weights[pick] == 0 && weights[n] > 0) {
                pick = n;
            }
        }
        current[pick] -= total;
        out.push(pick);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smooth_cycle_spreads_each_nodes_turns() {
        let memory = [0, 1, 2];
        let cycle = smooth_cycle(&[6, 3, 3], &memory);
        assert_eq!(cycle.len(), 12);
        assert_eq!(cycle.iter().filter(|&&n| n == 0).count(), 6);
        assert_eq!(cycle.iter().filter(|&&n| n == 1).count(), 3);
        // Node 0's turns are spread over the cycle: never three in a row, and every half of the
        // cycle holds three of them.
        assert!(
            !cycle.windows(3).any(|w| w.iter().all(|&n| n == 0)),
            "{cycle:?}"
        );
        assert_eq!(
            cycle[..6].iter().filter(|&&n| n == 0).count(),
            3,
            "{cycle:?}"
        );
    }

    #[test]
    fn smooth_cycle_never_picks_a_node_without_weight() {
        let memory = [0, 1, 2, 3];
        let cycle = smooth_cycle(&[0, 12, 0, 0], &memory);
        assert!(cycle.iter().all(|&n| n == 1), "{cycle:?}");
        let cycle = smooth_cycle(&[0, 0, 5, 7], &memory);
        assert_eq!(cycle.iter().filter(|&&n| n == 2).count(), 5);
        assert_eq!(cycle.iter().filter(|&&n| n == 3).count(), 7);
    }
}
