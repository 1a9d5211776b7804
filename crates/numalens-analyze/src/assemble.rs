//! Turns the counters of the sample pass and the small tables into the report model.

use std::cmp::Reverse;
use std::collections::{BTreeMap, HashMap};

use numalens_format::{Label, Meta, Object, Profile, Thread};

use crate::Options;
use crate::access::SaturatingSum;
use crate::model::*;
use crate::pages::PageMap;
use crate::samples::{Kinds, SampleTally, ThreadKey, ThreadTally, add_kinds};

/// The small tables, read whole.
pub(crate) struct Tables<'a> {
    pub objects: &'a [Object],
    pub threads: &'a [Thread],
    pub sites: &'a HashMap<u64, SiteReport>,
    /// `function (file:line)` of code addresses by (pid, address), from `code_locations`.
    pub code: &'a HashMap<(u32, u64), String>,
    pub pages: &'a PageMap,
    /// Base page size of the recording machine.
    pub page_size: u64,
    /// By object position, when `--object` chose some.
    pub object_selected: Option<&'a [bool]>,
    /// By object position: accesses (exact counts or weighted samples), the first ranking key.
    pub object_accesses: &'a [u64],
    /// Threads with accesses, listed even when no sample of theirs was selected.
    pub active_threads: &'a [ThreadKey],
}

pub(crate) fn model(
    profile: &Profile,
    options: &Options,
    tables: &Tables,
    tally: &SampleTally,
) -> (ReportModel, Vec<Ranked>) {
    let logical = logical_ids(tables.threads);
    let (objects, ranked) = top_objects(options.top, tables, tally, &logical);
    let count = ranked.len() as u64;
    let mut listed = listed_threads(options, tables);
    listed.extend(tables.active_threads);
    let threads = thread_reports(tables, tally, &listed);
    let mut samples: Kinds = [0; 5];
    let mut weight = 0;
    for t in tally.threads.values() {
        add_kinds(&mut samples, &t.kinds);
        weight += t.weight;
    }
    let model = ReportModel {
        model_version: MODEL_VERSION,
        profile: profile_summary(profile),
        selection: Selection {
            top: options.top,
            object: options.object.clone(),
            thread: options.thread,
        },
        totals: Totals {
            samples: kind_counts(&samples),
            weight,
            unattributed: kind_counts(&tally.unattributed),
            objects: tables.objects.len() as u64,
            objects_ranked: count,
            threads: tables.threads.len() as u64,
        },
        objects,
        groups: Vec::new(),
        threads,
        nodes: node_totals(tables.pages, tally),
        analysis: AnalysisInfo::default(),
        findings: Vec::new(),
        finding_groups: Vec::new(),
        placement: PlacementReport::default(),
        communication: CommunicationMatrix::default(),
        what_if: None,
        data_sources: None,
    };
    (model, ranked)
}

/// A ranked object: its position in the objects table and its pages at the end of the run.
pub(crate) type Ranked = (usize, PagePlacement);

pub(crate) fn kind_counts(k: &Kinds) -> KindCounts {
    use numalens_format::SampleKind as K;
    let at = |kind: K| k[kind.code() as usize];
    KindCounts {
        load: at(K::Load),
        store: at(K::Store),
        first_touch: at(K::FirstTouch),
        hint: at(K::Hint),
        fault: at(K::Fault),
        total: k.iter().saturating_sum(),
    }
}

fn logical_ids(threads: &[Thread]) -> HashMap<ThreadKey, u32> {
    threads
        .iter()
        .map(|t| ((t.pid, t.tid), t.logical_id))
        .collect()
}

/// The samples that came from the sampling rings: the `inst` backend's sampled accesses did not.
fn ring_samples(m: &Meta) -> u64 {
    let all = m.tables.get("samples").map_or(0, |t| t.rows);
    let inst = m
        .backend
        .settings
        .get("inst_samples")
        .and_then(serde_json::Value::as_u64)
        .unwrap_or(0);
    all.saturating_sub(inst)
}

fn profile_summary(profile: &Profile) -> ProfileSummary {
    let m: &Meta = profile.meta();
    ProfileSummary {
        path: profile.dir().display().to_string(),
        format_version: m.format_version.clone(),
        numalens_version: m.numalens_version.clone(),
        command: m.command.clone(),
        start_unix_ns: m.start_unix_ns,
        end_unix_ns: m.end_unix_ns,
        host: HostSummary {
            hostname: m.host.hostname.clone(),
            kernel: m.host.kernel.clone(),
            arch: m.host.arch.clone(),
        },
        backend: BackendSummary {
            name: m.backend.name.clone(),
            settings: m.backend.settings.clone(),
        },
        page_size: m.page_size,
        numa_balancing: m.numa_balancing.as_ref().map(|b| b.mode),
        topology_nodes: m.topology.as_ref().map(|t| t.node_ids()),
        lost_samples: m.lost_samples,
        lost_samples_note: crate::model::lost_samples_note(
            m.lost_samples,
            ring_samples(m),
            m.backend
                .settings
                .get("ring_pages_per_cpu")
                .and_then(serde_json::Value::as_u64),
        ),
        completeness: CompletenessSummary {
            complete: m.completeness.complete,
            exit: m.completeness.exit.as_ref().map(|e| ExitSummary {
                code: e.code,
                signal: e.signal,
            }),
            reasons: m.completeness.reasons.clone(),
        },
        table_rows: m.tables.iter().map(|(k, v)| (k.clone(), v.rows)).collect(),
        unreadable_tables: Vec::new(),
    }
}

/// The `top` objects by accesses, then first touches, then resident pages, then samples, then
/// weight; and every candidate (an access, a selected sample or a resident page), best first.
fn top_objects(
    top: usize,
    tables: &Tables,
    tally: &SampleTally,
    logical: &HashMap<ThreadKey, u32>,
) -> (Vec<ObjectReport>, Vec<Ranked>) {
    let mut candidates: Vec<(usize, PagePlacement, u64)> = Vec::new();
    for (i, object) in tables.objects.iter().enumerate() {
        if tables.object_selected.is_some_and(|s| !s[i]) {
            continue;
        }
        let pages = tables
            .pages
            .placement(object.pid, object.start, object.size, tables.page_size);
        let resident: u64 = pages.by_node.iter().map(|n| n.count).saturating_sum();
        let sampled = tally.objects[i].kinds.iter().saturating_sum();
        if sampled > 0 || resident > 0 || tables.object_accesses[i] > 0 {
            candidates.push((i, pages, resident));
        }
    }
    candidates.sort_by_key(|(i, _, resident)| {
        let t = &tally.objects[*i];
        let first_touch = kind_counts(&t.kinds).first_touch;
        let total: u64 = t.kinds.iter().saturating_sum();
        let id = tables.objects[*i].object_id;
        (
            Reverse(tables.object_accesses[*i]),
            Reverse(first_touch),
            Reverse(*resident),
            Reverse(total),
            Reverse(t.weight),
            id,
        )
    });
    let touchers = first_touchers(tally, logical);
    let reports = candidates
        .iter()
        .take(top)
        .map(|(i, pages, _)| {
            let (i, pages) = (*i, pages.clone());
            let object = &tables.objects[i];
            let t = &tally.objects[i];
            ObjectReport {
                id: object.object_id,
                pid: object.pid,
                kind: object.kind.label().to_string(),
                name: object.name.clone(),
                start: object.start,
                size: object.size,
                alloc_ns: object.alloc_ns,
                free_ns: object.free_ns,
                alloc_tid: object.alloc_tid,
                alloc_thread: object
                    .alloc_tid
                    .and_then(|tid| logical.get(&(object.pid, tid)).copied()),
                site: object.site_key.and_then(|k| tables.sites.get(&k).cloned()),
                samples: kind_counts(&t.kinds),
                weight: t.weight,
                first_touchers: touchers.get(&(i as u32)).cloned().unwrap_or_default(),
                pages,
                access: None,
            }
        })
        .collect();
    let ranked = candidates
        .into_iter()
        .map(|(i, pages, _)| (i, pages))
        .collect();
    (reports, ranked)
}

/// First touchers of each object position, most first.
fn first_touchers(
    tally: &SampleTally,
    logical: &HashMap<ThreadKey, u32>,
) -> HashMap<u32, Vec<ThreadCount>> {
    let mut by_object: HashMap<u32, Vec<ThreadCount>> = HashMap::new();
    for (&(object, (pid, tid)), &count) in &tally.first_touches {
        by_object.entry(object).or_default().push(ThreadCount {
            pid,
            tid,
            thread: logical.get(&(pid, tid)).copied(),
            count,
        });
    }
    for list in by_object.values_mut() {
        list.sort_by_key(|t| (Reverse(t.count), t.pid, t.thread.is_none(), t.thread, t.tid));
    }
    by_object
}

/// Threads listed even without samples: those chosen by `--thread`, else every thread of the
/// table unless `--object` narrowed the report to some objects.
fn listed_threads(options: &Options, tables: &Tables) -> Vec<ThreadKey> {
    if options.object.is_some() && options.thread.is_none() {
        return Vec::new();
    }
    let chosen = |t: &&Thread| options.thread.is_none_or(|id| t.logical_id == id);
    tables
        .threads
        .iter()
        .filter(chosen)
        .map(|t| (t.pid, t.tid))
        .collect()
}

/// The `listed` threads and every thread with a selected sample, by process, then logical id,
/// then tid.
fn thread_reports(tables: &Tables, tally: &SampleTally, listed: &[ThreadKey]) -> Vec<ThreadReport> {
    let empty = ThreadTally::default();
    let known: HashMap<ThreadKey, &Thread> =
        tables.threads.iter().map(|t| ((t.pid, t.tid), t)).collect();
    let mut keys: Vec<ThreadKey> = tally
        .threads
        .iter()
        .filter(|(_, t)| t.kinds.iter().saturating_sum() > 0)
        .map(|(k, _)| *k)
        .collect();
    keys.extend(listed);
    keys.sort_by_key(|k| {
        let logical = known.get(k).map(|t| t.logical_id);
        (k.0, logical.is_none(), logical, k.1)
    });
    keys.dedup();
    keys.into_iter()
        .map(|key| {
            let t = tally.threads.get(&key).unwrap_or(&empty);
            let mut report = thread_report(key, known.get(&key).copied(), t);
            let routine = known.get(&key).and_then(|r| r.start_routine);
            report.start_function = routine.and_then(|a| tables.code.get(&(key.0, a)).cloned());
            report
        })
        .collect()
}

fn thread_report(key: ThreadKey, row: Option<&Thread>, t: &ThreadTally) -> ThreadReport {
    let mut nodes: Vec<NodeCount> = t
        .node_counts()
        .map(|(node, count)| NodeCount { node, count })
        .collect();
    nodes.sort_by_key(|n| n.node);
    ThreadReport {
        pid: key.0,
        tid: key.1,
        logical_id: row.map(|r| r.logical_id),
        name: row.and_then(|r| r.name.clone()),
        start_routine: row.and_then(|r| r.start_routine).map(|a| format!("{a:#x}")),
        start_function: None,
        parent_tid: row.and_then(|r| r.parent_tid),
        create_ns: row.map(|r| r.create_ns),
        exit_ns: row.and_then(|r| r.exit_ns),
        samples: kind_counts(&t.kinds),
        weight: t.weight,
        nodes,
        unknown_node: t.unknown_node,
        access: ThreadAccess::default(),
    }
}

fn node_totals(pages: &PageMap, tally: &SampleTally) -> NodeTotals {
    let page_totals = pages.totals();
    let mut samples: BTreeMap<u32, u64> = BTreeMap::new();
    let mut unknown_node_samples = 0;
    for t in tally.threads.values() {
        for (node, n) in t.node_counts() {
            *samples.entry(node).or_default() += n;
        }
        unknown_node_samples += t.unknown_node;
    }
    let mut ids: Vec<u32> = page_totals
        .by_node
        .keys()
        .chain(samples.keys())
        .copied()
        .collect();
    ids.sort_unstable();
    ids.dedup();
    NodeTotals {
        page_runs: pages.rows,
        nodes: ids
            .into_iter()
            .map(|node| {
                let p = page_totals.by_node.get(&node).copied().unwrap_or_default();
                NodeSummary {
                    node,
                    pages: p.pages,
                    bytes: p.bytes,
                    samples: samples.get(&node).copied().unwrap_or(0),
                }
            })
            .collect(),
        untouched_pages: page_totals.untouched,
        unknown_pages: page_totals.unknown,
        unknown_node_samples,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use numalens_format::{Backend, Clock, Host};

    #[test]
    fn the_lost_share_leaves_out_the_inst_backends_samples() {
        let mut m = Meta::new(
            vec!["app".into()],
            Backend {
                name: "inst".into(),
                settings: Default::default(),
            },
            Host {
                hostname: "h".into(),
                kernel: "k".into(),
                arch: "x86_64".into(),
            },
            Clock {
                name: "CLOCK_MONOTONIC".into(),
                origin_ns: 0,
            },
        );
        m.tables
            .insert("samples".into(), numalens_format::TableInfo { rows: 1000 });
        assert_eq!(ring_samples(&m), 1000);
        m.backend
            .settings
            .insert("inst_samples".into(), 900u64.into());
        assert_eq!(ring_samples(&m), 100);
    }
}
