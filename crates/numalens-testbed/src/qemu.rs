//! The QEMU command line for a [`GuestSpec`].

use std::path::Path;

use numalens_topology::cpulist::format_cpulist;

use crate::spec::GuestSpec;

pub const QEMU: &str = "qemu-system-x86_64";

/// Where the guest's two serial ports go on the host.
#[derive(Debug, Clone)]
pub struct Channels<'a> {
    /// ttyS0: kernel console and scenario output.
    pub console_log: &'a Path,
    /// ttyS1: the framed result channel; nothing else writes there, so kernel messages cannot
    /// break a frame (the parser still tolerates noise).
    pub results: &'a Path,
    /// This run's token for the result frames. It goes on the kernel command line rather than
    /// into the initramfs, so that archives stay identical across runs and can be cached.
    pub token: &'a str,
}

/// Kernel command line. Messages stay on the console for the failure tail, but `quiet` keeps
/// boot output short, which matters on an emulated UART. `cryptomgr.notests` skips the
/// crypto self-tests: they test nothing of ours, take seconds under emulation, and are where
/// emulated boots were seen to hang (a soft lockup in `cryptomgr_test`).
pub fn kernel_cmdline(spec: &GuestSpec, token: &str) -> String {
    let balancing = if spec.numa_balancing == 0 {
        "disable"
    } else {
        "enable"
    };
    format!(
        "console=ttyS0 quiet panic=-1 cryptomgr.notests=1 transparent_hugepage={} \
         numa_balancing={balancing} rdinit=/init nltb.token={token}",
        spec.thp.sysfs_value()
    )
}

/// Arguments after the program name.
pub fn qemu_args(spec: &GuestSpec, kernel: &Path, initrd: &Path, ch: &Channels) -> Vec<String> {
    let n = spec.vcpus();
    let mut a: Vec<String> = vec![
        "-M".into(),
        "q35".into(),
        "-accel".into(),
        "tcg".into(),
        "-cpu".into(),
        "max".into(),
        // One socket per vCPU: each node then owns whole packages, as on the real machines,
        // and the kernel does not warn about LLC siblings on different nodes.
        "-smp".into(),
        format!("{n},sockets={n},cores=1,threads=1"),
        "-m".into(),
        format!("{}M", spec.memory_mib()),
        "-nodefaults".into(),
        "-display".into(),
        "none".into(),
        "-monitor".into(),
        "none".into(),
        // Reboot and panic both end QEMU instead of looping.
        "-no-reboot".into(),
        "-kernel".into(),
        kernel.display().to_string(),
        "-initrd".into(),
        initrd.display().to_string(),
        "-append".into(),
        kernel_cmdline(spec, ch.token),
        "-serial".into(),
        format!("file:{}", ch.console_log.display()),
        "-serial".into(),
        format!("file:{}", ch.results.display()),
    ];
    for node in &spec.nodes {
        a.push("-object".into());
        a.push(format!(
            "memory-backend-ram,id=m{},size={}M",
            node.id, node.memory_mib
        ));
        a.push("-numa".into());
        // A memory-only node is a node without `cpus=`.
        let cpus = if node.cpus.is_empty() {
            String::new()
        } else {
            format!(",cpus={}", format_cpulist(&node.cpus))
        };
        a.push(format!("node,memdev=m{0}{cpus},nodeid={0}", node.id));
    }
    // QEMU wants every off-diagonal pair given (it mirrors only when one direction is missing).
    for (i, src) in spec.nodes.iter().enumerate() {
        for (j, dst) in spec.nodes.iter().enumerate() {
            if i != j {
                a.push("-numa".into());
                a.push(format!(
                    "dist,src={},dst={},val={}",
                    src.id, dst.id, spec.distances[i][j]
                ));
            }
        }
    }
    a
}

/// A shell-quoted command line, written next to the results so a run can be repeated by hand.
pub fn shell_command(args: &[String]) -> String {
    let mut s = String::from(QEMU);
    for arg in args {
        s.push(' ');
        if arg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || ",.=_-/:+".contains(c))
        {
            s.push_str(arg);
        } else {
            s.push('\'');
            s.push_str(&arg.replace('\'', r"'\''"));
            s.push('\'');
        }
    }
    s
}
