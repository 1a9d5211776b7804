//! Which node holds each block of physical memory: from a perf.data header
//! (`HEADER_MEM_TOPOLOGY`) for an imported recording, from sysfs for a live one
//! (`/sys/devices/system/node/nodeN/memoryM`, blocks of `/sys/devices/system/memory/
//! block_size_bytes`).

use std::path::Path;

/// Physical memory blocks and their nodes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PhysicalNodes {
    block_size: u64,
    /// (first block, blocks, node), sorted.
    runs: Vec<(u64, u64, u32)>,
}

impl PhysicalNodes {
    /// From runs of consecutive blocks `(first block, blocks, node)`, in any order.
    pub fn from_runs(block_size: u64, mut runs: Vec<(u64, u64, u32)>) -> Self {
        runs.sort_unstable();
        PhysicalNodes { block_size, runs }
    }

    /// This machine's blocks, read under `sys` (`/sys/devices/system` on a live machine); empty
    /// when the kernel does not list them (no memory hotplug support), so every node is unknown.
    pub fn from_sysfs(sys: &Path) -> Self {
        let block_size = std::fs::read_to_string(sys.join("memory/block_size_bytes"))
            .ok()
            .and_then(|t| u64::from_str_radix(t.trim(), 16).ok())
            .unwrap_or(0);
        let mut blocks: Vec<(u64, u32)> = Vec::new();
        let Ok(nodes) = std::fs::read_dir(sys.join("node")) else {
            return PhysicalNodes::default();
        };
        for node_dir in nodes.flatten() {
            let name = node_dir.file_name().to_string_lossy().into_owned();
            let Some(node) = name.strip_prefix("node").and_then(|n| n.parse().ok()) else {
                continue;
            };
            let Ok(entries) = std::fs::read_dir(node_dir.path()) else {
                continue;
            };
            blocks.extend(entries.flatten().filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                Some((name.strip_prefix("memory")?.parse().ok()?, node))
            }));
        }
        blocks.sort_unstable();
        // A block that spans a node boundary is listed under both nodes: its node is unknown.
        let shared: std::collections::HashSet<u64> = blocks
            .windows(2)
            .filter(|w| w[0].0 == w[1].0)
            .map(|w| w[0].0)
            .collect();
        blocks.retain(|(block, _)| !shared.contains(block));
        let mut runs: Vec<(u64, u64, u32)> = Vec::new();
        for (block, node) in blocks {
            match runs.last_mut() {
                Some((first, len, n)) if *n == node && *first + *len == block => *len += 1,
                _ => runs.push((block, 1, node)),
            }
        }
        PhysicalNodes::from_runs(block_size, runs)
    }

    /// This machine's blocks.
    pub fn host() -> Self {
        Self::from_sysfs(Path::new("/sys/devices/system"))
    }

    /// True when no block is known: every node is unknown.
    pub fn is_empty(&self) -> bool {
        self.block_size == 0 || self.runs.is_empty()
    }

    /// The node of a physical address, when known. 0 is what the kernel writes when it could
    /// not translate the address.
    pub fn node_of(&self, phys: u64) -> Option<u32> {
        if self.block_size == 0 || phys == 0 {
            return None;
        }
        let block = phys / self.block_size;
        let i = self.runs.partition_point(|&(first, _, _)| first <= block);
        let (first, len, node) = *self.runs.get(i.checked_sub(1)?)?;
        (block < first + len).then_some(node)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_listed_under_two_nodes_has_no_node() {
        let sys = tempfile::tempdir().unwrap();
        let s = sys.path();
        std::fs::create_dir_all(s.join("memory")).unwrap();
        std::fs::write(s.join("memory/block_size_bytes"), "8000000\n").unwrap();
        for (node, blocks) in [(0, 0..3), (1, 2..4)] {
            for b in blocks {
                std::fs::create_dir_all(s.join(format!("node/node{node}/memory{b}"))).unwrap();
            }
        }
        let nodes = PhysicalNodes::from_sysfs(s);
        let at = |block: u64| nodes.node_of(block * 0x800_0000 + 0x10);
        assert_eq!([at(1), at(2), at(3)], [Some(0), None, Some(1)]);
    }

    #[test]
    fn sysfs_memory_blocks_give_the_node_of_an_address() {
        let sys = tempfile::tempdir().unwrap();
        let s = sys.path();
        std::fs::create_dir_all(s.join("memory")).unwrap();
        std::fs::write(s.join("memory/block_size_bytes"), "8000000\n").unwrap();
        for (node, blocks) in [(0, 0..4), (1, 4..6)] {
            for b in blocks {
                std::fs::create_dir_all(s.join(format!("node/node{node}/memory{b}"))).unwrap();
            }
            std::fs::write(s.join(format!("node/node{node}/cpulist")), "0\n").unwrap();
        }
        let map = PhysicalNodes::from_sysfs(s);
        let block = 0x800_0000u64;
        assert_eq!(map.node_of(block - 1), Some(0));
        assert_eq!(map.node_of(4 * block), Some(1));
        assert_eq!(map.node_of(6 * block), None);
        assert_eq!(map.node_of(0), None);
        assert!(PhysicalNodes::from_sysfs(&s.join("absent")).is_empty());
    }
}
