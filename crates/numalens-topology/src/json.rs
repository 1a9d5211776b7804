//! Reading and writing topology JSON documents (schema in `docs/TOPOLOGY.md`).

use std::path::Path;

use serde::Deserialize;

use crate::cpulist::{MAX_CPUS, count_cpulist};
use crate::{TOPOLOGY_SCHEMA_VERSION, Topology, TopologyError};

/// Parses and validates a topology JSON document. `origin` (a file name, `<stdin>`) prefixes
/// error messages.
pub fn from_json_str(text: &str, origin: &str) -> Result<Topology, TopologyError> {
    check_schema_version(text, origin)?;
    if let Ok(value) = serde_json::from_str::<serde_json::Value>(text) {
        check_cpu_lists(&value, origin)?;
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let topology: Topology = serde_path_to_error::deserialize(&mut de)
        .map_err(|e| json_error(origin, e.path().to_string(), e.inner()))?;
    // Trailing garbage after the document is an error too.
    de.end()
        .map_err(|e| json_error(origin, ".".to_string(), &e))?;
    topology.validate().map_err(|e| e.with_origin(origin))?;
    Ok(topology)
}

/// Reads, parses and validates a topology JSON file.
pub fn load_json_file(path: &Path) -> Result<Topology, TopologyError> {
    let text = std::fs::read_to_string(path).map_err(|source| TopologyError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    from_json_str(&text, &path.display().to_string())
}

impl Topology {
    /// The topology as an indented JSON document (the format [`from_json_str`] reads).
    pub fn to_json_pretty(&self) -> String {
        // The model has only string keys and plain values: serialisation cannot fail.
        serde_json::to_string_pretty(self).expect("a Topology always serialises")
    }
}

/// Each CPU list is bounded when it is parsed, but every node's list is parsed on its own: the
/// lists of a document are counted together first, without expanding them, so that a few hundred
/// nodes with large lists cannot make the parser allocate gigabytes. `value` is a topology
/// document (also as embedded in a profile's `meta.json`).
pub fn check_cpu_lists(value: &serde_json::Value, origin: &str) -> Result<(), TopologyError> {
    let Some(nodes) = value.get("nodes").and_then(|n| n.as_array()) else {
        return Ok(());
    };
    let mut total: u64 = 0;
    for (i, node) in nodes.iter().enumerate() {
        let count = match node.get("cpus") {
            Some(serde_json::Value::String(text)) => count_cpulist(text).unwrap_or(0),
            Some(serde_json::Value::Array(ids)) => ids.len() as u64,
            _ => 0,
        };
        if count > MAX_CPUS as u64 {
            // Parsing that list refuses it, naming the range that is too large.
            return Ok(());
        }
        total = total.saturating_add(count);
        if total > MAX_CPUS as u64 {
            return Err(TopologyError::Invalid {
                origin: origin.to_string(),
                field: format!("nodes[{i}].cpus"),
                problem: format!(
                    "the CPU lists up to this one name {total} CPUs, more than the {MAX_CPUS} a \
                     Linux machine can have"
                ),
            });
        }
    }
    Ok(())
}

/// A newer schema may add fields that the strict parse would reject with a confusing
/// "unknown field" message; look at the version first so the user is told to upgrade instead.
fn check_schema_version(text: &str, origin: &str) -> Result<(), TopologyError> {
    #[derive(Deserialize)]
    struct Probe {
        schema: Option<u32>,
    }
    if let Ok(Probe {
        schema: Some(found),
    }) = serde_json::from_str::<Probe>(text)
        && found > TOPOLOGY_SCHEMA_VERSION
    {
        return Err(TopologyError::UnsupportedSchema {
            origin: origin.to_string(),
            found,
            supported: TOPOLOGY_SCHEMA_VERSION,
        });
    }
    Ok(())
}

fn json_error(origin: &str, field: String, err: &serde_json::Error) -> TopologyError {
    // serde_json appends " at line L column C" to its messages; we report the position separately.
    let full = err.to_string();
    let suffix = format!(" at line {} column {}", err.line(), err.column());
    let message = full.strip_suffix(&suffix).unwrap_or(&full).to_string();
    TopologyError::Json {
        origin: origin.to_string(),
        field,
        message,
        line: err.line(),
        column: err.column(),
    }
}
