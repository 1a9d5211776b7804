//! Errors of the topology crate. Every message names what is wrong and what to change.

use std::path::PathBuf;

/// Something went wrong reading, parsing or checking a topology.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TopologyError {
    /// A file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// A sysfs file had content that the kernel does not write.
    #[error("unexpected content in {}: {problem}", path.display())]
    Sysfs { path: PathBuf, problem: String },

    /// The JSON text is malformed or does not match the schema.
    #[error("{origin}: {field}: {message} (line {line}, column {column})")]
    Json {
        origin: String,
        /// Path of the offending field, e.g. `nodes[1].cpus` (`.` for the document itself).
        field: String,
        message: String,
        line: usize,
        column: usize,
    },

    /// The document was written by a newer numalens.
    #[error(
        "{origin}: schema version {found} is newer than the {supported} this numalens reads; \
         upgrade numalens or rewrite the file with `\"schema\": {supported}`"
    )]
    UnsupportedSchema {
        origin: String,
        found: u32,
        supported: u32,
    },

    /// The topology parses but is not consistent.
    #[error("{origin}: {field}: {problem}")]
    Invalid {
        /// The topology's name or the file it came from.
        origin: String,
        /// Path of the offending field, e.g. `distances.values[1][1]`.
        field: String,
        problem: String,
    },

    /// No preset has that name.
    #[error("unknown preset `{name}`{}; known presets: {}", suggestion(.name, .known), .known.join(", "))]
    UnknownPreset { name: String, known: Vec<String> },
}

impl TopologyError {
    /// Replaces the origin of a JSON or validation error (e.g. by the file the topology came from).
    pub fn with_origin(self, new_origin: &str) -> Self {
        match self {
            TopologyError::Invalid { field, problem, .. } => TopologyError::Invalid {
                origin: new_origin.to_string(),
                field,
                problem,
            },
            other => other,
        }
    }
}

/// ` (did you mean `x`?)` for the known name closest to `name`, if any is close enough.
fn suggestion(name: &str, known: &[String]) -> String {
    let wanted = name.to_ascii_lowercase();
    let best = known
        .iter()
        .map(|k| (edit_distance(&wanted, &k.to_ascii_lowercase()), k))
        .min_by_key(|(d, _)| *d);
    match best {
        // Beyond half the name's length the "closest" name is a guess, not a typo fix,
        // unless the typed name is a prefix of a known one (`machine` → `machine-a`).
        // An empty name is a prefix of every name: nothing to suggest from.
        _ if wanted.is_empty() => String::new(),
        Some((d, k)) if d <= wanted.len().max(3) / 2 || k.starts_with(&wanted) => {
            format!(" (did you mean `{k}`?)")
        }
        _ => String::new(),
    }
}

/// Levenshtein distance over chars.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitute = prev[j] + usize::from(ca != *cb);
            cur[j + 1] = substitute.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_distance_counts_edits() {
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("same", "same"), 0);
    }

    #[test]
    fn suggests_only_close_names() {
        let known = vec!["machine-a".to_string(), "altix-4".to_string()];
        assert_eq!(
            suggestion("machin-a", &known),
            " (did you mean `machine-a`?)"
        );
        assert_eq!(suggestion("zzzzzzzzzzzz", &known), "");
        assert_eq!(suggestion("", &known), "");
        assert_eq!(suggestion("  ", &known), "");
    }
}
