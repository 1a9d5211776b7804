//! A plan read back onto a profile's accesses: the schedule its rules give, so that a plan
//! (as written, or edited by hand) can be simulated beside the policies before a run applies it.
//! Rules find their objects by identity as a run would; pages no rule covers stay where first
//! touch puts them.

use std::collections::HashMap;

use super::{Action, Identity, MigrateAt, Plan, first_page, identity};
use crate::accesses::Accesses;
use crate::layout::{Layout, Move, MoveKind, Schedule, SpillOrder, ThreadMove};
use crate::machine::Machine;
use crate::policies::Input;

/// How an identity is matched: the frames are for people, the rest must agree.
type Key = (
    u32,
    Option<u64>,
    Option<String>,
    Option<String>,
    Option<u32>,
);

fn key(id: &Identity) -> Key {
    let site = id.site.as_deref().and_then(|s| {
        u64::from_str_radix(s.trim_start_matches("0x").trim_start_matches("0X"), 16).ok()
    });
    (
        id.process,
        site,
        id.symbol.clone(),
        id.module.clone(),
        id.stack_of_thread,
    )
}

/// The schedule `plan` gives on `input`'s accesses and machine (node ids already checked with
/// [`Plan::check_machine`]), with notes on what matched.
pub fn schedule(plan: &Plan, input: &Input) -> Schedule {
    let a = input.accesses;
    let m = input.machine;
    let pids = a.pids();
    let rank = |pid: u32| pids.iter().position(|&p| p == pid).unwrap_or(0) as u32;
    let position = |node: u32| m.nodes.iter().position(|&n| n == node);
    let mut notes = Vec::new();

    let mut threads = input.threads.to_vec();
    let thread_rules: HashMap<(u32, u32), &super::ThreadRule> = plan
        .threads
        .iter()
        .map(|t| ((t.process, t.logical_id), t))
        .collect();
    let mut threads_placed = 0;
    let mut thread_moves: Vec<Vec<ThreadMove>> = Vec::new();
    for (i, t) in a.threads.iter().enumerate() {
        let Some(rule) = thread_rules.get(&(rank(t.pid), t.logical_id)) else {
            continue;
        };
        if let Some(n) = position(rule.node) {
            threads[i] = n;
            threads_placed += 1;
        }
        for m in &rule.migrate_at {
            if let (Some(to), Some(w)) = (position(m.node), window_of(a, m.time_s)) {
                if thread_moves.len() <= w {
                    thread_moves.resize(w + 1, Vec::new());
                }
                thread_moves[w].push(ThreadMove {
                    thread: i as u32,
                    to,
                });
            }
        }
    }
    let mapped = Input {
        threads: &threads,
        ..*input
    };
    let mut layout = crate::policies::first_touch_layout(&mapped);
    layout.replicated = vec![false; a.pages.len()];

    let rules: HashMap<Key, usize> = plan
        .objects
        .iter()
        .enumerate()
        .map(|(i, r)| (key(&r.identity), i))
        .collect();
    let mut by_object: Vec<Vec<usize>> = vec![Vec::new(); a.objects.len()];
    for (p, page) in a.pages.iter().enumerate() {
        if let Some(o) = page.object {
            by_object[o as usize].push(p);
        }
    }
    let mut used = vec![false; plan.objects.len()];
    let mut placed_pages = 0usize;
    let mut moves: Vec<Vec<Move>> = Vec::new();
    for (o, pages) in by_object.iter().enumerate() {
        let object = &a.objects[o];
        let Some(id) = identity(object, a, rank(object.pid)) else {
            continue;
        };
        let Some(&r) = rules.get(&key(&id)) else {
            continue;
        };
        used[r] = true;
        placed_pages += pages.len();
        let rule = &plan.objects[r];
        let start = first_page(a, object, pages);
        apply_action(&rule.action, a, m, &mut layout, pages, start);
        add_moves(&rule.migrate_at, a, m, pages, start, &mut moves);
    }
    notes.push(format!(
        "{} of {} object rules matched objects of the profile, covering {placed_pages} of \
         {} pages (the rest where first touch puts them); {threads_placed} of {} threads placed \
         by thread rules",
        used.iter().filter(|&&u| u).count(),
        plan.objects.len(),
        a.pages.len(),
        a.threads.len()
    ));
    if let Some(r) = used.iter().position(|&u| !u) {
        notes.push(format!(
            "no object of the profile matches the rule of `{}`{}",
            plan.objects[r].name,
            match used.iter().filter(|&&u| !u).count() {
                1 => String::new(),
                n => format!(" and {} more", n - 1),
            }
        ));
    }
    let mut s = Schedule::fitted(layout, a, m, SpillOrder::LatestTouched);
    s.moves = moves;
    s.thread_moves = thread_moves;
    s.notes = notes;
    s
}

/// Gives the object's pages (`start`: the object's first page number) their nodes by `action`.
fn apply_action(
    action: &Action,
    a: &Accesses,
    m: &Machine,
    layout: &mut Layout,
    pages: &[usize],
    start: u64,
) {
    let position = |node: u32| m.nodes.iter().position(|&n| n == node);
    match action {
        Action::Bind { node } => {
            if let Some(n) = position(*node) {
                pages.iter().for_each(|&p| layout.page_node[p] = n);
            }
        }
        Action::Interleave { nodes, weights } => {
            let cycle = interleave_cycle(nodes, weights.as_deref());
            if cycle.is_empty() {
                return;
            }
            for &p in pages {
                // As the kernel does: by the page's place in the address space.
                let node = cycle[(a.pages[p].number % cycle.len() as u64) as usize];
                if let Some(n) = position(node) {
                    layout.page_node[p] = n;
                }
            }
        }
        Action::Replicate {} => pages.iter().for_each(|&p| layout.replicated[p] = true),
        Action::Ranges(ranges) => {
            for (p, range) in pages_in_ranges(a, pages, start, ranges) {
                if let Some(n) = position(range.node) {
                    layout.page_node[p] = n;
                }
            }
        }
    }
}

/// Each page with the range that holds its offset; where ranges overlap (a plan edited by
/// hand), the one written last, as when a run applies them in order. A sweep in offset order
/// with the ranges begun so far in a heap by their place in the file: linear in pages and
/// ranges whatever they are.
fn pages_in_ranges<'r>(
    a: &Accesses,
    pages: &[usize],
    start: u64,
    ranges: &'r [super::PageRange],
) -> Vec<(usize, &'r super::PageRange)> {
    let mut by_offset: Vec<(u64, usize)> = pages
        .iter()
        .map(|&p| (a.pages[p].number - start, p))
        .collect();
    by_offset.sort_unstable();
    let mut by_start: Vec<usize> = (0..ranges.len()).collect();
    by_start.sort_by_key(|&i| ranges[i].pages[0]);
    let mut begun = std::collections::BinaryHeap::new();
    let mut next = 0;
    let mut out = Vec::new();
    for (offset, p) in by_offset {
        while next < by_start.len() && ranges[by_start[next]].pages[0] <= offset {
            begun.push(by_start[next]);
            next += 1;
        }
        // A range that ended before this offset ends before every later one too.
        while begun.peek().is_some_and(|&i| ranges[i].pages[1] < offset) {
            begun.pop();
        }
        if let Some(&i) = begun.peek() {
            out.push((p, &ranges[i]));
        }
    }
    out
}

/// Nodes in interleave order: each node `weight` pages in a row (1 without weights), as the
/// kernel's weighted interleave does.
fn interleave_cycle(nodes: &[u32], weights: Option<&[u32]>) -> Vec<u32> {
    let mut cycle = Vec::new();
    for (i, &n) in nodes.iter().enumerate() {
        let w = weights
            .and_then(|w| w.get(i))
            .copied()
            .unwrap_or(1)
            .min(1 << 16);
        cycle.extend(std::iter::repeat_n(n, w as usize));
    }
    cycle
}

/// The window at whose end a plan's time falls (times are window ends: window w ends at
/// (w + 1) × its length); None for a run without windows.
fn window_of(a: &Accesses, time_s: f64) -> Option<usize> {
    let last = a.windows.cells.len().checked_sub(1)?;
    let window_s = a.windows.length_ns.max(1) as f64 / 1e9;
    Some(
        ((time_s / window_s).round() as usize)
            .saturating_sub(1)
            .min(last),
    )
}

/// `migrate_at` entries as moves at the end of the window their time falls in.
fn add_moves(
    entries: &[MigrateAt],
    a: &Accesses,
    m: &Machine,
    pages: &[usize],
    start: u64,
    moves: &mut Vec<Vec<Move>>,
) {
    if entries.is_empty() || a.windows.cells.is_empty() {
        return;
    }
    let by_offset: HashMap<u64, usize> = pages
        .iter()
        .map(|&p| (a.pages[p].number - start, p))
        .collect();
    for e in entries {
        let Some(to) = m.nodes.iter().position(|&n| n == e.node) else {
            continue;
        };
        let Some(w) = window_of(a, e.time_s) else {
            continue;
        };
        if moves.len() <= w {
            moves.resize(w + 1, Vec::new());
        }
        for offset in &e.pages {
            if let Some(&p) = by_offset.get(offset) {
                let kind = if e.replicate {
                    MoveKind::Replicate
                } else {
                    MoveKind::Migrate
                };
                moves[w].push(Move {
                    page: p as u32,
                    to,
                    kind,
                });
            }
        }
    }
}
