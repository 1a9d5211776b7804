//! Linux CPU list syntax (`0-3,8,10-11`), as used by sysfs `cpulist` files and in topology JSON.

use std::fmt::Write;

/// Most CPUs a list may name. Linux builds for at most 8192 (x86 `MAXSMP`); this leaves room
/// for larger machines while bounding what a list of ranges can make us allocate.
pub const MAX_CPUS: usize = 1 << 16;
/// Most NUMA nodes a topology may have: Linux's `MAX_NUMNODES` is at most 1024.
pub const MAX_NODES: usize = 1 << 10;

/// Parses a Linux CPU list (`"0-3,8,10-11"`, empty for none) into sorted, deduplicated ids.
pub fn parse_cpulist(text: &str) -> Result<Vec<u32>, String> {
    parse_list(text, MAX_CPUS, "CPUs")
}

/// Parses a Linux node list (`node/online`, same syntax as a CPU list).
pub fn parse_nodelist(text: &str) -> Result<Vec<u32>, String> {
    parse_list(text, MAX_NODES, "NUMA nodes")
}

/// A range is expanded into one id each, so the ids are counted before any is stored: a list
/// such as `0-4000000000` is an error, not a 16 GB allocation.
fn parse_list(text: &str, max: usize, what: &str) -> Result<Vec<u32>, String> {
    let mut ranges = Vec::new();
    let mut total: u64 = 0;
    for part in text.trim().split(',').filter(|p| !p.trim().is_empty()) {
        let part = part.trim();
        let (lo, hi) = match part.split_once('-') {
            Some((lo, hi)) => (parse_id(lo, part)?, parse_id(hi, part)?),
            None => {
                let id = parse_id(part, part)?;
                (id, id)
            }
        };
        if lo > hi {
            return Err(format!("range `{part}` runs backwards"));
        }
        total += u64::from(hi - lo) + 1;
        if total > max as u64 {
            return Err(format!(
                "`{part}` makes the list name {total} {what}, more {what} than the {max} a Linux \
                 machine can have"
            ));
        }
        ranges.push((lo, hi));
    }
    let mut ids: Vec<u32> = ranges.into_iter().flat_map(|(lo, hi)| lo..=hi).collect();
    ids.sort_unstable();
    ids.dedup();
    Ok(ids)
}

/// How many ids a CPU list names (repeats counted), without storing them; `None` when it is not a
/// CPU list (parsing it says why).
pub fn count_cpulist(text: &str) -> Option<u64> {
    let mut total: u64 = 0;
    for part in text.trim().split(',').filter(|p| !p.trim().is_empty()) {
        let part = part.trim();
        let (lo, hi) = match part.split_once('-') {
            Some((lo, hi)) => (parse_id(lo, part).ok()?, parse_id(hi, part).ok()?),
            None => {
                let id = parse_id(part, part).ok()?;
                (id, id)
            }
        };
        total = total.saturating_add(u64::from(hi.checked_sub(lo)?) + 1);
    }
    Some(total)
}

fn parse_id(text: &str, part: &str) -> Result<u32, String> {
    text.trim()
        .parse()
        .map_err(|_| format!("`{part}` is not a CPU id or range like `0-3`"))
}

/// Formats CPU ids as a compact Linux CPU list (`[0,1,2,3,8]` → `"0-3,8"`).
pub fn format_cpulist(cpus: &[u32]) -> String {
    let mut sorted = cpus.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut out = String::new();
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i];
        let mut end = start;
        while i + 1 < sorted.len() && sorted[i + 1] == end + 1 {
            i += 1;
            end = sorted[i];
        }
        if !out.is_empty() {
            out.push(',');
        }
        if start == end {
            write!(out, "{start}").unwrap();
        } else {
            write!(out, "{start}-{end}").unwrap();
        }
        i += 1;
    }
    out
}

/// Serde adapter: CPU ids are written as a cpulist string and read from a string or an array.
pub mod serde_cpulist {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(cpus: &[u32], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::format_cpulist(cpus))
    }

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Either {
        Text(String),
        Ids(Vec<u32>),
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u32>, D::Error> {
        match Either::deserialize(d).map_err(|_| {
            serde::de::Error::custom("expected a CPU list like \"0-3,8\" or an array of CPU ids")
        })? {
            Either::Text(text) => super::parse_cpulist(&text).map_err(serde::de::Error::custom),
            Either::Ids(mut ids) => {
                if ids.len() > super::MAX_CPUS {
                    return Err(serde::de::Error::custom(format!(
                        "{} CPU ids, more than the {} a Linux machine can have",
                        ids.len(),
                        super::MAX_CPUS
                    )));
                }
                ids.sort_unstable();
                ids.dedup();
                Ok(ids)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ranges_singles_and_empty() {
        assert_eq!(
            parse_cpulist("0-3,8,10-11\n").unwrap(),
            vec![0, 1, 2, 3, 8, 10, 11]
        );
        assert_eq!(parse_cpulist("").unwrap(), Vec::<u32>::new());
        assert!(parse_cpulist("3-1").is_err());
        assert!(parse_cpulist("a").is_err());
    }

    #[test]
    fn formats_compactly() {
        assert_eq!(format_cpulist(&[8, 0, 1, 2, 3, 10, 11]), "0-3,8,10-11");
        assert_eq!(format_cpulist(&[]), "");
    }
}
