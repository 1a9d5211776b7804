//! The plan: a policy's placement as rules a later run applies (docs/PLAN.md). Rules are keyed
//! by what survives a rebuild-free rerun and ASLR (allocation site, symbol, a thread's logical
//! id), never by address; page ranges are offsets inside the object.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::accesses::{Accesses, ObjectInfo};
use crate::error::PlaceError;
use crate::layout::Schedule;
use crate::machine::Machine;
use crate::policies::{Policy, weighted_interleave_weights};

/// The version this code writes; readers refuse a newer major and accept a newer minor.
pub const PLAN_VERSION: &str = "1.0";

/// Page ranges per object at most; beyond, the object gets a weighted interleave.
pub const MAX_RANGES: usize = 1024;

/// `migrate-at` rules at most.
pub const MAX_MIGRATIONS: usize = 4096;

/// An interleave pattern matching this share of an object's pages is written as one.
const INTERLEAVE_MATCH: f64 = 0.95;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub plan_version: String,
    pub numalens_version: String,
    pub policy: PolicyUsed,
    pub made_from: PlanSource,
    pub topology: PlanTopology,
    #[serde(default)]
    pub threads: Vec<ThreadRule>,
    #[serde(default)]
    pub objects: Vec<ObjectRule>,
    #[serde(default)]
    pub unplaced: Unplaced,
    #[serde(default)]
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicyUsed {
    pub name: String,
    #[serde(default)]
    pub parameters: serde_json::Value,
}

/// What the plan was made from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct PlanSource {
    pub profile: String,
    #[serde(default)]
    pub command: Vec<String>,
    /// The binaries the plan was made for: a run of another build gets a warning.
    #[serde(default)]
    pub build_ids: Vec<BuildId>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BuildId {
    pub module: String,
    pub build_id: String,
}

/// The machine the plan was made for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanTopology {
    pub name: String,
    pub nodes: Vec<PlanNode>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanNode {
    pub id: u32,
    pub cpus: usize,
    #[serde(default)]
    pub memory_bytes: Option<u64>,
}

/// Where a thread runs: its node's CPUs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadRule {
    /// Processes of the run numbered by pid order, from 0.
    pub process: u32,
    /// Creation order within the process (0: the main thread).
    pub logical_id: u32,
    pub node: u32,
    /// Moves to other nodes during the run (online kMAF's remapping).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub migrate_at: Vec<ThreadMoveAt>,
}

/// A thread moved to `node` at `time_s` seconds after the run's first recorded access.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadMoveAt {
    pub time_s: f64,
    pub node: u32,
}

/// How an object is recognised in a later run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Identity {
    #[serde(default)]
    pub process: u32,
    /// Allocation-site key (hex), for heap and mmap objects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub site: Option<String>,
    /// The site's frames, innermost first, for people.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub frames: Vec<String>,
    /// Symbol of a static object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub symbol: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub module: Option<String>,
    /// The stack of the thread with this logical id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack_of_thread: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    Bind {
        node: u32,
    },
    Interleave {
        nodes: Vec<u32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        weights: Option<Vec<u32>>,
    },
    /// Advisory: user space cannot replicate pages transparently.
    Replicate {},
    /// Page ranges (offsets from the object's first page, both ends included) on nodes.
    Ranges(Vec<PageRange>),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageRange {
    pub pages: [u64; 2],
    pub node: u32,
}

/// Pages of an object to move at a time of the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MigrateAt {
    /// Seconds since the run's first recorded access.
    pub time_s: f64,
    pub node: u32,
    /// Page offsets inside the object.
    pub pages: Vec<u64>,
    /// Advisory, as the `replicate` action: the policy gave every node a read-only copy of
    /// these pages here (`node` keeps taking the writes).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub replicate: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ObjectRule {
    pub identity: Identity,
    /// The object's name in the profile, for people.
    pub name: String,
    pub kind: String,
    /// Objects of the profile this rule stands for (allocations at one site).
    pub instances: usize,
    pub pages: u64,
    pub accesses: u64,
    pub action: Action,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub migrate_at: Vec<MigrateAt>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// What no rule covers: pages without an object, or of objects with no stable identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Unplaced {
    pub pages: u64,
    pub accesses: u64,
}

const REPLICATE_NOTE: &str = "advisory: user space cannot replicate pages transparently; keep \
                              one copy of this object per node (e.g. per-node arrays) or let the \
                              run interleave it";

/// The plan of `schedule`'s final placement.
pub fn from_schedule(
    accesses: &Accesses,
    machine: &Machine,
    schedule: &Schedule,
    policy: Policy,
    parameters: serde_json::Value,
    source: PlanSource,
) -> Plan {
    // The placement at start: an online policy's moves follow as `migrate_at` rules, so that
    // the plan does what the policy did rather than jump to where it ended.
    let layout = &schedule.initial;
    let pids = accesses.pids();
    let rank = |pid: u32| pids.iter().position(|&p| p == pid).unwrap_or(0) as u32;
    let mut threads: Vec<ThreadRule> = accesses
        .threads
        .iter()
        .zip(&schedule.initial.thread_node)
        .map(|(t, &n)| ThreadRule {
            process: rank(t.pid),
            logical_id: t.logical_id,
            node: machine.nodes[n],
            migrate_at: Vec::new(),
        })
        .collect();
    let window_s = accesses.windows.length_ns as f64 / 1e9;
    for (w, moves) in schedule.thread_moves.iter().enumerate() {
        for m in moves {
            if let Some(rule) = threads.get_mut(m.thread as usize) {
                rule.migrate_at.push(ThreadMoveAt {
                    time_s: (w as u64 + 1) as f64 * window_s,
                    node: machine.nodes[m.to],
                });
            }
        }
    }
    threads.sort_by_key(|t| (t.process, t.logical_id));
    let mut by_object: Vec<Vec<usize>> = vec![Vec::new(); accesses.objects.len()];
    let mut unplaced = Unplaced::default();
    for (p, page) in accesses.pages.iter().enumerate() {
        match page.object {
            Some(o) => by_object[o as usize].push(p),
            None => unplace(&mut unplaced, page.total()),
        }
    }
    let weights =
        (policy == Policy::InterleaveWeighted).then(|| weighted_interleave_weights(machine));
    let mut groups: BTreeMap<String, Vec<Instance>> = BTreeMap::new();
    for (o, pages) in by_object.iter().enumerate() {
        if pages.is_empty() {
            continue;
        }
        let object = &accesses.objects[o];
        let total: u64 = pages
            .iter()
            .fold(0, |s, &p| s.saturating_add(accesses.pages[p].total()));
        let Some(identity) = identity(object, accesses, rank(object.pid)) else {
            unplaced.pages += pages.len() as u64;
            unplaced.accesses = unplaced.accesses.saturating_add(total);
            continue;
        };
        let start = first_page(accesses, object, pages);
        let (action, note) = action(accesses, machine, layout, pages, start, weights.as_deref());
        let key = serde_json::to_string(&identity).unwrap_or_default();
        groups.entry(key).or_default().push(Instance {
            object: o,
            identity,
            action,
            note,
            pages: pages.len() as u64,
            accesses: total,
        });
    }
    let mut objects: Vec<ObjectRule> = groups.into_values().map(|g| merge(accesses, g)).collect();
    objects.sort_by_key(|r| std::cmp::Reverse(r.accesses));
    let mut notes = schedule.notes.clone();
    add_migrations(accesses, machine, schedule, &mut objects, &mut notes);
    Plan {
        plan_version: PLAN_VERSION.to_string(),
        numalens_version: env!("CARGO_PKG_VERSION").to_string(),
        policy: PolicyUsed {
            name: policy.name().to_string(),
            parameters,
        },
        made_from: source,
        topology: PlanTopology {
            name: machine.name.clone(),
            nodes: (0..machine.node_count())
                .map(|i| PlanNode {
                    id: machine.nodes[i],
                    cpus: machine.cpus[i],
                    memory_bytes: machine.memory_bytes[i],
                })
                .collect(),
        },
        threads,
        objects,
        unplaced,
        notes,
    }
}

fn unplace(u: &mut Unplaced, accesses: u64) {
    u.pages += 1;
    u.accesses = u.accesses.saturating_add(accesses);
}

struct Instance {
    object: usize,
    identity: Identity,
    action: Action,
    note: Option<String>,
    pages: u64,
    accesses: u64,
}

/// The page number offsets count from: the object's first page (from its start address, so
/// that offsets mean the same in a run where other pages are touched first), or its first
/// accessed page when the start is unknown (0) or lies after it.
pub(crate) fn first_page(a: &Accesses, object: &ObjectInfo, pages: &[usize]) -> u64 {
    let accessed = pages.iter().map(|&p| a.pages[p].number).min();
    let from_start = object.start / a.page_size.max(1);
    match accessed {
        Some(n) if n < from_start || object.start == 0 => n,
        _ => from_start,
    }
}

/// The stable identity of an object, when it has one.
pub(crate) fn identity(o: &ObjectInfo, a: &Accesses, process: u32) -> Option<Identity> {
    let base = Identity {
        process,
        ..Identity::default()
    };
    match o.kind.as_str() {
        "heap" | "mmap" => o.site_key.map(|k| Identity {
            site: Some(format!("{k:#018x}")),
            frames: o.frames.clone(),
            ..base
        }),
        "static" => Some(Identity {
            symbol: Some(o.name.split(" (").next().unwrap_or(&o.name).to_string()),
            module: o.module.clone(),
            ..base
        }),
        "stack" => {
            let from_name = o
                .name
                .strip_prefix("stack[T")
                .and_then(|r| r.strip_suffix(']'))
                .and_then(|n| n.parse().ok());
            let logical =
                from_name.or_else(|| o.alloc_thread.map(|t| a.threads[t as usize].logical_id))?;
            Some(Identity {
                stack_of_thread: Some(logical),
                ..base
            })
        }
        _ => None,
    }
}

/// The action that gives the object's pages their final nodes, and a note when it is not exact.
fn action(
    a: &Accesses,
    machine: &Machine,
    layout: &crate::layout::Layout,
    pages: &[usize],
    start: u64,
    weights: Option<&[u32]>,
) -> (Action, Option<String>) {
    if pages.iter().all(|&p| layout.is_replicated(p)) {
        return (Action::Replicate {}, Some(REPLICATE_NOTE.to_string()));
    }
    let node = |p: usize| machine.nodes[layout.page_node[p]];
    let first = node(pages[0]);
    if pages.iter().all(|&p| node(p) == first) {
        return (Action::Bind { node: first }, None);
    }
    let mut set: Vec<u32> = pages.iter().map(|&p| node(p)).collect();
    set.sort_unstable();
    set.dedup();
    if let Some(w) = weights {
        let memory: Vec<u32> = machine
            .memory_nodes()
            .iter()
            .map(|&m| machine.nodes[m])
            .collect();
        if set.iter().all(|n| memory.contains(n)) {
            return (
                Action::Interleave {
                    nodes: memory,
                    weights: Some(w.to_vec()),
                },
                None,
            );
        }
    }
    let k = set.len() as u64;
    // The round-robin may start anywhere in the set: a run's interleave does not promise which
    // node takes the first page either.
    let matching = (0..k)
        .map(|r| {
            pages
                .iter()
                .filter(|&&p| set[((a.pages[p].number + r) % k) as usize] == node(p))
                .count()
        })
        .max()
        .unwrap_or(0);
    if matching as f64 >= INTERLEAVE_MATCH * pages.len() as f64 {
        return (
            Action::Interleave {
                nodes: set,
                weights: None,
            },
            None,
        );
    }
    let mut ranges: Vec<PageRange> = Vec::new();
    for &p in pages {
        let offset = a.pages[p].number - start;
        match ranges.last_mut() {
            Some(r) if r.node == node(p) && r.pages[1] + 1 == offset => r.pages[1] = offset,
            _ => ranges.push(PageRange {
                pages: [offset, offset],
                node: node(p),
            }),
        }
    }
    if ranges.len() <= MAX_RANGES {
        return (Action::Ranges(ranges), None);
    }
    let weights: Vec<u32> = set
        .iter()
        .map(|n| pages.iter().filter(|&&p| node(p) == *n).count() as u32)
        .collect();
    let note = format!(
        "{} page ranges (more than {MAX_RANGES}): written as an interleave weighted by pages per node",
        ranges.len()
    );
    (
        Action::Interleave {
            nodes: set,
            weights: Some(weights),
        },
        Some(note),
    )
}

/// One rule for the instances of one identity: their action when they agree, else the action
/// of the instance with most accesses, with a note.
fn merge(a: &Accesses, mut group: Vec<Instance>) -> ObjectRule {
    group.sort_by_key(|i| (std::cmp::Reverse(i.accesses), i.object));
    let differ = group.iter().filter(|i| i.action != group[0].action).count();
    let first = &group[0];
    let object = &a.objects[first.object];
    let mut note = first.note.clone();
    if differ > 0 {
        let text = format!(
            "{differ} of {} instances of this site were placed otherwise; the rule is that of the \
             instance with most accesses",
            group.len()
        );
        note = Some(note.map_or(text.clone(), |n| format!("{n}; {text}")));
    }
    ObjectRule {
        identity: first.identity.clone(),
        name: object.name.clone(),
        kind: object.kind.clone(),
        instances: group.len(),
        pages: group.iter().map(|i| i.pages).sum(),
        accesses: group.iter().fold(0u64, |s, i| s.saturating_add(i.accesses)),
        action: first.action.clone(),
        migrate_at: Vec::new(),
        note,
    }
}

/// Online policies' moves as `migrate-at` rules of the objects they touch.
fn add_migrations(
    a: &Accesses,
    machine: &Machine,
    schedule: &Schedule,
    objects: &mut [ObjectRule],
    notes: &mut Vec<String>,
) {
    let mut written = 0usize;
    let mut dropped = 0usize;
    let mut first_pages: BTreeMap<u32, u64> = BTreeMap::new();
    let pids = a.pids();
    let rank = |pid: u32| pids.iter().position(|&p| p == pid).unwrap_or(0) as u32;
    let mut rules: BTreeMap<u32, Option<usize>> = BTreeMap::new();
    for (w, moves) in schedule.moves.iter().enumerate() {
        let time_s = (w as u64 + 1) as f64 * a.windows.length_ns as f64 / 1e9;
        let mut by: BTreeMap<(usize, u32, bool), Vec<u64>> = BTreeMap::new();
        for m in moves {
            let page = &a.pages[m.page as usize];
            let Some(o) = page.object else { continue };
            let object = &a.objects[o as usize];
            let rule = *rules.entry(o).or_insert_with(|| {
                let id = identity(object, a, rank(object.pid))?;
                objects.iter().position(|r| r.identity == id)
            });
            let Some(rule) = rule else { continue };
            let first = *first_pages.entry(o).or_insert_with(|| {
                let pages: Vec<usize> = (0..a.pages.len())
                    .filter(|&p| a.pages[p].object == Some(o))
                    .collect();
                first_page(a, object, &pages)
            });
            let replicate = m.kind == crate::layout::MoveKind::Replicate;
            by.entry((rule, machine.nodes[m.to], replicate))
                .or_default()
                .push(page.number - first);
        }
        for ((rule, node, replicate), pages) in by {
            if written >= MAX_MIGRATIONS {
                dropped += 1;
                continue;
            }
            written += 1;
            objects[rule].migrate_at.push(MigrateAt {
                time_s,
                node,
                pages,
                replicate,
            });
        }
    }
    if dropped > 0 {
        notes.push(format!(
            "{dropped} migrate-at rules beyond the first {MAX_MIGRATIONS} left out"
        ));
    }
}

impl Plan {
    pub fn to_json_pretty(&self) -> String {
        serde_json::to_string_pretty(self).expect("a plan serialises") + "\n"
    }

    /// Reads a plan; errors name the file, the place and what to change.
    pub fn from_json_str(text: &str, path: &Path) -> Result<Plan, PlaceError> {
        let problem = |p: String| PlaceError::Plan {
            path: path.to_path_buf(),
            problem: p,
        };
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| problem(format!("is not JSON: {e}")))?;
        let version = value
            .get("plan_version")
            .and_then(|v| v.as_str())
            .ok_or_else(|| problem("has no `plan_version`: is it a numalens plan?".into()))?;
        let major = |v: &str| v.split('.').next().and_then(|m| m.parse::<u32>().ok());
        match (major(version), major(PLAN_VERSION)) {
            (Some(theirs), Some(ours)) if theirs <= ours => {}
            _ => {
                return Err(problem(format!(
                    "has plan version {version}; this numalens reads {PLAN_VERSION} and older \
                     minor versions: use a newer numalens"
                )));
            }
        }
        serde_json::from_str(text).map_err(|e| problem(format!("{e}")))
    }

    /// Refuses a plan whose node ids do not all exist on `machine`.
    pub fn check_machine(&self, machine: &Machine, path: &Path) -> Result<(), PlaceError> {
        let known = |n: &u32| machine.nodes.contains(n);
        let bad = |what: String, n: u32| PlaceError::Plan {
            path: path.to_path_buf(),
            problem: format!(
                "{what} uses node {n}, which machine `{}` does not have (its nodes: {:?})",
                machine.name, machine.nodes
            ),
        };
        for t in &self.threads {
            let nodes = std::iter::once(t.node).chain(t.migrate_at.iter().map(|m| m.node));
            if let Some(n) = nodes.into_iter().find(|n| !known(n)) {
                return Err(bad(
                    format!("thread rule {}/{}", t.process, t.logical_id),
                    n,
                ));
            }
        }
        for r in &self.objects {
            let mut nodes: Vec<u32> = match &r.action {
                Action::Bind { node } => vec![*node],
                Action::Interleave { nodes, .. } => nodes.clone(),
                Action::Replicate {} => Vec::new(),
                Action::Ranges(ranges) => ranges.iter().map(|x| x.node).collect(),
            };
            nodes.extend(r.migrate_at.iter().map(|m| m.node));
            if let Some(&n) = nodes.iter().find(|n| !known(n)) {
                return Err(bad(format!("the rule of `{}`", r.name), n));
            }
        }
        Ok(())
    }
}

/// The GNU build id of an ELF file, as hex.
pub fn read_build_id(path: &Path) -> Option<String> {
    use object::Object;
    let data = std::fs::read(path).ok()?;
    let file = object::File::parse(&*data).ok()?;
    let id = file.build_id().ok()??;
    Some(id.iter().map(|b| format!("{b:02x}")).collect())
}

pub mod apply;

#[cfg(test)]
mod tests;
