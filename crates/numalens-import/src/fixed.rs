//! Samples of a layout with no field of variable size (what `perf mem record` and `perf record
//! -d` write: no call chain, raw data or registers) have every field at the same place: their
//! places are worked out once per event and each sample is read at them, rather than field by
//! field through every bit of `sample_type` (which cost more than the rest of a sample's import).
//! The result is the one [`sample::decode`] gives, and it fails exactly when that does.

use numalens_assemble::perf_sample::bytes::Truncated;
use numalens_assemble::perf_sample::sample::{self, *};

/// Where the fields numalens reads lie in a sample of a fixed layout.
#[derive(Debug, Clone, Copy)]
pub struct FixedLayout {
    size: usize,
    identifier: Option<usize>,
    ip: Option<usize>,
    /// pid, then tid.
    tid: Option<usize>,
    time: Option<usize>,
    addr: Option<usize>,
    id: Option<usize>,
    cpu: Option<usize>,
    period: Option<usize>,
    /// Its place, and whether it is `PERF_SAMPLE_WEIGHT_STRUCT`.
    weight: Option<(usize, bool)>,
    data_src: Option<usize>,
    phys_addr: Option<usize>,
    data_page_size: Option<usize>,
}

/// What the first pass needs of a memory sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    pub pid: u32,
    pub tid: u32,
    pub time: u64,
    /// The data address field, when the layout has one.
    pub addr: Option<u64>,
}

impl FixedLayout {
    /// The places of `layout`'s fields, when it has no field of variable size.
    pub fn new(layout: &Layout) -> Option<FixedLayout> {
        let size = sample::fixed_size(layout)?;
        let t = layout.sample_type;
        let mut at = 0;
        // Each field in the kernel's order takes 8 bytes when present.
        let mut place = |bit: u64| {
            (t & bit != 0).then(|| {
                at += 8;
                at - 8
            })
        };
        let identifier = place(IDENTIFIER);
        let ip = place(IP);
        let tid = place(TID);
        let time = place(TIME);
        let addr = place(ADDR);
        let id = place(ID);
        place(STREAM_ID);
        let cpu = place(CPU);
        let period = place(PERIOD);
        let weight = place(WEIGHT | WEIGHT_STRUCT).map(|w| (w, t & WEIGHT_STRUCT != 0));
        let data_src = place(DATA_SRC);
        place(TRANSACTION);
        let phys_addr = place(PHYS_ADDR);
        place(CGROUP);
        let data_page_size = place(DATA_PAGE_SIZE);
        Some(FixedLayout {
            size,
            identifier,
            ip,
            tid,
            time,
            addr,
            id,
            cpu,
            period,
            weight,
            data_src,
            phys_addr,
            data_page_size,
        })
    }

    /// The fields numalens uses, as [`sample::decode`] gives them.
    pub fn decode<'a>(&self, body: &'a [u8], big_endian: bool) -> Result<Sample<'a>, Truncated> {
        let body = body.get(..self.size).ok_or(Truncated)?;
        let w = Words { body, big_endian };
        let (pid, tid) = w.pair(self.tid);
        Ok(Sample {
            ip: w.u64(self.ip),
            pid,
            tid,
            time: w.u64(self.time),
            addr: w.u64(self.addr),
            id: w.u64(self.id).or(w.u64(self.identifier)),
            cpu: w.pair(self.cpu).0,
            period: w.u64(self.period),
            raw: None,
            weight: self.weight.map(|(at, structured)| w.weight(at, structured)),
            data_src: w.u64(self.data_src),
            phys_addr: w.u64(self.phys_addr),
            data_page_size: w.u64(self.data_page_size),
        })
    }

    /// The thread, time and data address of a sample: what counting it needs.
    pub fn head(&self, body: &[u8], big_endian: bool) -> Result<Head, Truncated> {
        let body = body.get(..self.size).ok_or(Truncated)?;
        let w = Words { body, big_endian };
        let (pid, tid) = w.pair(self.tid);
        Ok(Head {
            pid: pid.unwrap_or(0),
            tid: tid.unwrap_or(0),
            time: w.u64(self.time).unwrap_or(0),
            addr: w.u64(self.addr),
        })
    }
}

/// A sample's body of the layout's size.
struct Words<'a> {
    body: &'a [u8],
    big_endian: bool,
}

impl Words<'_> {
    fn bytes<const N: usize>(&self, at: usize) -> [u8; N] {
        let mut b = [0u8; N];
        b.copy_from_slice(&self.body[at..at + N]);
        b
    }

    fn u32_at(&self, at: usize) -> u32 {
        let b = self.bytes(at);
        if self.big_endian {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        }
    }

    fn u64(&self, at: Option<usize>) -> Option<u64> {
        let b = self.bytes(at?);
        Some(if self.big_endian {
            u64::from_be_bytes(b)
        } else {
            u64::from_le_bytes(b)
        })
    }

    /// Two u32 in one word (pid and tid; cpu and its reserved half).
    fn pair(&self, at: Option<usize>) -> (Option<u32>, Option<u32>) {
        match at {
            Some(at) => (Some(self.u32_at(at)), Some(self.u32_at(at + 4))),
            None => (None, None),
        }
    }

    /// The weight slot: the struct's members lie in the file's byte order as the kernel's union
    /// does (`var1_dw` first on little-endian machines).
    fn weight(&self, at: usize, structured: bool) -> Weight {
        if !structured {
            return Weight::Full(self.u64(Some(at)).unwrap_or(0));
        }
        let u16_at = |at: usize| {
            let b = self.bytes(at);
            if self.big_endian {
                u16::from_be_bytes(b)
            } else {
                u16::from_le_bytes(b)
            }
        };
        if self.big_endian {
            Weight::Struct {
                var3: u16_at(at),
                var2: u16_at(at + 2),
                var1: self.u32_at(at + 4),
            }
        } else {
            Weight::Struct {
                var1: self.u32_at(at),
                var2: u16_at(at + 4),
                var3: u16_at(at + 6),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every field of fixed size, each present or not.
    const FIXED_BITS: [u64; 16] = [
        IDENTIFIER,
        IP,
        TID,
        TIME,
        ADDR,
        ID,
        STREAM_ID,
        CPU,
        PERIOD,
        WEIGHT,
        DATA_SRC,
        TRANSACTION,
        PHYS_ADDR,
        CGROUP,
        DATA_PAGE_SIZE,
        CODE_PAGE_SIZE,
    ];

    /// A layout of the fields whose bits are set in `pick`, with the struct weight when `pick`'s
    /// bit 16 is set.
    fn layout(pick: u32) -> Layout {
        let mut t = 0;
        for (i, bit) in FIXED_BITS.iter().enumerate() {
            if pick & (1 << i) != 0 {
                t |= bit;
            }
        }
        if pick & (1 << 16) != 0 && t & WEIGHT != 0 {
            t = (t & !WEIGHT) | WEIGHT_STRUCT;
        }
        Layout {
            sample_type: t,
            ..Layout::default()
        }
    }

    #[test]
    fn every_fixed_layout_reads_as_the_field_by_field_decoding() {
        // Distinct bytes, so that a field read from the wrong place reads another value.
        let body: Vec<u8> = (0..200u32).map(|i| (i * 37 + 11) as u8).collect();
        let mut layouts = 0;
        // A spread of the 2^17 layouts: every single field, and mixes of them.
        for pick in (0u32..1 << 17).step_by(7).chain((0..17).map(|i| 1 << i)) {
            let layout = layout(pick);
            let fixed = FixedLayout::new(&layout).expect("no field of variable size");
            let size = sample::fixed_size(&layout).unwrap();
            for big_endian in [false, true] {
                for len in [0, size.saturating_sub(1), size, size + 8] {
                    let bytes = &body[..len];
                    let whole = sample::decode(bytes, big_endian, &layout);
                    assert_eq!(fixed.decode(bytes, big_endian), whole, "{layout:?} {len}");
                    let head = fixed.head(bytes, big_endian).ok();
                    let expected = whole.ok().map(|s| Head {
                        pid: s.pid.unwrap_or(0),
                        tid: s.tid.unwrap_or(0),
                        time: s.time.unwrap_or(0),
                        addr: s.addr,
                    });
                    assert_eq!(head, expected);
                }
            }
            layouts += 1;
        }
        assert!(layouts > 18_000);
    }

    #[test]
    fn layouts_with_fields_of_variable_size_are_not_fixed() {
        for bit in [
            READ,
            CALLCHAIN,
            RAW,
            BRANCH_STACK,
            REGS_USER,
            STACK_USER,
            REGS_INTR,
        ] {
            let layout = Layout {
                sample_type: IP | TID | bit,
                ..Layout::default()
            };
            assert!(FixedLayout::new(&layout).is_none());
        }
    }
}
