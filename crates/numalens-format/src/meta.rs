//! `meta.json`: everything about a recording that is not a table row.

use std::collections::BTreeMap;
use std::path::Path;

use numalens_topology::Topology;
use serde::{Deserialize, Serialize};

use crate::error::{FormatError, Result};

mod check;

/// Major version of the profile format. A reader rejects profiles with a larger major version;
/// a newer minor version only adds tables, columns or fields, which older readers ignore.
pub const FORMAT_MAJOR: u32 = 1;
/// Minor version of the profile format written by this crate.
pub const FORMAT_MINOR: u32 = 3;
/// Version of the numalens crates writing the profile.
pub const TOOL_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Contents of `meta.json`. Unknown fields are ignored so that newer minor versions stay readable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Meta {
    /// `"MAJOR.MINOR"` of the profile format.
    pub format_version: String,
    pub numalens_version: String,
    /// The profiled command line, program first.
    pub command: Vec<String>,
    /// Wall-clock start and end of the recording, nanoseconds since the Unix epoch.
    pub start_unix_ns: u64,
    #[serde(default)]
    pub end_unix_ns: Option<u64>,
    /// The clock that table timestamps (`time_ns`, `*_ns` columns) count from.
    pub clock: Clock,
    pub host: Host,
    pub backend: Backend,
    /// The machine the profile was recorded on.
    #[serde(default)]
    pub topology: Option<Topology>,
    /// Base page size of the recording machine, in bytes.
    pub page_size: u64,
    /// State of the kernel's automatic NUMA balancing during the recording, when known.
    #[serde(default)]
    pub numa_balancing: Option<NumaBalancing>,
    /// Samples the kernel or the runtime reported as lost (ring-buffer overruns).
    #[serde(default)]
    pub lost_samples: u64,
    pub completeness: Completeness,
    /// Measured cost of recording, when it was measured.
    #[serde(default)]
    pub overhead: Option<Overhead>,
    /// Row count of each table, filled in when the writer finishes.
    #[serde(default)]
    pub tables: BTreeMap<String, TableInfo>,
}

/// Which clock timestamps are relative to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Clock {
    /// Name of the clock, e.g. `CLOCK_MONOTONIC`.
    pub name: String,
    /// Value of that clock, in ns, at the moment `time_ns = 0`.
    pub origin_ns: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Host {
    pub hostname: String,
    /// Kernel release (`uname -r`).
    pub kernel: String,
    pub arch: String,
}

/// Where the samples come from and with which settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Backend {
    /// `faults`, `inst`, `pmu`, or `synthetic` for generated test data.
    pub name: String,
    /// Backend-specific settings (sample period, event names, …).
    #[serde(default)]
    pub settings: BTreeMap<String, serde_json::Value>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NumaBalancing {
    /// `kernel.numa_balancing` (0 off, 1 on, 2 memory tiering).
    pub mode: u32,
    /// Scan tunables by name (`scan_delay_ms`, …) as the kernel printed them.
    #[serde(default)]
    pub tunables: BTreeMap<String, String>,
}

/// Whether the profile holds the whole run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Completeness {
    /// True only when the program ran to its end and every table was finished.
    pub complete: bool,
    /// How the program ended, when it did.
    #[serde(default)]
    pub exit: Option<ProgramExit>,
    /// Why the profile is incomplete, in words (empty when complete).
    #[serde(default)]
    pub reasons: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgramExit {
    #[serde(default)]
    pub code: Option<i32>,
    #[serde(default)]
    pub signal: Option<i32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Overhead {
    /// Run time with recording divided by run time without (1.0 = free).
    #[serde(default)]
    pub slowdown: Option<f64>,
    /// CPU seconds spent by the recorder process itself.
    #[serde(default)]
    pub recorder_cpu_s: Option<f64>,
    /// CPU seconds the recorder spent while the program ran (draining samples, maps snapshots,
    /// page scans): the steady cost, without start-up and writing the profile. Since 1.1.
    #[serde(default)]
    pub running_cpu_s: Option<f64>,
    /// Wall seconds the program ran under the recorder. Since 1.1.
    #[serde(default)]
    pub program_wall_s: Option<f64>,
    /// Wall seconds spent writing the profile after the program ended. Since 1.1.
    #[serde(default)]
    pub writing_wall_s: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableInfo {
    pub rows: u64,
}

impl Meta {
    /// A meta for a recording that starts now, marked incomplete until the writer finishes.
    pub fn new(command: Vec<String>, backend: Backend, host: Host, clock: Clock) -> Self {
        Meta {
            format_version: format!("{FORMAT_MAJOR}.{FORMAT_MINOR}"),
            numalens_version: TOOL_VERSION.to_string(),
            command,
            start_unix_ns: unix_now_ns(),
            end_unix_ns: None,
            clock,
            host,
            backend,
            topology: None,
            page_size: 4096,
            numa_balancing: None,
            lost_samples: 0,
            completeness: Completeness {
                complete: false,
                exit: None,
                reasons: vec!["recording in progress or interrupted".to_string()],
            },
            overhead: None,
            tables: BTreeMap::new(),
        }
    }

    /// True for the `meta.json` a recording starts with: no table was ever finished (a finished
    /// or abandoned writer lists every table it wrote in `tables`).
    pub fn is_unfinished(&self) -> bool {
        !self.completeness.complete && self.tables.is_empty()
    }

    /// Reads and checks `meta.json`; rejects a newer major format version naming both versions.
    pub fn read(path: &Path) -> Result<Meta> {
        let text = std::fs::read_to_string(path).map_err(|e| FormatError::io(path, e))?;
        Meta::from_json_str(&text, path)
    }

    /// Parses and checks the text of a `meta.json`; `path` names it in errors.
    pub fn from_json_str(text: &str, path: &Path) -> Result<Meta> {
        let value: serde_json::Value = serde_json::from_str(text).map_err(|e| meta_err(path, e))?;
        check_version(path, &value)?;
        if let Some(topology) = value.get("topology") {
            // Before the topology's CPU lists are expanded into ids.
            numalens_topology::check_cpu_lists(topology, "").map_err(|e| {
                let problem = match e {
                    numalens_topology::TopologyError::Invalid { field, problem, .. } => {
                        format!("field `topology.{field}`: {problem}")
                    }
                    other => format!("field `topology`: {other}"),
                };
                FormatError::Meta {
                    path: path.to_path_buf(),
                    problem,
                }
            })?;
        }
        let meta: Meta =
            serde_path_to_error::deserialize(value).map_err(|e| FormatError::Meta {
                path: path.to_path_buf(),
                problem: format!("field `{}`: {}", e.path(), e.inner()),
            })?;
        meta.check().map_err(|(field, problem)| FormatError::Meta {
            path: path.to_path_buf(),
            problem: format!("field `{field}`: {problem}"),
        })?;
        Ok(meta)
    }

    /// Writes `meta.json` atomically (temporary file, then rename), so a reader never sees half.
    pub fn write(&self, path: &Path) -> Result<()> {
        let tmp = path.with_extension("json.tmp");
        let text = serde_json::to_string_pretty(self).expect("meta serialises");
        std::fs::write(&tmp, text + "\n").map_err(|e| FormatError::io(&tmp, e))?;
        std::fs::rename(&tmp, path).map_err(|e| FormatError::io(path, e))
    }
}

fn meta_err(path: &Path, e: serde_json::Error) -> FormatError {
    FormatError::Meta {
        path: path.to_path_buf(),
        problem: format!("not valid JSON ({e}); the file is corrupted or truncated"),
    }
}

fn check_version(path: &Path, value: &serde_json::Value) -> Result<()> {
    let Some(found) = value.get("format_version").and_then(|v| v.as_str()) else {
        return Err(FormatError::Meta {
            path: path.to_path_buf(),
            problem: "field `format_version` is missing; not a numalens profile".into(),
        });
    };
    let major = found.split('.').next().and_then(|m| m.parse::<u32>().ok());
    match major {
        Some(major) if major > FORMAT_MAJOR => Err(FormatError::NewerVersion {
            path: path.to_path_buf(),
            found: found.to_string(),
            supported: FORMAT_MAJOR,
            tool: TOOL_VERSION,
        }),
        Some(major) if major >= 1 => Ok(()),
        _ => Err(FormatError::Meta {
            path: path.to_path_buf(),
            problem: format!("field `format_version`: `{found}` is not a version like `1.0`"),
        }),
    }
}

/// Nanoseconds since the Unix epoch, now.
pub fn unix_now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}
