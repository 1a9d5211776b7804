//! Snapshots of `/proc/PID/maps` taken by the recorder while the program runs: the fallback
//! objects for addresses no tracked object covers (the brk heap of small allocations, anonymous
//! mappings made before the runtime started, file mappings), with the times they were seen.

use std::collections::HashMap;

/// One line of `/proc/PID/maps`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    pub perms: String,
    pub offset: u64,
    /// Path, `[heap]`, `[stack]`, `[vdso]`…, or empty for anonymous memory.
    pub path: String,
}

/// Parses the text of a maps file; malformed lines are skipped.
pub fn parse_maps(text: &str) -> Vec<Mapping> {
    text.lines().filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<Mapping> {
    let mut fields = line.splitn(6, ' ');
    let (range, perms, offset) = (fields.next()?, fields.next()?, fields.next()?);
    let (_dev, _inode) = (fields.next()?, fields.next()?);
    let path = fields.next().unwrap_or("").trim().to_string();
    let (start, end) = range.split_once('-')?;
    Some(Mapping {
        start: u64::from_str_radix(start, 16).ok()?,
        end: u64::from_str_radix(end, 16).ok()?,
        perms: perms.to_string(),
        offset: u64::from_str_radix(offset, 16).ok()?,
        path,
    })
}

/// A mapping with the first and last time (CLOCK_MONOTONIC ns) a snapshot showed it.
#[derive(Debug, Clone)]
pub struct SeenMapping {
    pub pid: u32,
    pub mapping: Mapping,
    pub first_seen_ns: u64,
    pub last_seen_ns: u64,
}

/// Every mapping seen in any snapshot of any process of the recording.
#[derive(Debug, Default)]
pub struct MapsHistory {
    seen: HashMap<(u32, Mapping), (u64, u64)>,
}

impl MapsHistory {
    /// Reads `/proc/PID/maps` now; a process that is gone is skipped silently.
    /// Returns the mappings read (none when the process is gone).
    pub fn snapshot(&mut self, pid: u32, now_ns: u64) -> Vec<Mapping> {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
            return Vec::new();
        };
        self.add(pid, &text, now_ns)
    }

    pub fn add(&mut self, pid: u32, text: &str, now_ns: u64) -> Vec<Mapping> {
        let mappings = parse_maps(text);
        for mapping in &mappings {
            let times = self
                .seen
                .entry((pid, mapping.clone()))
                .or_insert((now_ns, now_ns));
            times.1 = now_ns;
        }
        mappings
    }

    pub fn mappings(&self) -> Vec<SeenMapping> {
        let mut all: Vec<SeenMapping> = self
            .seen
            .iter()
            .map(|((pid, mapping), (first, last))| SeenMapping {
                pid: *pid,
                mapping: mapping.clone(),
                first_seen_ns: *first,
                last_seen_ns: *last,
            })
            .collect();
        all.sort_by_key(|m| (m.pid, m.mapping.start, m.first_seen_ns));
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_maps_lines() {
        let text = "55d0c0a00000-55d0c0a21000 rw-p 00000000 00:00 0                          [heap]\n\
                    7f1c2a000000-7f1c2a200000 rw-p 00000000 00:00 0 \n\
                    7f1c2b000000-7f1c2b1c6000 r-xp 00028000 fd:01 1835 /usr/lib/x86_64-linux-gnu/libc.so.6\n\
                    garbage\n";
        let maps = parse_maps(text);
        assert_eq!(maps.len(), 3);
        assert_eq!(maps[0].path, "[heap]");
        assert_eq!(maps[1].path, "");
        assert_eq!(maps[2].offset, 0x28000);
        assert_eq!(maps[2].path, "/usr/lib/x86_64-linux-gnu/libc.so.6");
    }

    #[test]
    fn history_keeps_first_and_last_sighting() {
        let mut history = MapsHistory::default();
        history.add(7, "1000-2000 rw-p 00000000 00:00 0 [heap]\n", 10);
        history.add(
            7,
            "1000-2000 rw-p 00000000 00:00 0 [heap]\n3000-4000 rw-p 0 00:00 0\n",
            20,
        );
        let seen = history.mappings();
        assert_eq!((seen[0].first_seen_ns, seen[0].last_seen_ns), (10, 20));
        assert_eq!((seen[1].first_seen_ns, seen[1].last_seen_ns), (20, 20));
        history.snapshot(std::process::id(), 30);
        assert!(
            history
                .mappings()
                .iter()
                .any(|m| m.mapping.path == "[stack]")
        );
    }
}
