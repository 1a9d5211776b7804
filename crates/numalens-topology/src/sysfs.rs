//! Reading the running machine's topology from Linux sysfs.
//!
//! The reader takes the sysfs root as a parameter so that tests can point it at a fake tree.

use std::fs;
use std::path::{Path, PathBuf};

use crate::cpulist::{parse_cpulist, parse_nodelist};
use crate::validate::LOCAL_DISTANCE;
use crate::{
    Cpu, DistanceMatrix, Node, Provenance, ProvenanceKind, TOPOLOGY_SCHEMA_VERSION, Topology,
    TopologyError,
};

const SLIT_SOURCE: &str = "ACPI SLIT via sysfs";

/// The topology of the machine this process runs on.
pub fn host() -> Result<Topology, TopologyError> {
    from_sysfs(Path::new("/sys"))
}

/// Reads a topology from a sysfs tree rooted at `root` (normally `/sys`).
pub fn from_sysfs(root: &Path) -> Result<Topology, TopologyError> {
    let node_dir = root.join("devices/system/node");
    let cpus = read_cpus(root)?;
    let (nodes, distances, source) = if node_dir.is_dir() {
        let (nodes, distances) = read_nodes(&node_dir)?;
        let source = format!("Linux sysfs ({})", node_dir.display());
        (
            nodes,
            distances,
            Provenance::new(ProvenanceKind::Measured, source),
        )
    } else {
        single_node(root, &cpus)
    };
    let cpus = assign_nodes(cpus, &nodes);
    let topology = Topology {
        schema: TOPOLOGY_SCHEMA_VERSION,
        name: host_name(root),
        description: None,
        source,
        cpu_ghz: None,
        nodes,
        cpus,
        distances,
        latency: None,
        links: Vec::new(),
        routes: Vec::new(),
    };
    topology.validate()?;
    Ok(topology)
}

/// A CPU as read from `cpuN/topology`, before its node is known.
struct RawCpu {
    id: u32,
    package: u32,
    core: u32,
    llc: Option<u32>,
}

fn read_nodes(node_dir: &Path) -> Result<(Vec<Node>, Option<DistanceMatrix>), TopologyError> {
    let ids = online_nodes(node_dir)?;
    let mut nodes = Vec::with_capacity(ids.len());
    let mut rows = Some(Vec::with_capacity(ids.len()));
    for &id in &ids {
        let dir = node_dir.join(format!("node{id}"));
        let cpus = match read_optional(&dir.join("cpulist"))? {
            Some(text) => parse_cpulist(&text).map_err(|p| sysfs_error(&dir.join("cpulist"), p))?,
            None => Vec::new(),
        };
        let memory_bytes = read_optional(&dir.join("meminfo"))?
            .map(|text| parse_mem_total(&text, &dir.join("meminfo")))
            .transpose()?;
        nodes.push(Node {
            id,
            cpus,
            memory_bytes,
            memory_bandwidth_mbps: None,
            memory_kind: None,
        });
        // One missing `distance` file means the kernel has no SLIT to give: keep none.
        let row = read_optional(&dir.join("distance"))?
            .map(|text| parse_distance_row(&text, ids.len(), &dir.join("distance")))
            .transpose()?;
        rows = rows.zip(row).map(|(mut rows, row)| {
            rows.push(row);
            rows
        });
    }
    let distances = rows.map(|values| DistanceMatrix {
        values,
        provenance: Provenance::new(ProvenanceKind::Measured, SLIT_SOURCE),
    });
    Ok((nodes, distances))
}

/// Online node ids from `node/online`, or from the `nodeN` directories when that file is absent.
fn online_nodes(node_dir: &Path) -> Result<Vec<u32>, TopologyError> {
    let online = node_dir.join("online");
    let ids = match read_optional(&online)? {
        Some(text) => parse_nodelist(&text).map_err(|p| sysfs_error(&online, p))?,
        None => numbered_entries(node_dir, "node")?,
    };
    if ids.is_empty() {
        return Err(sysfs_error(node_dir, "no online NUMA node".to_string()));
    }
    Ok(ids)
}

/// Non-NUMA kernel: no node directory. Linux then behaves as one node 0 holding everything.
fn single_node(root: &Path, cpus: &[RawCpu]) -> (Vec<Node>, Option<DistanceMatrix>, Provenance) {
    let memory_bytes = if root == Path::new("/sys") {
        fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|t| mem_total_kib(&t, "MemTotal:"))
            .map(|kib| kib * 1024)
    } else {
        None
    };
    let node = Node {
        id: 0,
        cpus: cpus.iter().map(|c| c.id).collect(),
        memory_bytes,
        memory_bandwidth_mbps: None,
        memory_kind: None,
    };
    let why = format!(
        "Linux sysfs ({}): no devices/system/node directory (kernel without NUMA support), \
         so one node 0 holding all CPUs and memory",
        root.display()
    );
    let distances = DistanceMatrix {
        values: vec![vec![LOCAL_DISTANCE]],
        provenance: Provenance::new(ProvenanceKind::Assumed, "single node: local distance 10"),
    };
    (
        vec![node],
        Some(distances),
        Provenance::new(ProvenanceKind::Measured, why),
    )
}

/// Reads every CPU that has a `topology` directory; offline CPUs have none and are skipped.
fn read_cpus(root: &Path) -> Result<Vec<RawCpu>, TopologyError> {
    let cpu_dir = root.join("devices/system/cpu");
    let mut cpus = Vec::new();
    for id in numbered_entries(&cpu_dir, "cpu")? {
        let dir = cpu_dir.join(format!("cpu{id}"));
        let online = read_optional(&dir.join("online"))?;
        if online.as_deref().map(str::trim) == Some("0") {
            continue;
        }
        let topo = dir.join("topology");
        let (Some(package), Some(core)) = (
            read_optional(&topo.join("physical_package_id"))?,
            read_optional(&topo.join("core_id"))?,
        ) else {
            continue;
        };
        cpus.push(RawCpu {
            id,
            package: parse_id(&package, &topo.join("physical_package_id"))?,
            core: parse_id(&core, &topo.join("core_id"))?,
            llc: read_llc(&dir.join("cache"))?,
        });
    }
    Ok(cpus)
}

/// The last-level (L3) cache id: the lowest CPU sharing it. `index3` is the L3 on x86, but the
/// `level` file is the authority, so other indices are searched when `index3` is not level 3.
fn read_llc(cache_dir: &Path) -> Result<Option<u32>, TopologyError> {
    let mut candidates = vec![cache_dir.join("index3")];
    if cache_dir.is_dir() {
        for i in numbered_entries(cache_dir, "index")? {
            candidates.push(cache_dir.join(format!("index{i}")));
        }
    }
    for index in candidates {
        let Some(shared) = read_optional(&index.join("shared_cpu_list"))? else {
            continue;
        };
        let level = read_optional(&index.join("level"))?;
        if level.is_some_and(|l| l.trim() != "3") {
            continue;
        }
        let list = index.join("shared_cpu_list");
        let cpus = parse_cpulist(&shared).map_err(|p| sysfs_error(&list, p))?;
        return Ok(cpus.first().copied());
    }
    Ok(None)
}

fn assign_nodes(raw: Vec<RawCpu>, nodes: &[Node]) -> Vec<Cpu> {
    raw.into_iter()
        .filter_map(|c| {
            // A CPU that no node lists has no NUMA home we could report: leave it out.
            let node = nodes.iter().find(|n| n.cpus.contains(&c.id))?.id;
            // The LLC is named by a CPU id; one that no node lists would not validate.
            let llc = c.llc.filter(|l| nodes.iter().any(|n| n.cpus.contains(l)));
            Some(Cpu {
                id: c.id,
                node,
                package: c.package,
                core: c.core,
                llc,
            })
        })
        .collect()
}

fn host_name(root: &Path) -> String {
    if root == Path::new("/sys")
        && let Ok(name) = fs::read_to_string("/proc/sys/kernel/hostname")
        && !name.trim().is_empty()
    {
        return name.trim().to_string();
    }
    format!("sysfs:{}", root.display())
}

/// Ids N of the entries `<prefix>N` of a directory, sorted.
fn numbered_entries(dir: &Path, prefix: &str) -> Result<Vec<u32>, TopologyError> {
    let entries = fs::read_dir(dir).map_err(|source| io_error(dir, source))?;
    let mut ids: Vec<u32> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str()?.strip_prefix(prefix)?.parse().ok())
        .collect();
    ids.sort_unstable();
    Ok(ids)
}

/// File content, or `None` when the file does not exist.
fn read_optional(path: &Path) -> Result<Option<String>, TopologyError> {
    match fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(io_error(path, source)),
    }
}

/// Package and core ids; some platforms write -1 for "unknown", which we read as 0.
fn parse_id(text: &str, path: &Path) -> Result<u32, TopologyError> {
    let v: i64 = text
        .trim()
        .parse()
        .map_err(|_| sysfs_error(path, format!("`{}` is not an integer", text.trim())))?;
    Ok(u32::try_from(v).unwrap_or(0))
}

/// `Node N MemTotal:  X kB` → bytes.
fn parse_mem_total(text: &str, path: &Path) -> Result<u64, TopologyError> {
    text.lines()
        .find_map(|line| {
            let at = line.find("MemTotal:")?;
            mem_total_kib(&line[at..], "MemTotal:")
        })
        .map(|kib| kib * 1024)
        .ok_or_else(|| sysfs_error(path, "no `MemTotal: N kB` line".to_string()))
}

fn mem_total_kib(text: &str, key: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.trim_start().starts_with(key))?;
    line.trim_start()[key.len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn parse_distance_row(text: &str, nodes: usize, path: &Path) -> Result<Vec<u32>, TopologyError> {
    let row: Vec<u32> = text
        .split_whitespace()
        .map(|v| {
            v.parse()
                .map_err(|_| sysfs_error(path, format!("`{v}` is not a distance")))
        })
        .collect::<Result<_, _>>()?;
    if row.len() != nodes {
        return Err(sysfs_error(
            path,
            format!("{} distances for {nodes} online nodes", row.len()),
        ));
    }
    Ok(row)
}

fn sysfs_error(path: &Path, problem: String) -> TopologyError {
    TopologyError::Sysfs {
        path: PathBuf::from(path),
        problem,
    }
}

fn io_error(path: &Path, source: std::io::Error) -> TopologyError {
    TopologyError::Io {
        path: path.to_path_buf(),
        source,
    }
}
