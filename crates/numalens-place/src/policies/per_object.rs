//! numalens' own offline policy: each object, hottest first, gets the best of first touch,
//! Eq. 2 page by page (its pages where their users are), the same spread round-robin over
//! their node and the 1 or 3 nearest other nodes, idle ones first (a stream one core can
//! saturate a controller with gets two or four), interleave over
//! every node, every single node, or a copy per node when nothing writes it, as the simulator judges them one
//! after the other; then a weighted spread of each group of its pages with one Eq. 2 home
//! (`spread`); two passes over the objects; under the default thread mapping and kMAF's,
//! whichever gives less modelled time. What it decides is what a plan can say exactly: one rule
//! per object, page ranges at most.

use crate::accesses::Accesses;
use crate::layout::{Layout, Schedule};
use crate::machine::Machine;
use crate::sim::{Model, Split, simulate};

use super::Input;

/// Objects searched one by one, the hottest first.
const SEARCHED_OBJECTS: usize = 32;

/// Passes over the objects at most.
const PASSES: usize = 2;

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
    let (found, _, evaluated) = search(input, starts);
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
        // the hottest with the rest still where first touch put them.
        for _ in 0..PASSES {
            let before = layout.clone();
            for &object in &objects {
                evaluated += improve_object(input, &mut layout, object);
            }
            if layout == before {
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

/// The best of the options for one object's pages, then a weighted spread from there.
fn improve_object(input: &Input, layout: &mut Layout, object: Option<u32>) -> u64 {
    let a = input.accesses;
    let pages: Vec<u32> = (0..a.pages.len() as u32)
        .filter(|&p| a.pages[p as usize].object == object)
        .collect();
    // Only this object's pages change between the options: the rest is simulated once.
    let split = Split::new(a, input.machine, layout, &input.params.model, &pages);
    let mut time = split.time_s(layout);
    let homes: Vec<usize> = pages
        .iter()
        .map(|&p| eq2_node(input, layout, p as usize))
        .collect();
    let mut evaluated = 0;
    for option in options(input, layout, &pages, &homes) {
        let t = split.time_s(&option);
        evaluated += 1;
        if t < time {
            time = t;
            *layout = option;
        }
    }
    evaluated + super::spread::refine(input, &split, layout, &pages, &homes, &mut time)
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

/// The layouts to try for one object's pages.
fn options(input: &Input, layout: &Layout, pages: &[u32], homes: &[usize]) -> Vec<Layout> {
    let a = input.accesses;
    let m = input.machine;
    let pages: Vec<usize> = pages.iter().map(|&p| p as usize).collect();
    let memory = m.memory_nodes();
    let mut out = Vec::new();
    let with = |f: &dyn Fn(usize) -> usize| {
        let mut l = layout.clone();
        for &p in &pages {
            l.page_node[p] = f(p);
        }
        l
    };
    for &node in &memory {
        out.push(with(&|_| node));
    }
    out.push(with(&|p| {
        memory[(a.pages[p].number % memory.len() as u64) as usize]
    }));
    // Each node's neighbours by latency, once for every option.
    let home_of = |p: usize| homes[pages.binary_search(&p).unwrap_or(0)];
    out.push(with(&home_of));
    // The pages round-robin over their home and the k − 1 nearest other nodes, idle ones (no
    // thread of the run) first: a stream one core can saturate a controller with gets k.
    let mut threads_on = vec![0usize; m.node_count()];
    for &n in &layout.thread_node {
        threads_on[n] += 1;
    }
    let near: Vec<Vec<usize>> = (0..m.node_count())
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
    for k in [2usize, 4] {
        if memory.len() < k {
            break;
        }
        out.push(with(&|p| {
            let home = home_of(p);
            let slot = (a.pages[p].number % k as u64) as usize;
            if slot == 0 {
                home
            } else {
                near[home].get(slot - 1).copied().unwrap_or(home)
            }
        }));
    }
    let read_only = pages.iter().all(|&p| a.pages[p].writes() == 0);
    if read_only && memory.len() > 1 {
        let mut l = layout.clone();
        l.replicated.resize(a.pages.len(), false);
        for &p in &pages {
            l.replicated[p] = true;
        }
        out.push(l);
    }
    out
}
