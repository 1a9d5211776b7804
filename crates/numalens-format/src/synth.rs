//! Synthetic sample streams shaped like real recordings, for benchmarks and format tests.
//!
//! The shape follows what sampled access streams of OpenMP-style programs look like: a few threads
//! pinned to CPUs spread over nodes, each mostly streaming through its own block of a large array
//! (sampled every `period` accesses, so consecutive samples of a thread are a few cache lines to a
//! few pages apart), with a share of accesses to a hot shared region and a few random ones;
//! timestamps increase by tens to hundreds of nanoseconds; a handful of instruction addresses.

use crate::tables::{DataSource, Sample, SampleKind};

/// Parameters of a synthetic stream.
#[derive(Debug, Clone)]
pub struct SynthConfig {
    pub seed: u64,
    pub threads: u32,
    pub nodes: u32,
    /// Bytes of each thread's private block.
    pub block_bytes: u64,
    /// Bytes of the shared hot region.
    pub shared_bytes: u64,
    /// Accesses each sample stands for.
    pub period: u32,
}

impl Default for SynthConfig {
    fn default() -> Self {
        SynthConfig {
            seed: 1,
            threads: 8,
            nodes: 4,
            block_bytes: 256 << 20,
            shared_bytes: 16 << 20,
            period: 1000,
        }
    }
}

/// Object ids used by the stream: `0` is the shared region, `1 + t` the block of thread `t`.
pub const SHARED_OBJECT: u64 = 0;

/// Base address of the shared region; the private blocks follow it.
pub const BASE_ADDRESS: u64 = 0x7f3a_0000_0000;

/// An endless, deterministic stream of samples.
pub struct SynthSamples {
    config: SynthConfig,
    rng: SplitMix64,
    time_ns: u64,
    cursors: Vec<u64>,
}

impl SynthSamples {
    pub fn new(config: SynthConfig) -> Self {
        let cursors = vec![0; config.threads as usize];
        SynthSamples {
            rng: SplitMix64(config.seed),
            config,
            time_ns: 0,
            cursors,
        }
    }

    fn block_start(&self, thread: u32) -> u64 {
        BASE_ADDRESS + self.config.shared_bytes + thread as u64 * self.config.block_bytes
    }

    fn next_address(&mut self, thread: u32) -> (u64, u64) {
        let roll = self.rng.below(100);
        let line = 64;
        if roll < 80 {
            // Streaming through the private block: the next sampled access is a few lines on.
            let step = line * (1 + self.rng.below(16));
            let cursor = (self.cursors[thread as usize] + step) % self.config.block_bytes;
            self.cursors[thread as usize] = cursor;
            let address = self.block_start(thread) + cursor + self.rng.below(8) * 8;
            (address, 1 + thread as u64)
        } else if roll < 95 {
            let offset = self.rng.below(self.config.shared_bytes / line) * line;
            (BASE_ADDRESS + offset, SHARED_OBJECT)
        } else {
            let offset = self.rng.below(self.config.block_bytes / line) * line;
            (self.block_start(thread) + offset, 1 + thread as u64)
        }
    }
}

impl Iterator for SynthSamples {
    type Item = Sample;

    fn next(&mut self) -> Option<Sample> {
        self.time_ns += 20 + self.rng.below(300);
        let thread = self.rng.below(self.config.threads as u64) as u32;
        let (address, object) = self.next_address(thread);
        let node = thread % self.config.nodes.max(1);
        let store = self.rng.below(100) < 30;
        Some(Sample {
            time_ns: self.time_ns,
            pid: 4242,
            tid: 4242 + thread,
            cpu: Some(thread),
            address,
            kind: if store {
                SampleKind::Store
            } else {
                SampleKind::Load
            },
            weight: self.config.period,
            object_id: Some(object),
            node: Some(if object == SHARED_OBJECT { 0 } else { node }),
            data_source: DataSource::Unknown,
            latency: None,
            ip: Some(0x40_1000 + 16 * (thread as u64 % 4) + self.rng.below(4) * 4),
            page_size: Some(4096),
            snoop: None,
        })
    }
}

/// SplitMix64: a tiny, fast, deterministic generator; synthetic data needs nothing stronger.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        ((self.next() as u128 * n.max(1) as u128) >> 64) as u64
    }
}

/// Metadata for [`write_example_profile`]: `command`, the synthetic backend, a clock by name, and
/// a placeholder host (`h`, kernel `k`, x86_64).
pub fn example_meta(command: &str, clock: &str) -> crate::Meta {
    crate::Meta::new(
        vec![command.into()],
        crate::Backend {
            name: "synthetic".into(),
            settings: Default::default(),
        },
        crate::Host {
            hostname: "h".into(),
            kernel: "k".into(),
            arch: "x86_64".into(),
        },
        crate::Clock {
            name: clock.into(),
            origin_ns: 0,
        },
    )
}

/// Writes a complete, consistent example profile: `samples` from [`SynthSamples`], plus the
/// `threads` and `objects` they refer to. `meta` says `backend.name = "synthetic"`.
pub fn write_example_profile(
    dir: &std::path::Path,
    config: SynthConfig,
    samples: u64,
    mut meta: crate::Meta,
) -> crate::Result<crate::Meta> {
    use crate::tables::{Object, ObjectKind, Thread};
    meta.backend.name = "synthetic".into();
    for (key, value) in [
        ("seed", config.seed),
        ("threads", config.threads as u64),
        ("period", config.period as u64),
    ] {
        meta.backend.settings.insert(key.into(), value.into());
    }
    let mut writer = crate::ProfileWriter::create(dir, meta)?;
    let pid = 4242;
    writer.push_object(Object {
        object_id: SHARED_OBJECT,
        pid,
        kind: ObjectKind::Heap,
        name: "shared".into(),
        start: BASE_ADDRESS,
        size: config.shared_bytes,
        alloc_ns: 0,
        free_ns: None,
        alloc_tid: Some(pid),
        site_key: None,
    })?;
    for t in 0..config.threads {
        writer.push_thread(Thread {
            pid,
            tid: pid + t,
            logical_id: t,
            name: Some(format!("worker-{t}")),
            start_routine: None,
            create_ns: 0,
            exit_ns: None,
            parent_tid: (t > 0).then_some(pid),
        })?;
        writer.push_object(Object {
            object_id: 1 + t as u64,
            pid,
            kind: ObjectKind::Heap,
            name: format!("block[{t}]"),
            start: BASE_ADDRESS + config.shared_bytes + t as u64 * config.block_bytes,
            size: config.block_bytes,
            alloc_ns: 0,
            free_ns: None,
            alloc_tid: Some(pid),
            site_key: None,
        })?;
    }
    for sample in SynthSamples::new(config).take(samples as usize) {
        writer.push_sample(sample)?;
    }
    writer.finish(crate::Completeness {
        complete: true,
        exit: Some(crate::ProgramExit {
            code: Some(0),
            signal: None,
        }),
        reasons: vec![],
    })
}
