//! Groups the ranked objects by allocation site ([`SiteGroup`]): one row for the dozens of
//! buffers a server allocates from one call site, with the sums the object rows show and which
//! threads first touched how many of them.

use std::cmp::Reverse;
use std::collections::HashMap;

use numalens_format::{Label, Object, ObjectKind};

use crate::access::SaturatingSum;
use crate::assemble::{Ranked, kind_counts};
use crate::classify::CLASSES;
use crate::engine::{Aggregates, ObjAgg, Rw, total};
use crate::model::*;
use crate::samples::{Kinds, SampleTally, ThreadKey, add_kinds};

pub(crate) struct Inputs<'a> {
    pub objects: &'a [Object],
    /// Every ranked object, best first.
    pub ranked: &'a [Ranked],
    pub tally: &'a SampleTally,
    pub agg: &'a Aggregates,
    /// Dense thread id → (pid, tid).
    pub keys: &'a [ThreadKey],
    pub sites: &'a HashMap<u64, SiteReport>,
    pub top: usize,
}

/// The first `top` groups of `model`'s profile, best first; `model` gives thread positions and
/// the findings' advice.
pub(crate) fn groups(model: &ReportModel, i: &Inputs) -> Vec<SiteGroup> {
    let pos = crate::fill::thread_positions(model, i.keys);
    // Members keep the ranking's order, so a group's first members are its most accessed.
    let mut order: Vec<Vec<&Ranked>> = Vec::new();
    let mut slot: HashMap<(u32, &str, u64), usize> = HashMap::new();
    for r in i.ranked {
        let o = &i.objects[r.0];
        let shared = o.site_key.filter(|_| o.kind != ObjectKind::Static);
        let Some(key) = shared.map(|k| (o.pid, o.kind.label(), k)) else {
            order.push(vec![r]);
            continue;
        };
        match slot.get(&key) {
            Some(&g) => order[g].push(r),
            None => {
                slot.insert(key, order.len());
                order.push(vec![r]);
            }
        }
    }
    let all = total(&i.agg.rw);
    let mut out: Vec<(SiteGroup, u64, usize)> = order
        .iter()
        .enumerate()
        .map(|(rank, members)| {
            let g = group(model, i, &pos, all, members);
            let resident = g.pages.by_node.iter().map(|n| n.count).saturating_sum();
            (g, resident, rank)
        })
        .collect();
    // As objects are ranked, then by size: a group of many small buffers after one large one.
    out.sort_by_key(|(g, resident, rank)| {
        (
            Reverse(g.accesses),
            Reverse(g.samples.first_touch),
            Reverse(*resident),
            Reverse(g.samples.total),
            Reverse(g.weight),
            Reverse(g.size),
            *rank,
        )
    });
    out.truncate(i.top);
    out.into_iter().map(|(g, _, _)| g).collect()
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

fn group(
    model: &ReportModel,
    i: &Inputs,
    pos: &[usize],
    all: u64,
    members: &[&Ranked],
) -> SiteGroup {
    let first = &i.objects[members[0].0];
    let mut kinds: Kinds = [0; 5];
    let mut weight = 0u64;
    let mut size = 0u64;
    let mut rw: Rw = [0; 3];
    let (mut local, mut remote, mut pages_touched) = (0u64, 0u64, 0u64);
    let mut classes = [0u64; 5];
    let mut touchers: HashMap<u32, u64> = HashMap::new();
    let mut users: HashMap<u32, u64> = HashMap::new();
    let mut by_toucher: HashMap<usize, u64> = HashMap::new();
    let mut by_node: HashMap<u32, u64> = HashMap::new();
    let mut pages = PagePlacement::default();
    for (p, placed) in members {
        let o = &i.objects[*p];
        let a: &ObjAgg = &i.agg.objects[*p];
        let t = &i.tally.objects[*p];
        add_kinds(&mut kinds, &t.kinds);
        weight = weight.saturating_add(t.weight);
        size = size.saturating_add(o.size);
        for (sum, n) in rw.iter_mut().zip(a.rw) {
            *sum = sum.saturating_add(n);
        }
        local = local.saturating_add(a.local);
        remote = remote.saturating_add(a.remote);
        pages_touched = pages_touched.saturating_add(a.touched_pages);
        for (sum, (_, acc)) in classes.iter_mut().zip(a.classes) {
            *sum = sum.saturating_add(acc);
        }
        for (t, n) in &a.touchers {
            *touchers.entry(*t).or_default() += n;
        }
        for (t, n) in &a.users {
            *users.entry(*t).or_default() += total(n);
        }
        if let Some((t, _)) = own_first_toucher(a) {
            *by_toucher.entry(pos[t as usize]).or_default() += 1;
        }
        for n in &placed.by_node {
            *by_node.entry(n.node).or_default() += n.count;
        }
        pages.untouched += placed.untouched;
        pages.unknown += placed.unknown;
        pages.not_queried += placed.not_queried;
    }
    pages.by_node = by_node
        .into_iter()
        .map(|(node, count)| NodeCount { node, count })
        .collect();
    pages.by_node.sort_by_key(|n| n.node);
    let accesses = total(&rw);
    let known = local.saturating_add(remote);
    let toucher = touchers.iter().max_by_key(|(t, n)| (**n, Reverse(**t)));
    let user = users
        .iter()
        .max_by_key(|(t, n)| (**n, Reverse(pos[**t as usize])));
    let mut first_touchers: Vec<InstanceCount> = by_toucher
        .into_iter()
        .map(|(thread, instances)| InstanceCount { thread, instances })
        .collect();
    first_touchers.sort_by_key(|c| (Reverse(c.instances), c.thread));
    let ids: Vec<(u64, u32)> = members
        .iter()
        .map(|(p, _)| (i.objects[*p].object_id, i.objects[*p].pid))
        .collect();
    let mut advice: Vec<String> = Vec::new();
    for f in &model.findings {
        if ids.contains(&(f.object.id, f.object.pid)) && !advice.contains(&f.advice) {
            advice.push(f.advice.clone());
        }
    }
    SiteGroup {
        pid: first.pid,
        kind: first.kind.label().to_string(),
        name: first.name.clone(),
        site: first.site_key.and_then(|k| i.sites.get(&k).cloned()),
        instances: members.len() as u64,
        size,
        members: ids.iter().map(|(id, _)| *id).collect(),
        samples: kind_counts(&kinds),
        weight,
        pages,
        accesses,
        reads: rw[0],
        writes: rw[1],
        unknown_direction: rw[2],
        share: ratio(accesses, all),
        sharing: (accesses > 0).then(|| {
            CLASSES
                .iter()
                .zip(classes)
                .max_by_key(|(_, acc)| *acc)
                .map_or("private", |(c, _)| c.label())
                .to_string()
        }),
        first_toucher: toucher.map(|(t, n)| ThreadShare {
            thread: pos[*t as usize],
            count: *n,
            share: ratio(*n, pages_touched),
        }),
        main_user: user.map(|(t, n)| ThreadShare {
            thread: pos[*t as usize],
            count: *n,
            share: ratio(*n, accesses),
        }),
        first_touchers,
        local_ratio: (known > 0).then(|| ratio(local, known)),
        remote,
        advice,
        largest: members
            .iter()
            .take(GROUP_INSTANCES)
            .map(|(p, _)| instance(&i.objects[*p], &i.agg.objects[*p], pos, all))
            .collect(),
    }
}

/// The thread that first touched most of an object's pages, as the object's own row names it.
fn own_first_toucher(a: &ObjAgg) -> Option<(u32, u64)> {
    a.touchers
        .iter()
        .max_by_key(|(t, n)| (**n, Reverse(**t)))
        .map(|(t, n)| (*t, *n))
}

fn instance(o: &Object, a: &ObjAgg, pos: &[usize], all: u64) -> GroupInstance {
    let accesses = total(&a.rw);
    let known = a.local.saturating_add(a.remote);
    GroupInstance {
        id: o.object_id,
        start: o.start,
        size: o.size,
        accesses,
        reads: a.rw[0],
        writes: a.rw[1],
        share: ratio(accesses, all),
        first_toucher: own_first_toucher(a).map(|(t, n)| ThreadShare {
            thread: pos[t as usize],
            count: n,
            share: ratio(n, a.touched_pages),
        }),
        local_ratio: (known > 0).then(|| ratio(a.local, known)),
    }
}
