//! The machine a recording was made on, from the perf.data header: its NUMA nodes with their
//! CPUs (`HEADER_NUMA_TOPOLOGY`) and which node holds each block of physical memory
//! (`HEADER_MEM_TOPOLOGY`), so that samples are judged against the recording's machine, not the
//! one importing it.

use numalens_topology::{Node, Provenance, ProvenanceKind, Topology};

use numalens_assemble::perf_sample::bytes::{Bytes, Truncated};
pub use numalens_assemble::perf_sample::physical::PhysicalNodes;

/// A node of `HEADER_NUMA_TOPOLOGY`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedNode {
    pub id: u32,
    pub memory_bytes: u64,
    pub cpus: Vec<u32>,
}

/// Parses `HEADER_NUMA_TOPOLOGY`: a count, then per node its id, total and free memory in KiB
/// and its CPU list as text.
pub fn parse_numa_topology(
    section: &[u8],
    big_endian: bool,
) -> Result<Vec<RecordedNode>, Truncated> {
    let mut b = Bytes::new(section, big_endian);
    let count = b.u32()?;
    let mut nodes = Vec::new();
    for _ in 0..count {
        let id = b.u32()?;
        let total_kib = b.u64()?;
        let _free_kib = b.u64()?;
        let list = b.header_string()?;
        let cpus = numalens_topology::cpulist::parse_cpulist(&list).map_err(|_| Truncated)?;
        nodes.push(RecordedNode {
            id,
            memory_bytes: total_kib.saturating_mul(1024),
            cpus,
        });
    }
    Ok(nodes)
}

/// The recording machine's topology, as far as the header tells (nodes, CPUs and memory; no
/// distances or latencies).
pub fn topology(nodes: &[RecordedNode], hostname: &str) -> Option<Topology> {
    if nodes.is_empty() {
        return None;
    }
    let mut nodes: Vec<Node> = nodes
        .iter()
        .map(|n| Node {
            id: n.id,
            cpus: n.cpus.clone(),
            memory_bytes: Some(n.memory_bytes),
            memory_bandwidth_mbps: None,
            memory_kind: None,
        })
        .collect();
    nodes.sort_by_key(|n| n.id);
    Some(Topology {
        schema: numalens_topology::TOPOLOGY_SCHEMA_VERSION,
        name: if hostname.is_empty() {
            "recorded".into()
        } else {
            hostname.to_string()
        },
        description: Some("the machine a perf.data recording was made on, from its header".into()),
        source: Provenance::new(ProvenanceKind::Measured, "perf.data HEADER_NUMA_TOPOLOGY"),
        cpu_ghz: None,
        nodes,
        cpus: Vec::new(),
        distances: None,
        latency: None,
        links: Vec::new(),
        routes: Vec::new(),
    })
}

/// Parses `HEADER_MEM_TOPOLOGY`: a version, the memory block size in bytes and a count, then per
/// node its id, its number of blocks and a bitmap of the blocks it holds (a bit count, then
/// 64-bit words).
pub fn parse_mem_topology(section: &[u8], big_endian: bool) -> Result<PhysicalNodes, Truncated> {
    let mut b = Bytes::new(section, big_endian);
    let _version = b.u64()?;
    let block_size = b.u64()?;
    let count = b.u64()?;
    let mut runs = Vec::new();
    for _ in 0..count {
        let node = u32::try_from(b.u64()?).map_err(|_| Truncated)?;
        let _blocks = b.u64()?;
        let bits = b.u64()?;
        let words = bits.div_ceil(64);
        if words > b.remaining() as u64 / 8 {
            return Err(Truncated);
        }
        let mut run: Option<(u64, u64)> = None;
        for w in 0..words {
            let word = b.u64()?;
            for bit in 0..64 {
                let block = w * 64 + bit;
                let set = block < bits && word & (1 << bit) != 0;
                run = match (run, set) {
                    (Some((first, len)), true) if first + len == block => Some((first, len + 1)),
                    (Some((first, len)), _) => {
                        runs.push((first, len, node));
                        set.then_some((block, 1))
                    }
                    (None, true) => Some((block, 1)),
                    (None, false) => None,
                };
            }
        }
        if let Some((first, len)) = run {
            runs.push((first, len, node));
        }
    }
    Ok(PhysicalNodes::from_runs(block_size, runs))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn le(words: &[u64]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    #[test]
    fn physical_blocks_map_to_their_nodes() {
        // Two nodes of 128 MiB blocks: node 0 holds blocks 0-3 and 70, node 1 blocks 4-69.
        let mut words = vec![1, 128 << 20, 2];
        words.extend([0, 5, 71, 0b1111, 1 << 6]);
        let node1 = (4..70u64).fold([0u64; 2], |mut w, b| {
            w[(b / 64) as usize] |= 1 << (b % 64);
            w
        });
        words.extend([1, 66, 71, node1[0], node1[1]]);
        let map = parse_mem_topology(&le(&words), false).unwrap();
        let block = 128u64 << 20;
        assert_eq!(map.node_of(block - 1), Some(0));
        assert_eq!(map.node_of(4 * block), Some(1));
        assert_eq!(map.node_of(69 * block + 5), Some(1));
        assert_eq!(map.node_of(70 * block), Some(0));
        assert_eq!(map.node_of(71 * block), None);
        // A physical address of 0 is what the kernel writes when it could not tell.
        assert_eq!(map.node_of(0), None);
        assert!(parse_mem_topology(&le(&words)[..60], false).is_err());
    }

    #[test]
    fn numa_nodes_come_with_their_cpus_and_memory() {
        let mut bytes = 2u32.to_le_bytes().to_vec();
        for (id, list) in [(0u32, "0-3,8"), (1, "4-7")] {
            bytes.extend(id.to_le_bytes());
            bytes.extend(1024u64.to_le_bytes());
            bytes.extend(512u64.to_le_bytes());
            let mut text = list.as_bytes().to_vec();
            text.resize(8, 0);
            bytes.extend((text.len() as u32).to_le_bytes());
            bytes.extend(text);
        }
        let nodes = parse_numa_topology(&bytes, false).unwrap();
        assert_eq!(nodes[0].cpus, vec![0, 1, 2, 3, 8]);
        assert_eq!(nodes[1].memory_bytes, 1024 * 1024);
        let t = topology(&nodes, "box").unwrap();
        t.validate().unwrap();
        assert_eq!(t.node_ids(), vec![0, 1]);
    }
}
