//! Where threads and pages are: the run's own placement when the recorded machine had several
//! nodes, else a what-if machine model with threads spread over its nodes in creation order and
//! pages placed by first touch (Linux's default policy).

use std::collections::HashMap;

use numalens_format::{Profile, Thread};
use numalens_topology::Topology;

use crate::pages::PageMap;
use crate::samples::ThreadKey;

/// The what-if machine used when nothing else is given: the 4-node machine A of the Lepers thesis.
pub const DEFAULT_PRESET: &str = "machine-a";

/// A machine to place threads and pages on, chosen by the user.
#[derive(Debug, Clone)]
pub struct WhatIf {
    /// How the user named it (a preset name or a file).
    pub name: String,
    pub topology: Topology,
}

/// How threads and pages get nodes.
pub(crate) struct Placement {
    pub mode: &'static str,
    pub topology: String,
    pub reason: String,
    pub thread_rule: &'static str,
    pub page_rule: &'static str,
    /// By dense thread id.
    pub thread_node: Vec<Option<u32>>,
    /// The machine: its nodes (in id order, the order of the traffic matrix), their CPUs,
    /// memory and distances.
    pub machine: Topology,
    recorded: bool,
}

impl Placement {
    /// The placement to analyse with; `touched` gives, per dense thread id, the nodes of the
    /// pages it placed by first touch (the node it ran on, under first touch).
    pub(crate) fn choose(
        profile: &Profile,
        what_if: Option<&WhatIf>,
        keys: &[ThreadKey],
        threads: &[Thread],
        touched: &[HashMap<u32, u64>],
    ) -> Placement {
        let recorded = profile.meta().topology.as_ref();
        let recorded_nodes = recorded.map_or(0, |t| t.nodes.len());
        let (machine, mode, reason) = match (what_if, recorded) {
            (Some(w), _) => (
                w.clone(),
                "what-if",
                "asked for with --topology".to_string(),
            ),
            (None, Some(t)) if recorded_nodes > 1 => {
                let w = WhatIf {
                    name: t.name.clone(),
                    topology: t.clone(),
                };
                (
                    w,
                    "recorded",
                    format!("the recorded machine has {recorded_nodes} nodes"),
                )
            }
            (None, _) => {
                let topology = numalens_topology::presets::preset(DEFAULT_PRESET)
                    .expect("the default preset exists");
                let why = if recorded_nodes == 1 {
                    "the recorded machine has one node"
                } else {
                    "the profile has no recorded topology"
                };
                let w = WhatIf {
                    name: DEFAULT_PRESET.to_string(),
                    topology,
                };
                (
                    w,
                    "what-if",
                    format!("{why}; default what-if machine {DEFAULT_PRESET}"),
                )
            }
        };
        let spread = spread(&machine.topology, keys, threads);
        let is_recorded = mode == "recorded";
        let thread_node = if is_recorded {
            (0..keys.len())
                .map(|t| majority(touched.get(t)).or(spread[t]))
                .collect()
        } else {
            spread
        };
        Placement {
            mode,
            topology: machine.name.clone(),
            reason,
            thread_rule: if is_recorded {
                "the node of the pages it first touched, else spread over nodes by logical id"
            } else {
                "spread over the nodes with CPUs in creation order: logical id i of T threads on node i*N/T"
            },
            page_rule: if is_recorded {
                "the recorded node (last page_nodes answer, else the first-touch fault's node)"
            } else {
                "first touch: the node of the thread that touched it first"
            },
            thread_node,
            machine: machine.topology,
            recorded: is_recorded,
        }
    }

    /// Node of a page: recorded, or its first toucher's.
    pub(crate) fn page_node(
        &self,
        pages: &PageMap,
        pid: u32,
        address: u64,
        touch_node: Option<u32>,
        first_toucher: Option<u32>,
    ) -> Option<u32> {
        if self.recorded {
            return pages.node_at(pid, address).or(touch_node);
        }
        first_toucher.and_then(|t| self.thread_node.get(t as usize).copied().flatten())
    }
}

fn majority(counts: Option<&HashMap<u32, u64>>) -> Option<u32> {
    counts?
        .iter()
        .max_by_key(|(node, n)| (**n, std::cmp::Reverse(**node)))
        .map(|(node, _)| *node)
}

/// Threads of each process spread over the nodes with CPUs, in logical-id order (threads only
/// seen in the data come after the table's).
fn spread(topology: &Topology, keys: &[ThreadKey], threads: &[Thread]) -> Vec<Option<u32>> {
    let mut nodes: Vec<u32> = topology
        .nodes
        .iter()
        .filter(|n| !n.cpus.is_empty())
        .map(|n| n.id)
        .collect();
    if nodes.is_empty() {
        nodes = topology.node_ids();
    }
    let logical: HashMap<ThreadKey, u32> = threads
        .iter()
        .map(|t| ((t.pid, t.tid), t.logical_id))
        .collect();
    // Per process: (dense id, sort key: not in the table, logical id, tid).
    type Order = (usize, (bool, u32, u32));
    let mut by_pid: HashMap<u32, Vec<Order>> = HashMap::new();
    for (i, key) in keys.iter().enumerate() {
        let l = logical.get(key).copied();
        by_pid
            .entry(key.0)
            .or_default()
            .push((i, (l.is_none(), l.unwrap_or(0), key.1)));
    }
    let mut out = vec![None; keys.len()];
    for list in by_pid.values_mut() {
        list.sort_by_key(|(_, order)| *order);
        let count = list.len();
        for (rank, (i, _)) in list.iter().enumerate() {
            out[*i] = nodes.get(rank * nodes.len() / count.max(1)).copied();
        }
    }
    out
}
