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
    /// Samples (not weighted) whose source is known: what a share of them rests on.
    #[serde(default)]
    pub known_samples: u64,
    /// Accesses that found the line modified in another core's cache (a HITM snoop), served on
    /// this node (an L1–L3 level) or from another node's cache (`remote-cache`); also counted
    /// under their level.
    #[serde(default)]
    pub hitm_local: u64,
    #[serde(default)]
    pub hitm_remote: u64,
    /// Samples served beyond this node's caches: local DRAM, remote DRAM, remote cache; what
    /// the remote share among them rests on.
    #[serde(default)]
    pub beyond_cache_samples: u64,
    /// Samples whose snoop result the PMU gave: without any, HITM counts say nothing.
    #[serde(default)]
    pub snoop_samples: u64,
    /// Samples served from another node, and the sum of the measured latency of those of them
    /// with one (cycles); likewise for local DRAM.
    #[serde(default)]
    pub remote_latency_samples: u64,
    #[serde(default)]
    pub remote_latency_cycles: u64,
    #[serde(default)]
    pub local_dram_latency_samples: u64,
    #[serde(default)]
    pub local_dram_latency_cycles: u64,
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

    /// Accesses that found the line modified in another core's cache.
    pub fn hitm(&self) -> u64 {
        self.hitm_local.saturating_add(self.hitm_remote)
    }

    /// Mean measured latency of the accesses served from another node, in cycles.
    pub fn mean_remote_latency(&self) -> Option<f64> {
        (self.remote_latency_samples > 0)
            .then(|| self.remote_latency_cycles as f64 / self.remote_latency_samples as f64)
    }

    /// Mean measured latency of the accesses served by local DRAM, in cycles.
    pub fn mean_local_dram_latency(&self) -> Option<f64> {
        (self.local_dram_latency_samples > 0)
            .then(|| self.local_dram_latency_cycles as f64 / self.local_dram_latency_samples as f64)
    }
}

/// HITM samples on an object's cache lines that came soon after a sampled store of another
/// thread to the same line: the line moved between the writers' caches. On the same 8-byte word
/// as that store it is true sharing (one variable written by several threads), on another word
/// of the line false sharing (distinct variables that share a line).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HitmSharing {
    /// HITM samples after another thread's store to the same word / to another word of the line.
    pub same_word: u64,
    pub other_word: u64,
    /// Distinct cache lines and threads among those samples (writers and readers).
    pub lines: u64,
    pub threads: u64,
}

/// One object's accesses by source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectSources {
    pub object_id: u64,
    pub name: String,
    pub counts: SourceCounts,
    /// HITM samples that follow another thread's store to the line, when there are any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sharing: Option<HitmSharing>,
}

/// One thread's accesses by source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadSources {
    pub pid: u32,
    pub tid: u32,
    pub logical_id: Option<u32>,
    pub counts: SourceCounts,
}

/// Measured latency from the CPUs of one node to the memory of another, beside the machine
/// model's unloaded latency for the same pair.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodePairLatency {
    pub cpu_node: u32,
    pub memory_node: u32,
    pub samples: u64,
    pub mean_cycles: u64,
    /// `mean_cycles` in ns at the recorded clock; absent without one.
    #[serde(default)]
    pub measured_ns: Option<f64>,
    /// The model's unloaded latency for the pair (`DataSources::model`), absent when the
    /// model has no such pair.
    #[serde(default)]
    pub modelled_ns: Option<f64>,
    /// The model's latency in cycles at the recorded clock; absent without one.
    #[serde(default)]
    pub modelled_cycles: Option<f64>,
}

/// What the measured latencies are set beside: the machine model and the clock that converts
/// cycles to ns.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencyModel {
    /// The topology whose latencies are shown (the recorded one or `--topology`).
    pub topology: String,
    /// Where its latencies come from (its provenance, or the SLIT-derived assumption).
    pub basis: String,
    /// The recorded CPU clock in GHz, when the profile has one.
    pub clock_ghz: Option<f64>,
    /// How the two units are compared, in words.
    pub units: String,
}

/// What the PMU said of the sampled accesses; absent when no sample has a data source.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DataSources {
    pub totals: SourceCounts,
    /// Objects with a sample of known source, most remote accesses first.
    pub objects: Vec<ObjectSources>,
    /// Threads with a sample of known source, by process then logical id.
    pub threads: Vec<ThreadSources>,
    /// (CPU node, memory node) pairs with a measured latency, where both nodes are known: the
    /// CPU's from the recorded topology, the page's from the sample.
    pub node_pairs: Vec<NodePairLatency>,
    /// The model and clock the node pairs' latencies are compared with.
    #[serde(default)]
    pub model: LatencyModel,
}
