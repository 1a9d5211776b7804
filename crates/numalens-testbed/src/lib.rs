//! The multi-node NUMA test bed of numalens.
//!
//! Development machines and CI have a single NUMA node, so multi-node behaviour (`move_pages`,
//! `mbind`, first-touch placement, the kernel's NUMA balancing) is tested in a QEMU guest whose
//! firmware tables give a real Linux kernel 2–8 nodes with SLIT distances taken from a numalens
//! topology. Emulation gives no latency difference between nodes: the test bed checks placement,
//! not speed.
//!
//! The pieces:
//! - [`GuestSpec`]: the guest's nodes, vCPUs, memory and kernel settings, scaled from a topology;
//! - [`host`]: finds or installs QEMU and busybox, fetches and caches a Debian kernel;
//! - [`initramfs`]: packs host binaries with their shared-library closure into a cpio archive;
//! - [`framing`]: the line protocol the guest uses to send files and its exit status back;
//! - [`Guest`]: boots the guest, runs one scenario script and returns a [`GuestOutcome`];
//! - [`check`]: host-side checks of profiles that `numalens record` wrote in a guest.
//!
//! ```no_run
//! use numalens_testbed::{Guest, GuestSpec, ScaleOptions, Scenario, Thp};
//! # fn topology() -> numalens_topology::Topology { unimplemented!() }
//! let (mut spec, notes) = GuestSpec::from_topology(&topology(), &ScaleOptions::default()).unwrap();
//! spec.thp = Thp::Never;
//! for note in &notes { eprintln!("note: {note}"); }
//! let scenario = Scenario::from_script("numactl_like_check", "cat /proc/self/numa_maps > $OUT/m");
//! let outcome = Guest::new(spec).run(&scenario).unwrap();
//! assert_eq!(outcome.exit_status, 0);
//! ```

pub mod check;
pub mod error;
pub mod framing;
pub mod guest;
pub mod host;
pub mod initramfs;
pub mod kernel;
pub mod placement;
pub mod qemu;
pub mod spec;
pub mod view;

pub use error::Error;
pub use guest::{Guest, GuestOutcome, Scenario};
pub use spec::{GuestNode, GuestSpec, ScaleOptions, Thp};
pub use view::TopologyView;
