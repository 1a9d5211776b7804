//! Where sampled accesses were served from and how long they took, as the PMU measured them
//! (`data_source` and `latency` of `load`/`store` samples: the `pmu` backend and imported
//! `perf mem` recordings).

use serde::{Deserialize, Serialize};

/// Weighted accesses by where they were served from, and the measured latency.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceCounts {
    pub l1: u64,
    pub l2: u64,
    pub l3: u64,
    pub local_dram: u64,
    pub remote_dram: u64,
    pub remote_cache: u64,
    /// The PMU did not say (stores on some machines, misses without a level).
    pub unknown: u64,
    /// Samples with a measured latency, and the sum of their latencies in cycles.
    pub latency_samples: u64,
    pub latency_cycles: u64,
}

impl SourceCounts {
    /// Accesses served from another node's memory or caches.
    pub fn remote(&self) -> u64 {
        self.remote_dram.saturating_add(self.remote_cache)
    }

    /// Accesses by known source, nearest first: L1, L2, L3, local DRAM, remote DRAM, remote
    /// cache.
    pub fn known_parts(&self) -> [u64; 6] {
        [
            self.l1,
            self.l2,
            self.l3,
            self.local_dram,
            self.remote_dram,
            self.remote_cache,
        ]
    }

    /// Accesses whose source is known.
    pub fn known(&self) -> u64 {
        self.known_parts()
            .iter()
            .fold(0u64, |a, b| a.saturating_add(*b))
    }

    /// Each of [`Self::known_parts`] as a share of the known accesses (none without any).
    pub fn known_shares(&self) -> [Option<f64>; 6] {
        let known = self.known();
        self.known_parts()
            .map(|part| (known > 0).then(|| part as f64 / known as f64))
    }

    /// Mean measured latency in cycles.
    pub fn mean_latency(&self) -> Option<f64> {
        (self.latency_samples > 0).then(|| self.latency_cycles as f64 / self.latency_samples as f64)
    }
}

/// One object's accesses by source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectSources {
    pub object_id: u64,
    pub name: String,
    pub counts: SourceCounts,
}

/// One thread's accesses by source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadSources {
    pub pid: u32,
    pub tid: u32,
    pub logical_id: Option<u32>,
    pub counts: SourceCounts,
}

/// Measured latency from the CPUs of one node to the memory of another.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodePairLatency {
    pub cpu_node: u32,
    pub memory_node: u32,
    pub samples: u64,
    pub mean_cycles: u64,
}

/// What the PMU said of the sampled accesses; absent when no sample has a data source.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataSources {
    pub totals: SourceCounts,
    /// Objects with a sample of known source, most remote accesses first.
    pub objects: Vec<ObjectSources>,
    /// Threads with a sample of known source, by process then logical id.
    pub threads: Vec<ThreadSources>,
    /// (CPU node, memory node) pairs with a measured latency, where both nodes are known: the
    /// CPU's from the recorded topology, the page's from the sample.
    pub node_pairs: Vec<NodePairLatency>,
}
