//! `from_sysfs` on fake sysfs trees, and once on this machine's real `/sys`.

use std::fs;
use std::path::Path;

use numalens_topology::{ProvenanceKind, from_sysfs, host};

/// A fake sysfs tree under a temporary directory.
struct FakeSysfs {
    dir: tempfile::TempDir,
}

impl FakeSysfs {
    fn new() -> Self {
        let fake = FakeSysfs {
            dir: tempfile::tempdir().unwrap(),
        };
        fs::create_dir_all(fake.root().join("devices/system/cpu")).unwrap();
        fake
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    fn write(&self, rel: &str, text: &str) {
        let path = self.root().join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    fn node(&self, id: u32, cpus: &str, mem_kib: u64, distance: &str) {
        let dir = format!("devices/system/node/node{id}");
        self.write(&format!("{dir}/cpulist"), &format!("{cpus}\n"));
        self.write(
            &format!("{dir}/meminfo"),
            &format!("Node {id} MemTotal:       {mem_kib} kB\nNode {id} MemFree:        1 kB\n"),
        );
        self.write(&format!("{dir}/distance"), &format!("{distance}\n"));
    }

    /// An online CPU; `llc` is the L3's shared_cpu_list, if it has one.
    fn cpu(&self, id: u32, package: u32, core: u32, llc: Option<&str>) {
        let dir = format!("devices/system/cpu/cpu{id}");
        self.write(
            &format!("{dir}/topology/physical_package_id"),
            &format!("{package}\n"),
        );
        self.write(&format!("{dir}/topology/core_id"), &format!("{core}\n"));
        if let Some(list) = llc {
            self.write(&format!("{dir}/cache/index3/level"), "3\n");
            self.write(
                &format!("{dir}/cache/index3/shared_cpu_list"),
                &format!("{list}\n"),
            );
        }
    }
}

#[test]
fn sparse_node_ids_and_a_memory_only_node() {
    let fs = FakeSysfs::new();
    fs.write("devices/system/node/online", "0,2,5\n");
    fs.node(0, "0-1", 1024, "10 21 31");
    fs.node(2, "2-3", 2048, "21 10 31");
    fs.node(5, "", 4096, "31 31 10");
    for cpu in 0..4 {
        fs.cpu(
            cpu,
            cpu / 2,
            cpu % 2,
            Some(if cpu < 2 { "0-1" } else { "2-3" }),
        );
    }
    let t = from_sysfs(fs.root()).unwrap();
    assert_eq!(t.node_ids(), vec![0, 2, 5]);
    assert_eq!(t.nodes[1].cpus, vec![2, 3]);
    assert!(t.nodes[2].cpus.is_empty());
    assert_eq!(t.nodes[2].memory_bytes, Some(4096 * 1024));
    let d = t.distances.as_ref().unwrap();
    assert_eq!(d.values[2], vec![31, 31, 10]);
    assert_eq!(d.provenance.kind, ProvenanceKind::Measured);
    assert_eq!(d.provenance.source, "ACPI SLIT via sysfs");
    assert_eq!(t.cpus[3].node, 2);
    assert_eq!(t.cpus[3].llc, Some(2));
    assert_eq!(t.name, format!("sysfs:{}", fs.root().display()));
}

#[test]
fn smt_siblings_share_a_core_and_two_llcs_are_told_apart() {
    let fs = FakeSysfs::new();
    fs.write("devices/system/node/online", "0\n");
    fs.node(0, "0-7", 8192, "10");
    // Linux numbering: CPUs 0-3 are the first threads of cores 0-3, CPUs 4-7 their siblings.
    for cpu in 0..8 {
        let core = cpu % 4;
        let llc = if core < 2 { "0-1,4-5" } else { "2-3,6-7" };
        fs.cpu(cpu, 0, core, Some(llc));
    }
    let t = from_sysfs(fs.root()).unwrap();
    assert_eq!(t.cpus.len(), 8);
    assert_eq!(t.cpus[5].core, t.cpus[1].core);
    assert_eq!(t.cpus[5].llc, Some(0));
    assert_eq!(t.cpus[6].llc, Some(2));
    let text = numalens_topology::render_text(&t, false);
    assert!(
        text.contains(
            "8 logical CPUs: 1 package, 4 cores, 2 threads per core, 2 last-level caches"
        ),
        "{text}"
    );
}

#[test]
fn nodes_found_from_directories_when_online_is_missing() {
    let fs = FakeSysfs::new();
    fs.node(0, "0", 1024, "10 20");
    fs.node(1, "1", 1024, "20 10");
    fs.cpu(0, 0, 0, None);
    fs.cpu(1, 1, 0, None);
    let t = from_sysfs(fs.root()).unwrap();
    assert_eq!(t.node_ids(), vec![0, 1]);
    assert_eq!(t.cpus[0].llc, None);
}

#[test]
fn offline_cpus_are_left_out_of_the_cpu_layout() {
    let fs = FakeSysfs::new();
    fs.write("devices/system/node/online", "0\n");
    fs.node(0, "0-2", 1024, "10");
    fs.cpu(0, 0, 0, None);
    fs.cpu(1, 0, 1, None);
    fs.write("devices/system/cpu/cpu1/online", "0\n");
    // CPU 2 is offline the way older kernels show it: a directory without `topology`.
    fs.write("devices/system/cpu/cpu2/uevent", "");
    let t = from_sysfs(fs.root()).unwrap();
    assert_eq!(t.cpus.iter().map(|c| c.id).collect::<Vec<_>>(), vec![0]);
}

#[test]
fn a_cache_index3_that_is_not_level_3_is_not_the_llc() {
    let fs = FakeSysfs::new();
    fs.write("devices/system/node/online", "0\n");
    fs.node(0, "0-1", 1024, "10");
    for cpu in 0..2 {
        fs.cpu(cpu, 0, cpu, None);
        let dir = format!("devices/system/cpu/cpu{cpu}/cache");
        fs.write(&format!("{dir}/index3/level"), "2\n");
        fs.write(
            &format!("{dir}/index3/shared_cpu_list"),
            &format!("{cpu}\n"),
        );
        fs.write(&format!("{dir}/index4/level"), "3\n");
        fs.write(&format!("{dir}/index4/shared_cpu_list"), "0-1\n");
    }
    let t = from_sysfs(fs.root()).unwrap();
    assert_eq!(t.cpus[1].llc, Some(0));
}

#[test]
fn a_kernel_without_numa_gives_one_node_and_says_so() {
    let fs = FakeSysfs::new();
    for cpu in 0..4 {
        fs.cpu(cpu, 0, cpu, Some("0-3"));
    }
    let t = from_sysfs(fs.root()).unwrap();
    assert_eq!(t.node_ids(), vec![0]);
    assert_eq!(t.nodes[0].cpus, vec![0, 1, 2, 3]);
    assert_eq!(t.distances.as_ref().unwrap().values, vec![vec![10]]);
    assert!(
        t.source.source.contains("no devices/system/node directory"),
        "{}",
        t.source.source
    );
}

#[test]
fn a_bad_distance_row_names_the_file() {
    let fs = FakeSysfs::new();
    fs.write("devices/system/node/online", "0-1\n");
    fs.node(0, "0", 1024, "10 20");
    fs.node(1, "1", 1024, "20");
    let err = from_sysfs(fs.root()).unwrap_err().to_string();
    assert!(
        err.contains("node1/distance") && err.contains("1 distances for 2 online nodes"),
        "{err}"
    );
}

#[test]
fn reads_this_machine() {
    let t = host().unwrap();
    assert!(!t.nodes.is_empty());
    assert!(t.cpu_count() >= 1);
    assert!(t.nodes.iter().any(|n| n.memory_bytes.unwrap_or(0) > 0));
    t.validate().unwrap();
}

/// A sysfs tree is input too (tests and `--sysfs` point at any directory): a node list or CPU
/// list naming billions of ids is refused naming the file, not expanded.
#[test]
fn huge_lists_in_a_sysfs_tree_are_refused() {
    let fs = FakeSysfs::new();
    fs.write("devices/system/node/online", "0-4000000000\n");
    fs.node(0, "0", 1024, "10");
    let err = from_sysfs(fs.root()).unwrap_err().to_string();
    assert!(err.contains("node/online") && err.contains("more"), "{err}");

    let fs = FakeSysfs::new();
    fs.write("devices/system/node/online", "0\n");
    fs.node(0, "0-100000000", 1024, "10");
    let err = from_sysfs(fs.root()).unwrap_err().to_string();
    assert!(
        err.contains("node0/cpulist") && err.contains("more CPUs than"),
        "{err}"
    );

    let fs = FakeSysfs::new();
    fs.write("devices/system/node/online", "0-2000\n");
    let err = from_sysfs(fs.root()).unwrap_err().to_string();
    assert!(err.contains("node/online") && err.contains("1024"), "{err}");
}
