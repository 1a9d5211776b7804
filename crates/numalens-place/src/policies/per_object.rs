//! numalens' own offline policy: each object, hottest first, gets the best of first touch,
//! Eq. 2 page by page (its pages where their users are), the same spread round-robin over
//! their node and the 1 or 3 nearest other nodes, idle ones first (a stream one core can
//! saturate a controller with gets two or four), interleave over
//! every node, every single node, or a copy per node when nothing writes it, as the simulator judges them one
//! after the other; then a weighted spread of each group of its pages with one Eq. 2 home
//! (`spread`) and moves of its hottest blocks (`hot_blocks`); two passes over the objects; under the default thread mapping and kMAF's,
//! whichever gives less modelled time. What it decides is what a plan can say exactly: one rule
//! per object, page ranges at most.

use crate::accesses::Accesses;
use crate::layout::{Layout, Schedule};
use crate::machine::Machine;
use crate::sim::{Model, Split, simulate};

use super::Input;
use super::object_options::{Choice, Options, Saved};

/// Objects searched one by one, the hottest first.
const SEARCHED_OBJECTS: usize = 32;

/// Passes over the objects at most.
const PASSES: usize = 2;

/// Cells one step of an object's search (its spread, its block moves) replays at most, about a
/// second: an object of millions of pages gets fewer tries, so that planning stays within
/// seconds whatever the profile's size.
const CELL_BUDGET: u64 = 100_000_000;

/// `placements`, or fewer when simulating that many of `split`'s would replay more than
/// [`CELL_BUDGET`] cells.
pub(super) fn within_cell_budget(split: &Split, placements: u64) -> u64 {
    placements.min(CELL_BUDGET / split.cells().max(1) as u64)
}

/// Windows a search simulates at most: a long run's windows are merged for the search (see
/// [`Accesses::coarsened`]), and the result is judged on all of them.
pub(super) const SEARCH_WINDOWS: usize = 64;

/// `input` with its windows merged for a search, when it has more than [`SEARCH_WINDOWS`].
pub(super) fn coarse(input: &Input) -> Option<Accesses> {
    input.accesses.coarsened(SEARCH_WINDOWS)
}

pub(super) fn schedule(input: &Input) -> Schedule {
    let mut starts = vec![super::first_touch::layout(input)];
    let kmaf = super::kmaf::map_threads(
        input.accesses,
        input.machine,
        input.threads,
        &input.params.kmaf,
    );
    if kmaf != input.threads {
        let mapped = Input {
            threads: &kmaf,
            ..*input
        };
        starts.push(super::first_touch::layout(&mapped));
    }
    let merged = coarse(input);
    let searched = merged.as_ref().map_or(*input, |a| Input {
        accesses: a,
        ..*input
    });
    let (found, _, evaluated) = search(&searched, starts);
    let mut s = Schedule::fitted(
        found.initial,
        input.accesses,
        input.machine,
        crate::layout::SpillOrder::Coldest,
    );
    s.notes.push(format!(
        "per-object search: {evaluated} placements simulated"
    ));
    if s.initial.thread_node != input.threads {
        s.notes
            .push("threads mapped by communication (kMAF's mapping)".to_string());
    }
    s
}

/// Object-by-object search from each of `starts` (a layout with its thread mapping). Returns
/// the best schedule, its time and the placements simulated.
pub(super) fn search(input: &Input, starts: Vec<Layout>) -> (Schedule, f64, u64) {
    let a = input.accesses;
    let model = &input.params.model;
    let mut evaluated = 0;
    let mut best: Option<(Schedule, f64)> = None;
    let objects = hottest_objects(a);
    for mut layout in starts {
        // A second pass revisits each object once the others have settled: the first decided
        // the hottest with the rest still where first touch put them. Alone, an object has
        // nothing to settle against.
        let passes = if objects.len() > 1 { PASSES } else { 1 };
        for _ in 0..passes {
            let mut changed = false;
            for &object in &objects {
                let (n, c) = improve_object(input, &mut layout, object);
                evaluated += n;
                changed |= c;
            }
            if !changed {
                break;
            }
        }
        let time = time_of(a, input.machine, &layout, model);
        evaluated += 1;
        if best.as_ref().is_none_or(|b| time < b.1) {
            best = Some((Schedule::fixed(layout), time));
        }
    }
    let (s, t) = best.expect("one mapping at least");
    (s, t, evaluated)
}

/// The best of the options for one object's pages, then a weighted spread from there. Returns
/// the placements simulated and whether the object's placement changed.
fn improve_object(input: &Input, layout: &mut Layout, object: Option<u32>) -> (u64, bool) {
    let a = input.accesses;
    let pages: Vec<u32> = (0..a.pages.len() as u32)
        .filter(|&p| a.pages[p as usize].object == object)
        .collect();
    // Only this object's pages change between the options: the rest is simulated once, and
    // each option is written over the object's pages in place (a copy of a whole layout per
    // option costs more than simulating it on a profile of millions of pages).
    let split = Split::new(a, input.machine, layout, &input.params.model, &pages);
    let mut time = split.time_s(layout);
    let homes: Vec<usize> = pages
        .iter()
        .map(|&p| eq2_node(input, layout, p as usize))
        .collect();
    let before = Saved::of(layout, &pages);
    let options = Options::new(input, layout, &pages, &homes);
    let mut best: Option<Choice> = None;
    let mut evaluated = 0;
    for choice in options.choices() {
        before.restore(layout, &pages);
        options.apply(choice, layout);
        let t = split.time_s(layout);
        evaluated += 1;
        if t < time {
            time = t;
            best = Some(choice);
        }
    }
    before.restore(layout, &pages);
    if let Some(choice) = best {
        options.apply(choice, layout);
    }
    let changed = best.is_some();
    // A replicated object has no home to spread.
    if pages.iter().any(|&p| layout.is_replicated(p as usize)) {
        return (evaluated, changed);
    }
    let (n, spread) = super::spread::refine(input, &split, layout, &pages, &homes, &mut time);
    let (m, blocks) = super::hot_blocks::refine(input, &split, layout, &pages, &mut time);
    (evaluated + n + m, changed || spread || blocks)
}

pub(super) fn time_of(a: &Accesses, machine: &Machine, layout: &Layout, model: &Model) -> f64 {
    simulate(a, machine, &Schedule::fixed(layout.clone()), model).modelled_time_s
}

/// Marathe's Eq. 2 node of page `p` under `layout`'s thread mapping (its own node when nobody
/// on a memory node accessed it).
fn eq2_node(input: &Input, layout: &Layout, p: usize) -> usize {
    let m = input.machine;
    let users = &input.accesses.pages[p].users;
    let mut per_node = vec![0u64; m.node_count()];
    for u in users {
        let n = &mut per_node[layout.thread_node[u.thread as usize]];
        *n = n.saturating_add(u.total());
    }
    super::marathe_hop_node(m, &per_node).unwrap_or(layout.page_node[p])
}

/// Object indices by accesses, hottest first; pages without an object count as one more.
fn hottest_objects(a: &Accesses) -> Vec<Option<u32>> {
    let mut by_object: std::collections::HashMap<Option<u32>, u64> = Default::default();
    for p in &a.pages {
        let n = by_object.entry(p.object).or_default();
        *n = n.saturating_add(p.total());
    }
    let mut list: Vec<(Option<u32>, u64)> = by_object.into_iter().filter(|o| o.1 > 0).collect();
    list.sort_by_key(|&(o, n)| (std::cmp::Reverse(n), o));
    list.into_iter()
        .take(SEARCHED_OBJECTS)
        .map(|o| o.0)
        .collect()
}
