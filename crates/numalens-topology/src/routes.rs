//! Facts derived from a topology: routes and hop counts, latencies in nanoseconds.

use std::collections::VecDeque;

use crate::validate::LOCAL_DISTANCE;
use crate::{LatencyMatrix, LatencyUnit, Provenance, ProvenanceKind, Topology};

/// Distance Linux assumes between different nodes when the firmware gives no SLIT.
const DEFAULT_REMOTE_DISTANCE: u32 = 20;

impl Topology {
    /// Node ids a request from CPU node `from` to memory node `to` passes through, both ends
    /// included: the explicit route when there is one, else a shortest path over the links
    /// (ties broken towards lower node ids). `None` when a node is unknown or unreachable, or
    /// when the link graph is not known.
    pub fn route(&self, from: u32, to: u32) -> Option<Vec<u32>> {
        self.node_index(from)?;
        self.node_index(to)?;
        if from == to {
            return Some(vec![from]);
        }
        if let Some(r) = self.routes.iter().find(|r| r.from == from && r.to == to) {
            return Some(r.path.clone());
        }
        self.shortest_path(from, to)
    }

    /// Number of links a request from `from` to `to` crosses (0 for local).
    pub fn hops(&self, from: u32, to: u32) -> Option<u32> {
        self.route(from, to).map(|p| (p.len() - 1) as u32)
    }

    /// Largest hop count between any two nodes, when the link graph connects them all.
    pub fn diameter(&self) -> Option<u32> {
        let ids = self.node_ids();
        let mut max = 0;
        for &a in &ids {
            for &b in &ids {
                max = max.max(self.hops(a, b)?);
            }
        }
        Some(max)
    }

    /// Breadth-first search over the undirected links.
    fn shortest_path(&self, from: u32, to: u32) -> Option<Vec<u32>> {
        let n = self.nodes.len();
        let mut previous: Vec<Option<usize>> = vec![None; n];
        let start = self.node_index(from)?;
        let goal = self.node_index(to)?;
        let mut visited = vec![false; n];
        visited[start] = true;
        let mut queue = VecDeque::from([start]);
        while let Some(at) = queue.pop_front() {
            if at == goal {
                break;
            }
            // Nodes are sorted by id, so scanning positions in order prefers lower ids.
            for next in 0..n {
                if !visited[next] && self.has_link(self.nodes[at].id, self.nodes[next].id) {
                    visited[next] = true;
                    previous[next] = Some(at);
                    queue.push_back(next);
                }
            }
        }
        if !visited[goal] {
            return None;
        }
        let mut path = vec![self.nodes[goal].id];
        let mut at = goal;
        while let Some(p) = previous[at] {
            path.push(self.nodes[p].id);
            at = p;
        }
        path.reverse();
        Some(path)
    }

    /// The latency matrix in nanoseconds with its provenance, converting cycles with
    /// [`Topology::cpu_ghz`]. `None` without a latency matrix, or in cycles without a clock.
    pub fn latency_ns(&self) -> Option<(Vec<Vec<f64>>, Provenance)> {
        let lat = self.latency.as_ref()?;
        match lat.unit {
            LatencyUnit::Ns => Some((lat.values.clone(), lat.provenance.clone())),
            LatencyUnit::Cycles => {
                let ghz = self.cpu_ghz.as_ref()?.value;
                let values = lat
                    .values
                    .iter()
                    .map(|row| row.iter().map(|c| c / ghz).collect())
                    .collect();
                let source = format!("{} (cycles ÷ {ghz} GHz)", lat.provenance.source);
                Some((values, Provenance::new(lat.provenance.kind, source)))
            }
        }
    }

    /// A latency matrix from the SLIT distances alone: `local_ns × distance / 10`. Without
    /// distances, uses Linux's defaults (10 local, 20 remote). This is an assumption to state,
    /// not a measurement: SLIT values are relative and often rounded by the firmware.
    pub fn derived_latency_from_slit(&self, local_ns: f64) -> LatencyMatrix {
        let n = self.nodes.len();
        let slit = |i: usize, j: usize| {
            let d = self.distances.as_ref()?;
            d.values.get(i)?.get(j).copied()
        };
        let distance = |i: usize, j: usize| match slit(i, j) {
            Some(d) => d,
            None if i == j => LOCAL_DISTANCE,
            None => DEFAULT_REMOTE_DISTANCE,
        };
        let values = (0..n)
            .map(|i| {
                (0..n)
                    .map(|j| local_ns * f64::from(distance(i, j)) / f64::from(LOCAL_DISTANCE))
                    .collect()
            })
            .collect();
        let basis = if self.distances.is_some() {
            "SLIT distances"
        } else {
            "Linux default distances (no SLIT: 10 local, 20 remote)"
        };
        LatencyMatrix {
            unit: LatencyUnit::Ns,
            values,
            provenance: Provenance::new(
                ProvenanceKind::DerivedFromSlit,
                format!("{local_ns} ns local × distance / 10, from {basis}"),
            ),
            entry_provenance: None,
        }
    }
}
