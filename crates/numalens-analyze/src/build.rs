//! The analysis sections of the model, from the aggregates: per-object views (matrix, heatmap,
//! timeline), phases, mixed page ownership, the communication matrix and the placement totals.
//! Threads are turned from dense ids into positions in the model's thread list here.

use std::cmp::Reverse;
use std::collections::HashMap;

use numalens_format::Object;

use crate::access::SaturatingSum;
use crate::access::{PageAcc, PageKey};
use crate::classify::{CLASSES, THRESHOLDS};
use crate::engine::add;
use crate::engine::{Aggregates, ObjAgg, ObjectRanges, total};
use crate::findings::Fired;
use crate::model::*;
use crate::phases::Times;

/// Columns of a heatmap, at most.
pub(crate) const HEAT_COLUMNS: u64 = 128;
/// Rows of a heatmap or timeline, and cells per side of the communication matrix, at most.
pub(crate) const MAX_ROWS: usize = 64;

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

/// Shared inputs of the per-object views.
pub(crate) struct ViewCtx<'a> {
    pub pages: &'a [(PageKey, PageAcc)],
    pub agg: &'a Aggregates,
    pub pos: &'a [usize],
    pub page_size: u64,
    pub all: u64,
    pub times: &'a Times,
}

pub(crate) fn object_access(
    c: &ViewCtx,
    o: &Object,
    i: usize,
    advice: Vec<String>,
) -> Option<ObjectAccess> {
    let agg: &ObjAgg = &c.agg.objects[i];
    let accesses = total(&agg.rw);
    if accesses == 0 {
        return None;
    }
    let mut users: Vec<ThreadUse> = agg
        .users
        .iter()
        .map(|(t, rw)| ThreadUse {
            thread: c.pos[*t as usize],
            reads: rw[0],
            writes: rw[1],
            accesses: total(rw),
        })
        .collect();
    users.sort_by_key(|u| (Reverse(u.accesses), u.thread));
    let mut matrix: Vec<AccessCell> = agg
        .cells
        .iter()
        .map(|((t, node), rw)| AccessCell {
            thread: c.pos[*t as usize],
            node: *node,
            reads: rw[0],
            writes: rw[1],
            accesses: total(rw),
        })
        .collect();
    matrix.sort_by_key(|m| (m.thread, m.node));
    let classes: Vec<ClassCount> = CLASSES
        .iter()
        .zip(agg.classes)
        .filter(|(_, (pages, _))| *pages > 0)
        .map(|(class, (pages, accesses))| ClassCount {
            class: class.label().into(),
            pages,
            accesses,
        })
        .collect();
    let sharing = CLASSES
        .iter()
        .zip(agg.classes)
        .max_by_key(|(_, (_, acc))| *acc)
        .map_or("private", |(c, _)| c.label())
        .to_string();
    let toucher = agg.touchers.iter().max_by_key(|(t, n)| (**n, Reverse(**t)));
    let known = agg.local.saturating_add(agg.remote);
    Some(ObjectAccess {
        accesses,
        reads: agg.rw[0],
        writes: agg.rw[1],
        unknown_direction: agg.rw[2],
        share: ratio(accesses, c.all),
        pages: agg.pages,
        sharing,
        classes,
        first_toucher: toucher.map(|(t, n)| ThreadShare {
            thread: c.pos[*t as usize],
            count: *n,
            share: ratio(*n, agg.touched_pages),
        }),
        main_user: users.first().map(|u| ThreadShare {
            thread: u.thread,
            count: u.accesses,
            share: ratio(u.accesses, accesses),
        }),
        users,
        matrix,
        mismatched_pages: agg.mismatched.pages,
        mismatched_accesses: agg.mismatched.accesses,
        local_ratio: (known > 0).then(|| ratio(agg.local, known)),
        remote: agg.remote,
        advice,
        heatmap: heatmap(c, o, agg),
        timeline: timeline(c, i as u32),
    })
}

/// TABARNAC's distribution and first-touch views of one object, binned to at most
/// [`HEAT_COLUMNS`] columns and [`MAX_ROWS`] rows (its most active users).
fn heatmap(c: &ViewCtx, o: &Object, agg: &ObjAgg) -> Heatmap {
    let first = o.start / c.page_size;
    let span = (o.start.saturating_add(o.size.max(1) - 1) / c.page_size - first).saturating_add(1);
    let per_column = span.div_ceil(HEAT_COLUMNS).max(1);
    let columns = span.div_ceil(per_column) as usize;
    let mut rows: Vec<(u32, u64)> = agg.users.iter().map(|(t, rw)| (*t, total(rw))).collect();
    rows.sort_by_key(|(t, n)| (Reverse(*n), c.pos[*t as usize]));
    rows.truncate(MAX_ROWS);
    rows.sort_by_key(|(t, _)| c.pos[*t as usize]);
    let row_of: HashMap<u32, usize> = rows.iter().enumerate().map(|(r, (t, _))| (*t, r)).collect();
    let mut values = vec![vec![0u64; columns]; rows.len()];
    let mut column_total = vec![0u64; columns];
    let mut touches: Vec<HashMap<u32, u64>> = vec![HashMap::new(); columns];
    for &p in &agg.page_list {
        let (key, page) = &c.pages[p as usize];
        let col = ((key.1.saturating_sub(first)) / per_column).min(columns as u64 - 1) as usize;
        for u in &page.users {
            add(&mut column_total[col], u.accesses());
            if let Some(&r) = row_of.get(&u.thread) {
                add(&mut values[r][col], u.accesses());
            }
        }
        if let Some(t) = c.agg.views[p as usize].0.first_toucher {
            *touches[col].entry(t).or_default() += 1;
        }
    }
    let threads = agg.users.len().max(1) as f64;
    let column_pages = |col: usize| {
        let lo = col as u64 * per_column;
        (span.min(lo + per_column) - lo) as f64
    };
    Heatmap {
        pages: span,
        pages_per_column: per_column,
        threads: rows.iter().map(|(t, _)| c.pos[*t as usize]).collect(),
        thread_average: rows.iter().map(|(_, n)| *n as f64 / span as f64).collect(),
        values,
        page_average: (0..columns)
            .map(|col| column_total[col] as f64 / column_pages(col) / threads)
            .collect(),
        first_touch: touches
            .iter()
            .map(|m| {
                let all: u64 = m.values().saturating_sum();
                m.iter()
                    .max_by_key(|(t, n)| (**n, Reverse(**t)))
                    .map(|(t, n)| ThreadShare {
                        thread: c.pos[*t as usize],
                        count: *n,
                        share: ratio(*n, all),
                    })
            })
            .collect(),
    }
}

fn timeline(c: &ViewCtx, object: u32) -> Timeline {
    let Some(lines) = c.times.by_object.get(&object) else {
        return Timeline::default();
    };
    let mut rows: Vec<(usize, &Vec<u64>)> =
        lines.iter().map(|(t, v)| (c.pos[*t as usize], v)).collect();
    rows.sort_by_key(|(p, v)| (Reverse(v.iter().saturating_sum()), *p));
    rows.truncate(MAX_ROWS);
    rows.sort_by_key(|(p, _)| *p);
    Timeline {
        threads: rows.iter().map(|(p, _)| *p).collect(),
        values: rows.into_iter().map(|(_, v)| v.clone()).collect(),
    }
}

/// Mixed page ownership: pages used by several threads that hold several small objects of one
/// allocation site, allocated by a thread that is not (only) their user. By site: the
/// representative object position and the rule's evidence.
pub(crate) fn mixed_ownership(
    objects: &[Object],
    pages: &[(PageKey, PageAcc)],
    agg: &Aggregates,
    page_size: u64,
    tids: &[u32],
) -> Vec<(usize, Fired)> {
    let ranges = ObjectRanges::new(objects);
    // Site group → (representative, mixed pages, their accesses and remote, objects, threads).
    let mut groups: HashMap<(u32, String), Group> = HashMap::new();
    // Site group → accesses, the squares of the sample weights behind them and the samples, on
    // pages of its small objects.
    let mut group_accesses: HashMap<(u32, String), (u64, u64, u64)> = HashMap::new();
    for (i, (key, page)) in pages.iter().enumerate() {
        let (v, _) = &agg.views[i];
        let lo = key.1.saturating_mul(page_size);
        let small: Vec<u32> = ranges
            .overlapping(key.0, lo, lo.saturating_add(page_size))
            .into_iter()
            .filter(|&o| objects[o as usize].size < page_size)
            .collect();
        let Some(&first) = small.first() else {
            continue;
        };
        let site = group_key(&objects[first as usize]);
        let on_site = group_accesses.entry(site.clone()).or_default();
        add(&mut on_site.0, v.accesses);
        add(
            &mut on_site.1,
            page.users.iter().map(|u| u.weight_sq).saturating_sum(),
        );
        add(
            &mut on_site.2,
            page.users.iter().map(|u| u.samples).saturating_sum(),
        );
        let same: Vec<u32> = small
            .iter()
            .copied()
            .filter(|&o| group_key(&objects[o as usize]) == site)
            .collect();
        let allocator = objects[first as usize].alloc_tid;
        let others = v
            .users
            .iter()
            .filter(|&&t| Some(tids[t as usize]) != allocator)
            .count();
        if same.len() < 2 || v.users.len() < 2 || others < 1 {
            continue;
        }
        let g = groups
            .entry(site)
            .or_insert((first as usize, 0, 0, 0, Vec::new(), Vec::new()));
        g.1 += 1;
        add(&mut g.2, v.accesses);
        add(&mut g.3, v.remote);
        g.4.extend(same);
        g.5.extend(v.users.iter().copied());
    }
    let mut out = Vec::new();
    for (site, (rep, mixed, accesses, remote, mut objs, mut users)) in groups {
        let (all, weight_sq, raw) = group_accesses.get(&site).copied().unwrap_or((0, 0, 0));
        let samples = crate::stats::effective_samples(all, weight_sq);
        // From samples, the share must be supported by them (docs/FINDINGS.md).
        let share = ratio(accesses, all);
        let holds = match samples {
            0 => share >= THRESHOLDS.majority,
            n => crate::stats::supports(share, n, THRESHOLDS.majority),
        };
        if !holds {
            continue;
        }
        objs.sort_unstable();
        objs.dedup();
        users.sort_unstable();
        users.dedup();
        out.push((
            rep,
            Fired {
                id: "mixed-page-ownership",
                evidence: vec![
                    ("objects", objs.len() as f64),
                    ("mixed_pages", mixed as f64),
                    ("threads", users.len() as f64),
                    ("mixed_access_share", share),
                ]
                .into_iter()
                .chain(
                    (samples > 0)
                        .then(|| crate::stats::evidence(share, samples))
                        .into_iter()
                        .flatten(),
                )
                .collect(),
                accesses,
                remote,
                data_count: Some(if samples > 0 { raw } else { all }),
                tests: vec![crate::basis::share_at_least(
                    "mixed_access_share",
                    share,
                    THRESHOLDS.majority,
                    (samples > 0).then_some(samples),
                )],
            },
        ));
    }
    out
}

/// A site group: representative object, mixed pages, their accesses and remote accesses, the
/// objects and the threads on them.
type Group = (usize, u64, u64, u64, Vec<u32>, Vec<u32>);

/// Objects of one allocation site: by site key, else by name.
fn group_key(o: &Object) -> (u32, String) {
    match o.site_key {
        Some(k) => (o.pid, format!("{k:#x}")),
        None => (o.pid, o.name.clone()),
    }
}

/// The communication matrix over model thread positions, binned to at most [`MAX_ROWS`] cells a
/// side.
pub(crate) fn communication(
    pairs: &HashMap<(u32, u32), u64>,
    pos: &[usize],
    threads: usize,
    block_size: u64,
) -> CommunicationMatrix {
    let per_cell = threads.div_ceil(MAX_ROWS).max(1);
    let cells = threads.div_ceil(per_cell);
    let mut values = vec![vec![0u64; cells]; cells];
    for (&(a, b), &n) in pairs {
        let (Some(&pa), Some(&pb)) = (pos.get(a as usize), pos.get(b as usize)) else {
            continue;
        };
        let (i, j) = (pa / per_cell, pb / per_cell);
        if i != j && i < cells && j < cells {
            add(&mut values[i][j], n);
            add(&mut values[j][i], n);
        }
    }
    CommunicationMatrix {
        block_size,
        threads_per_cell: per_cell,
        threads: (0..threads).collect(),
        values,
    }
}

/// Placement totals: LAR, per-node load and imbalance, node-to-node traffic.
pub(crate) fn placement_report(
    p: &crate::placement::Placement,
    agg: &Aggregates,
    pos: &[usize],
    threads: usize,
) -> PlacementReport {
    let mut thread_nodes = vec![None; threads];
    for (dense, node) in p.thread_node.iter().enumerate() {
        // A thread with counts but no row in the model (none in the threads table, no access)
        // has no position to report.
        if let Some(slot) = pos.get(dense).and_then(|&at| thread_nodes.get_mut(at)) {
            *slot = *node;
        }
    }
    let nodes = p.machine.node_ids();
    let index: HashMap<u32, usize> = nodes.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let mut traffic = vec![vec![0u64; nodes.len()]; nodes.len()];
    let (mut local, mut remote) = (0, 0);
    for (&(from, to), &n) in &agg.traffic {
        if from == to {
            add(&mut local, n);
        } else {
            add(&mut remote, n);
        }
        if let (Some(&i), Some(&j)) = (index.get(&from), index.get(&to)) {
            add(&mut traffic[i][j], n);
        }
    }
    let load: Vec<NodeLoad> = nodes
        .iter()
        .map(|&node| {
            let (accesses, pages) = agg.node_load.get(&node).copied().unwrap_or_default();
            NodeLoad {
                node,
                accesses,
                pages,
                threads: thread_nodes.iter().filter(|n| **n == Some(node)).count() as u64,
            }
        })
        .collect();
    let served: Vec<f64> = load.iter().map(|l| l.accesses as f64).collect();
    PlacementReport {
        mode: p.mode.into(),
        topology: p.topology.clone(),
        reason: p.reason.clone(),
        nodes,
        thread_rule: p.thread_rule.into(),
        page_rule: p.page_rule.into(),
        thread_nodes,
        accesses: local.saturating_add(remote).saturating_add(agg.unknown),
        local,
        remote,
        unknown: agg.unknown,
        local_ratio: (local.saturating_add(remote) > 0)
            .then(|| ratio(local, local.saturating_add(remote))),
        imbalance: (local.saturating_add(remote) > 0).then(|| crate::engine::cv(&served)),
        load,
        traffic,
        machine_nodes: machine_nodes(&p.machine),
        distances: p.machine.distances.as_ref().map(|d| d.values.clone()),
    }
}

/// CPUs and memory of each node of the placement's machine.
fn machine_nodes(machine: &numalens_topology::Topology) -> Vec<MachineNode> {
    machine
        .nodes
        .iter()
        .map(|n| MachineNode {
            node: n.id,
            cpus: numalens_topology::cpulist::format_cpulist(&n.cpus),
            memory_bytes: n.memory_bytes,
        })
        .collect()
}
