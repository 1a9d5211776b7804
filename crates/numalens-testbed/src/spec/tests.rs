use std::path::Path;

use super::*;
use crate::qemu::{Channels, qemu_args};
use crate::view::NodeView;

fn node(id: u32, cpus: std::ops::Range<u32>, gib: u64) -> NodeView {
    NodeView {
        id,
        cpus: cpus.collect(),
        memory_bytes: Some(gib << 30),
    }
}

/// Four nodes of 8 CPUs, node 0 and 3 two hops apart (like machine-a).
fn four_nodes() -> TopologyView {
    let d = |i: usize, j: usize| match (i, j) {
        _ if i == j => 10,
        (0, 3) | (3, 0) => 31,
        _ => 21,
    };
    TopologyView {
        name: "four".into(),
        nodes: (0..4).map(|i| node(i, i * 8..i * 8 + 8, 16)).collect(),
        distances: Some((0..4).map(|i| (0..4).map(|j| d(i, j)).collect()).collect()),
    }
}

fn args_of(spec: &GuestSpec) -> Vec<String> {
    let ch = Channels {
        console_log: Path::new("/c"),
        results: Path::new("/r"),
        token: "tok",
    };
    qemu_args(spec, Path::new("/k"), Path::new("/i"), &ch)
}

#[test]
fn one_vcpu_per_node_and_the_note_says_so() {
    let (spec, notes) = GuestSpec::from_view(&four_nodes(), &ScaleOptions::default()).unwrap();
    assert_eq!(spec.vcpus(), 4);
    assert_eq!(spec.nodes[3].cpus, vec![3]);
    assert!(
        notes
            .iter()
            .any(|n| n.contains("CPUs scaled down from 32 to 4")),
        "{notes:?}"
    );
    assert_eq!(spec.memory_mib(), 2048);
    assert!(spec.nodes.iter().all(|n| n.memory_mib == 512));
}

#[test]
fn vcpus_per_node_shrinks_to_the_limit() {
    let scale = ScaleOptions {
        vcpus_per_node: 4,
        max_vcpus: 8,
        ..ScaleOptions::default()
    };
    let (spec, _) = GuestSpec::from_view(&four_nodes(), &scale).unwrap();
    assert_eq!(spec.vcpus(), 8);
    assert_eq!(spec.nodes[1].cpus, vec![2, 3]);
}

#[test]
fn qemu_arguments_carry_nodes_cpus_and_every_distance() {
    let (spec, _) = GuestSpec::from_view(&four_nodes(), &ScaleOptions::default()).unwrap();
    let a = args_of(&spec);
    let joined = a.join(" ");
    assert!(joined.contains("-smp 4,sockets=4,cores=1,threads=1"));
    assert!(joined.contains("-m 2048M"));
    assert!(joined.contains("memory-backend-ram,id=m2,size=512M"));
    assert!(joined.contains("node,memdev=m2,cpus=2,nodeid=2"));
    assert!(joined.contains("dist,src=0,dst=3,val=31"));
    assert!(joined.contains("dist,src=3,dst=0,val=31"));
    assert_eq!(a.iter().filter(|x| x.starts_with("dist,")).count(), 12);
    assert!(joined.contains("file:/r"));
}

#[test]
fn memory_only_node_gets_no_cpus_argument() {
    let mut v = four_nodes();
    v.nodes[3].cpus.clear();
    v.nodes[3].memory_bytes = Some(32 << 30);
    let (spec, _) = GuestSpec::from_view(&v, &ScaleOptions::default()).unwrap();
    let a = args_of(&spec);
    assert!(a.contains(&"node,memdev=m3,nodeid=3".to_string()), "{a:?}");
    assert_eq!(spec.vcpus(), 3);
    // 16:16:16:32 GiB split of 2048 MiB, aligned to 64 MiB.
    let mem: Vec<u64> = spec.nodes.iter().map(|n| n.memory_mib).collect();
    assert_eq!(mem, vec![384, 384, 384, 768]);
    assert!(
        spec.expected_sysfs()
            .contains("node 3 cpus  distance 31 21 21 10")
    );
}

#[test]
fn sparse_ids_are_renumbered_and_noted() {
    let mut v = four_nodes();
    for (n, id) in v.nodes.iter_mut().zip([0, 2, 5, 7]) {
        n.id = id;
    }
    let (spec, notes) = GuestSpec::from_view(&v, &ScaleOptions::default()).unwrap();
    assert_eq!(spec.nodes[3].id, 3);
    assert_eq!(spec.nodes[3].source_id, 7);
    assert!(notes.iter().any(|n| n.contains("renumbered")));
}

#[test]
fn inexpressible_topologies_are_clear_errors() {
    let scale = ScaleOptions::default();
    let mut nine = four_nodes();
    nine.nodes = (0..9).map(|i| node(i, i..i + 1, 1)).collect();
    nine.distances = None;
    let e = GuestSpec::from_view(&nine, &scale).unwrap_err().to_string();
    assert!(e.contains("at most 8"), "{e}");

    let mut bad = four_nodes();
    bad.distances.as_mut().unwrap()[0][1] = 5;
    let e = GuestSpec::from_view(&bad, &scale).unwrap_err().to_string();
    assert!(e.contains("distance 5"), "{e}");

    let mut no_cpus = four_nodes();
    no_cpus.nodes.iter_mut().for_each(|n| n.cpus.clear());
    assert!(GuestSpec::from_view(&no_cpus, &scale).is_err());

    let tiny = ScaleOptions {
        memory_mib: 256,
        ..ScaleOptions::default()
    };
    let e = GuestSpec::from_view(&four_nodes(), &tiny)
        .unwrap_err()
        .to_string();
    assert!(e.contains("256 MiB"), "{e}");
}

#[test]
fn expected_sysfs_lists_every_node() {
    let (spec, _) = GuestSpec::from_view(&four_nodes(), &ScaleOptions::default()).unwrap();
    let text = spec.expected_sysfs();
    assert_eq!(
        text.lines().next().unwrap(),
        "node 0 cpus 0 distance 10 21 21 31"
    );
    assert_eq!(text.lines().count(), 4);
}

#[test]
fn kernel_settings_reach_the_command_line_and_init() {
    let (mut spec, _) = GuestSpec::from_view(&four_nodes(), &ScaleOptions::default()).unwrap();
    spec.thp = Thp::Always;
    spec.fast_balancing();
    let cmdline = crate::qemu::kernel_cmdline(&spec, "tok");
    assert!(cmdline.contains("transparent_hugepage=always"));
    assert!(cmdline.contains("numa_balancing=enable"));
    assert!(cmdline.contains("nltb.token=tok"));
    let init = crate::guest::init_script(&spec);
    assert!(init.contains("set_knob /proc/sys/kernel/numa_balancing 1"));
    assert!(init.contains("set_knob /sys/kernel/debug/sched/numa_balancing/scan_delay_ms 0"));
    assert!(init.contains("nltb"));
}
