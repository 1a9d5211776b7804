//! What `record_probe` (tests/vm/progs/record_probe.c) says about its own run: its threads, the
//! object it allocated, and the address blocks each thread touched. This is the ground truth the
//! profile is compared with.

use std::fmt;

/// One thread of the probe, as it printed itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeThread {
    /// `0`, `1`, … (first-touch) or `writer` / `reader` (balancing).
    pub role: String,
    /// Logical id the profile's threads table must give it (creation order, main thread 0).
    pub logical_id: u32,
    pub tid: u32,
    /// Node it was pinned to, and the CPU.
    pub node: u32,
    pub cpu: u32,
}

/// Which array a block belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Array {
    Heap,
    Static,
}

impl fmt::Display for Array {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Array::Heap => "heap",
            Array::Static => "static",
        })
    }
}

/// Address range `[start, start + size)` touched by the thread with the same index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Block {
    pub array: Array,
    pub index: usize,
    pub start: u64,
    pub size: u64,
}

impl Block {
    pub fn end(&self) -> u64 {
        self.start + self.size
    }
}

/// The balancing reader's own last `move_pages` count.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Moved {
    pub on_reader_node: u64,
    pub pages: u64,
    pub seconds: f64,
}

/// Everything the probe printed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProbeOutput {
    pub threads: Vec<ProbeThread>,
    /// The pointer malloc returned and the size asked for.
    pub heap_object: Option<(u64, u64)>,
    pub blocks: Vec<Block>,
    pub moved: Option<Moved>,
}

impl ProbeOutput {
    /// Parses the probe's stdout; an unknown or malformed line is an error naming it, since
    /// checking a profile against a half-read layout would prove nothing.
    pub fn parse(text: &str) -> Result<ProbeOutput, String> {
        let mut out = ProbeOutput::default();
        for (n, line) in text.lines().enumerate() {
            let words: Vec<&str> = line.split_whitespace().collect();
            let bad = || format!("probe output line {}: cannot read {line:?}", n + 1);
            match words.as_slice() {
                [] => {}
                ["thread", role, logical, tid, node, cpu] => out.threads.push(ProbeThread {
                    role: role.to_string(),
                    logical_id: number(logical).ok_or_else(bad)?,
                    tid: number(tid).ok_or_else(bad)?,
                    node: number(node).ok_or_else(bad)?,
                    cpu: number(cpu).ok_or_else(bad)?,
                }),
                ["object", "heap", start, size] => {
                    out.heap_object = Some((
                        address(start).ok_or_else(bad)?,
                        number(size).ok_or_else(bad)?,
                    ));
                }
                ["block", array, index, start, size] => out.blocks.push(Block {
                    array: match *array {
                        "heap" => Array::Heap,
                        "static" => Array::Static,
                        _ => return Err(bad()),
                    },
                    index: number(index).ok_or_else(bad)?,
                    start: address(start).ok_or_else(bad)?,
                    size: number(size).ok_or_else(bad)?,
                }),
                ["moved", on, pages, seconds] => {
                    out.moved = Some(Moved {
                        on_reader_node: number(on).ok_or_else(bad)?,
                        pages: number(pages).ok_or_else(bad)?,
                        seconds: seconds.parse().map_err(|_| bad())?,
                    })
                }
                _ => return Err(bad()),
            }
        }
        if out.threads.is_empty() || out.blocks.is_empty() || out.heap_object.is_none() {
            return Err(
                "probe output has no thread, block or heap object line: did it run?".into(),
            );
        }
        Ok(out)
    }

    pub fn thread(&self, role: &str) -> Option<&ProbeThread> {
        self.threads.iter().find(|t| t.role == role)
    }
}

fn number<T: std::str::FromStr>(word: &str) -> Option<T> {
    word.parse().ok()
}

/// `%p` output: `0x7f…`.
fn address(word: &str) -> Option<u64> {
    u64::from_str_radix(word.strip_prefix("0x")?, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_first_touch_output() {
        let text = "object heap 0x7fb78e865010 35651584\n\
                    thread 0 1 135 0 0\n\
                    block heap 0 0x7fb78ea00000 8388608\n\
                    block static 0 0x56156e200000 2097152\n";
        let p = ProbeOutput::parse(text).unwrap();
        assert_eq!(p.heap_object, Some((0x7fb7_8e86_5010, 35_651_584)));
        assert_eq!(p.thread("0").unwrap().tid, 135);
        assert_eq!(p.blocks[1].array, Array::Static);
        assert_eq!(p.blocks[0].end(), 0x7fb7_8ea0_0000 + (8 << 20));
    }

    #[test]
    fn reads_balancing_output() {
        let text = "object heap 0x10 67108864\nthread writer 1 7 0 0\nthread reader 2 8 3 3\n\
                    block heap 0 0x200000 67108864\nmoved 15000 16384 2.50\n";
        let p = ProbeOutput::parse(text).unwrap();
        assert_eq!(p.thread("reader").unwrap().node, 3);
        assert_eq!(p.moved.unwrap().pages, 16384);
    }

    #[test]
    fn malformed_or_empty_output_is_an_error() {
        let e = ProbeOutput::parse("thread 0 one 2 3 4\n").unwrap_err();
        assert!(e.contains("line 1"), "{e}");
        assert!(ProbeOutput::parse("Segmentation fault\n").is_err());
        assert!(ProbeOutput::parse("").unwrap_err().contains("did it run"));
    }
}
