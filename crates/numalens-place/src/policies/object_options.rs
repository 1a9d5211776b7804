//! The placements `per-object` tries for one object's pages, written over the layout in place:
//! a copy of a whole layout per option would cost more than simulating the option on a profile
//! of millions of pages.

use crate::layout::Layout;

use super::Input;

/// One way to place an object's pages, applied over their placement as it was.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Choice {
    /// Every page on one node.
    Node(usize),
    /// Page by page over every memory node, by page number.
    Interleave,
    /// Each page on its Eq. 2 home.
    Home,
    /// Round-robin over each page's home and the k − 1 nearest other nodes, idle ones (no
    /// thread of the run) first: a stream one core can saturate a controller with gets k.
    Spread(usize),
    /// A copy on every node (the pages keep their homes, where writes go).
    Replicate,
}

/// What the choices need, computed once per object.
pub(super) struct Options<'a> {
    input: &'a Input<'a>,
    pages: &'a [u32],
    homes: &'a [usize],
    memory: Vec<usize>,
    /// Each node's other nodes by latency, idle ones first.
    near: Vec<Vec<usize>>,
    read_only: bool,
}

impl<'a> Options<'a> {
    /// For `pages` (sorted) whose Eq. 2 homes are `homes`, under `layout`'s thread mapping.
    pub(super) fn new(
        input: &'a Input<'a>,
        layout: &Layout,
        pages: &'a [u32],
        homes: &'a [usize],
    ) -> Options<'a> {
        let m = input.machine;
        let mut threads_on = vec![0usize; m.node_count()];
        for &n in &layout.thread_node {
            threads_on[n] += 1;
        }
        let near = (0..m.node_count())
            .map(|home| {
                let mut list: Vec<usize> = m
                    .fallback_order(home)
                    .into_iter()
                    .filter(|&n| n != home)
                    .collect();
                list.sort_by_key(|&n| threads_on[n] > 0);
                list
            })
            .collect();
        let a = input.accesses;
        Options {
            input,
            pages,
            homes,
            memory: m.memory_nodes(),
            near,
            read_only: pages.iter().all(|&p| a.pages[p as usize].writes() == 0),
        }
    }

    /// Every choice worth simulating, in a fixed order.
    pub(super) fn choices(&self) -> Vec<Choice> {
        let mut out: Vec<Choice> = self.memory.iter().map(|&n| Choice::Node(n)).collect();
        out.push(Choice::Interleave);
        out.push(Choice::Home);
        for k in [2usize, 4] {
            if self.memory.len() >= k {
                out.push(Choice::Spread(k));
            }
        }
        if self.read_only && self.memory.len() > 1 {
            out.push(Choice::Replicate);
        }
        out
    }

    /// Write `choice` over the object's pages (as restored by [`Saved::restore`]).
    pub(super) fn apply(&self, choice: Choice, layout: &mut Layout) {
        let a = self.input.accesses;
        if choice == Choice::Replicate {
            layout.replicated.resize(a.pages.len(), false);
            for &p in self.pages {
                layout.replicated[p as usize] = true;
            }
            return;
        }
        for (i, &p) in self.pages.iter().enumerate() {
            let number = a.pages[p as usize].number;
            let node = match choice {
                Choice::Node(n) => n,
                Choice::Interleave => self.memory[(number % self.memory.len() as u64) as usize],
                Choice::Home => self.homes[i],
                Choice::Spread(k) => {
                    let home = self.homes[i];
                    match (number % k as u64) as usize {
                        0 => home,
                        slot => self.near[home].get(slot - 1).copied().unwrap_or(home),
                    }
                }
                Choice::Replicate => unreachable!("handled above"),
            };
            layout.page_node[p as usize] = node;
            if let Some(r) = layout.replicated.get_mut(p as usize) {
                *r = false;
            }
        }
    }
}

/// An object's pages' placement as it was, to try the choices from.
pub(super) struct Saved {
    nodes: Vec<usize>,
    replicated: Vec<bool>,
}

impl Saved {
    pub(super) fn of(layout: &Layout, pages: &[u32]) -> Saved {
        Saved {
            nodes: pages
                .iter()
                .map(|&p| layout.page_node[p as usize])
                .collect(),
            replicated: pages
                .iter()
                .map(|&p| layout.is_replicated(p as usize))
                .collect(),
        }
    }

    pub(super) fn restore(&self, layout: &mut Layout, pages: &[u32]) {
        for (i, &p) in pages.iter().enumerate() {
            layout.page_node[p as usize] = self.nodes[i];
            if let Some(r) = layout.replicated.get_mut(p as usize) {
                *r = self.replicated[i];
            }
        }
    }
}
