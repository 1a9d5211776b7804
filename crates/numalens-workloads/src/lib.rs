//! The ground-truth workloads of numalens: nine small C programs, one per placement pattern of
//! `docs/FINDINGS.md`, each with a manifest (`workloads/<name>.toml`) stating what an exact
//! instrumentation must count (reads and writes per object and logical thread, the first
//! toucher of each page) and the complete list of findings the analysis must report.
//!
//! The sources and manifests are embedded, so `numalens demo` and the tests can build a
//! workload anywhere with any compiler command.

mod build;
mod error;
mod expect;
mod formula;
mod manifest;
mod vocabulary;

pub use build::{build, marker_line, parse_checksum};
pub use error::{Error, Result};
pub use expect::{ExpectedObject, PAGE_SIZE, args, expected, resolve_args};
pub use formula::Formula;
pub use manifest::{Constraint, Finding, Manifest, Object, ObjectKind};
pub use vocabulary::{Pattern, patterns};

/// One embedded workload.
#[derive(Debug)]
pub struct Workload {
    pub name: &'static str,
    /// The C source.
    pub source: &'static str,
    /// The manifest's TOML text.
    pub manifest_text: &'static str,
}

impl Workload {
    /// The parsed and validated manifest.
    pub fn manifest(&self) -> Result<Manifest> {
        Manifest::parse(self.name, self.manifest_text)
    }

    /// The line of the `/* @object NAME */` marker in the source.
    pub fn marker_line(&self, object: &str) -> Result<u32> {
        marker_line(self.name, self.source, object)
    }
}

/// Headers the sources include, written beside each source when building.
pub const HEADERS: &[(&str, &str)] = &[
    ("wl.h", include_str!("../../../workloads/wl.h")),
    (
        "wl_threads.h",
        include_str!("../../../workloads/wl_threads.h"),
    ),
];

macro_rules! workloads {
    ($($name:literal),* $(,)?) => {
        /// Every workload, in the order of `docs/FINDINGS.md` (the ideal one first).
        pub const WORKLOADS: &[Workload] = &[$(Workload {
            name: $name,
            source: include_str!(concat!("../../../workloads/", $name, ".c")),
            manifest_text: include_str!(concat!("../../../workloads/", $name, ".toml")),
        }),*];
    };
}

workloads!(
    "private-blocks",
    "master-init",
    "shared-readonly",
    "shared-hot-rw",
    "hotspot",
    "stencil",
    "phases",
    "false-sharing",
    "many-small",
);

/// The workload named `name`.
pub fn find(name: &str) -> Result<&'static Workload> {
    WORKLOADS
        .iter()
        .find(|w| w.name == name)
        .ok_or_else(|| Error::UnknownWorkload {
            name: name.into(),
            known: WORKLOADS
                .iter()
                .map(|w| w.name)
                .collect::<Vec<_>>()
                .join(", "),
        })
}
