//! Arm SPE (Statistical Profiling Extension) records, as the hardware writes them into the AUX
//! buffer and `perf record -e arm_spe_0//` copies them into `PERF_RECORD_AUXTRACE` records: a
//! stream of packets (Arm Architecture Reference Manual, "Statistical Profiling Extension",
//! packet format). Each sampled operation is a run of packets ended by a timestamp or an END
//! packet. Every length and index is checked: a damaged stream skips a byte and the record
//! being read, never panics.

use numalens_format::{DataSource, SampleKind};

/// A packet of the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Packet {
    Pad,
    End,
    Timestamp(u64),
    /// Index 0 PC, 1 branch target, 2 data virtual address, 3 data physical address.
    Address {
        index: u8,
        payload: u64,
    },
    /// Index 0 total latency, 1 issue latency, 2 translation latency (cycles).
    Counter {
        index: u8,
        value: u64,
    },
    /// CONTEXTIDR_EL1 (index 0) or CONTEXTIDR_EL2 (1): the kernel writes the thread id there.
    Context {
        index: u8,
        value: u32,
    },
    /// Class 0 other, 1 load/store/atomic, 2 branch; the payload is the subclass.
    OpType {
        class: u8,
        payload: u8,
    },
    Events(u64),
    DataSource(u64),
}

/// The stream is damaged at this byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadPacket;

pub const ADDRESS_PC: u8 = 0;
pub const ADDRESS_DATA_VIRTUAL: u8 = 2;
pub const ADDRESS_DATA_PHYSICAL: u8 = 3;
pub const COUNTER_TOTAL_LATENCY: u8 = 0;
pub const OP_CLASS_LOAD_STORE: u8 = 1;

/// Events packet bits (the architecture's numbering).
pub const EVENT_L1D_ACCESS: u64 = 1 << 2;
pub const EVENT_L1D_REFILL: u64 = 1 << 3;
pub const EVENT_LLC_ACCESS: u64 = 1 << 8;
pub const EVENT_LLC_MISS: u64 = 1 << 9;
pub const EVENT_REMOTE_ACCESS: u64 = 1 << 10;

/// The packet at `at` of `buf` and its length in bytes. `at` matters for the alignment packet,
/// which pads to a boundary of the buffer.
pub fn packet(buf: &[u8], at: usize) -> Result<(Packet, usize), BadPacket> {
    let rest = buf.get(at..).ok_or(BadPacket)?;
    let &h0 = rest.first().ok_or(BadPacket)?;
    match h0 {
        0x00 => return Ok((Packet::Pad, 1)),
        0x01 => return Ok((Packet::End, 1)),
        _ => {}
    }
    // An extended header (0b001000xx) carries two more bits of the index, then the short one.
    let (header, high_index, header_len) = if h0 & 0xfc == 0x20 {
        let &h1 = rest.get(1).ok_or(BadPacket)?;
        if h1 == 0x00 {
            // Alignment: padding up to a boundary of 2^(low bits + 1) bytes.
            let align = 1usize << ((h0 & 0x3) + 1);
            let len = (align - at % align).max(2);
            return Ok((Packet::Pad, len.min(rest.len())));
        }
        (h1, (h0 & 0x3) << 3, 2)
    } else {
        (h0, 0, 1)
    };
    let size = 1usize << ((header >> 4) & 0x3);
    let bytes = rest.get(header_len..header_len + size).ok_or(BadPacket)?;
    let payload = bytes
        .iter()
        .rev()
        .fold(0u64, |v, &b| (v << 8) | u64::from(b));
    let index = high_index | (header & 0x7);
    let p = if header == 0x71 {
        Packet::Timestamp(payload)
    } else if header & 0xcf == 0x42 {
        Packet::Events(payload)
    } else if header & 0xcf == 0x43 {
        Packet::DataSource(payload)
    } else if header & 0xfc == 0x64 {
        Packet::Context {
            index: header & 0x3,
            value: payload as u32,
        }
    } else if header & 0xfc == 0x48 {
        Packet::OpType {
            class: header & 0x3,
            payload: payload as u8,
        }
    } else if header & 0xf8 == 0xb0 {
        Packet::Address { index, payload }
    } else if header & 0xf8 == 0x98 {
        Packet::Counter {
            index,
            value: payload,
        }
    } else {
        return Err(BadPacket);
    };
    Ok((p, header_len + size))
}

/// One sampled operation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SpeRecord {
    pub pc: Option<u64>,
    pub data_virtual: Option<u64>,
    pub data_physical: Option<u64>,
    pub total_latency: Option<u64>,
    pub events: u64,
    pub source: Option<u64>,
    /// Class and subclass of the last operation type packet.
    pub op: Option<(u8, u8)>,
    pub context: Option<u32>,
    /// The generic timer's count when the operation completed.
    pub timestamp: Option<u64>,
}

impl SpeRecord {
    /// Load or store, when the operation is one.
    pub fn kind(&self) -> Option<SampleKind> {
        match self.op {
            // Bit 0 of a load/store subclass: store (or the store part of an atomic).
            Some((OP_CLASS_LOAD_STORE, sub)) if sub & 1 == 1 => Some(SampleKind::Store),
            Some((OP_CLASS_LOAD_STORE, _)) => Some(SampleKind::Load),
            _ => None,
        }
    }

    fn take(&mut self, p: Packet) {
        match p {
            Packet::Address { index, payload } => {
                // Bits 55:0 are the address; the top byte is a tag (data) or NS and EL (PC).
                let address = payload & ((1 << 56) - 1);
                match index {
                    ADDRESS_PC => self.pc = Some(kernel_filled(address)),
                    ADDRESS_DATA_VIRTUAL => self.data_virtual = Some(kernel_filled(address)),
                    ADDRESS_DATA_PHYSICAL => self.data_physical = Some(address),
                    _ => {}
                }
            }
            Packet::Counter { index, value } if index == COUNTER_TOTAL_LATENCY => {
                self.total_latency = Some(value)
            }
            Packet::Context { value, .. } => self.context = Some(value),
            Packet::OpType { class, payload } => self.op = Some((class, payload)),
            Packet::Events(e) => self.events |= e,
            Packet::DataSource(s) => self.source = Some(s),
            _ => {}
        }
    }
}

/// A 56-bit virtual address whose top bits say it is a kernel address gets its top byte back.
fn kernel_filled(address: u64) -> u64 {
    if (address >> 52) & 0xf == 0xf {
        address | 0xff << 56
    } else {
        address
    }
}

/// The records of one AUX buffer, in order; `bad` counts the damaged bytes skipped.
pub struct Records<'a> {
    buf: &'a [u8],
    at: usize,
    pub bad: u64,
}

impl<'a> Records<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf, at: 0, bad: 0 }
    }

    /// Bytes of the buffer read so far: after a record, where it ended.
    pub fn position(&self) -> usize {
        self.at
    }
}

impl Iterator for Records<'_> {
    type Item = SpeRecord;

    fn next(&mut self) -> Option<SpeRecord> {
        let mut record = SpeRecord::default();
        let mut any = false;
        while self.at < self.buf.len() {
            match packet(self.buf, self.at) {
                Err(BadPacket) => {
                    // The record read so far is not trusted: start again after the bad byte.
                    self.at += 1;
                    self.bad += 1;
                    record = SpeRecord::default();
                    any = false;
                }
                Ok((p, len)) => {
                    self.at += len.max(1);
                    match p {
                        Packet::Pad => {}
                        Packet::End => return Some(record),
                        Packet::Timestamp(t) => {
                            record.timestamp = Some(t);
                            return Some(record);
                        }
                        p => {
                            any = true;
                            record.take(p);
                        }
                    }
                }
            }
        }
        // A record the buffer cut short.
        any.then_some(record)
    }
}

/// `PERF_RECORD_TIME_CONV`: how the generic timer's count becomes perf's time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TimeConv {
    pub shift: u16,
    pub mult: u64,
    pub zero: u64,
    pub cycles: u64,
    pub mask: u64,
    /// The counter is narrower than 64 bits and wraps (`cap_user_time_short`).
    pub short: bool,
}

impl TimeConv {
    /// Reads the record's body (after its header).
    pub fn parse(body: &mut super::bytes::Bytes<'_>) -> Option<Self> {
        let shift = body.u64().ok()?;
        let mult = body.u64().ok()?;
        let zero = body.u64().ok()?;
        let mut conv = TimeConv {
            shift: shift.min(63) as u16,
            mult,
            zero,
            ..TimeConv::default()
        };
        // Later kernels' perf adds the wrap-around of a short counter.
        if let (Ok(cycles), Ok(mask), Ok(caps)) = (body.u64(), body.u64(), body.u64()) {
            conv.cycles = cycles;
            conv.mask = mask;
            // cap_user_time_zero is the first byte of the word, cap_user_time_short the second.
            let second = if body.big_endian() {
                caps >> 48
            } else {
                caps >> 8
            };
            conv.short = second & 0xff != 0;
        }
        Some(conv)
    }

    /// perf's time of a timer count.
    pub fn perf_time(&self, count: u64) -> u64 {
        let count = if self.short {
            self.cycles
                .wrapping_add(count.wrapping_sub(self.cycles) & self.mask)
        } else {
            count
        };
        let shift = u32::from(self.shift);
        let quot = count >> shift;
        let rem = count & ((1u64 << shift) - 1);
        let rem_part = (u128::from(rem) * u128::from(self.mult)) >> shift;
        self.zero
            .wrapping_add(quot.wrapping_mul(self.mult))
            .wrapping_add(rem_part as u64)
    }
}

/// Neoverse N1, N2, V1 and V2 (their MIDR part numbers, Arm as implementer) describe where a
/// load's data came from in the data source packet, with one encoding.
pub fn neoverse_data_source(midr: u64) -> bool {
    let implementer = (midr >> 24) & 0xff;
    let part = (midr >> 4) & 0xfff;
    implementer == 0x41 && matches!(part, 0xd0c | 0xd49 | 0xd40 | 0xd4f)
}

/// Where the data of a load or store came from. With a Neoverse data source (`neoverse`), its
/// packet says for loads (stores have none): L1, L2 (its own or a peer core's), the cluster or
/// system cache (`l3`), another chip (`remote-cache`: it does not say whether cache or memory),
/// DRAM (`remote-dram` when the remote-access event is set). Otherwise the events: the last
/// level cache missed (DRAM, local or remote by the remote-access event), hit (`l3`; a remote
/// access that hit is `remote-cache`), or L1 hit.
pub fn data_source(r: &SpeRecord, neoverse: bool) -> DataSource {
    let remote = r.events & EVENT_REMOTE_ACCESS != 0;
    if neoverse {
        if r.kind() == Some(SampleKind::Store) {
            return DataSource::Unknown;
        }
        return match r.source {
            Some(0x0) => DataSource::L1,
            Some(0x8 | 0x9) => DataSource::L2,
            Some(0xa..=0xc) => DataSource::L3,
            Some(0xd) => DataSource::RemoteCache,
            Some(0xe) if remote => DataSource::RemoteDram,
            Some(0xe) => DataSource::LocalDram,
            _ => DataSource::Unknown,
        };
    }
    let e = r.events;
    if e & EVENT_LLC_MISS != 0 {
        if remote {
            DataSource::RemoteDram
        } else {
            DataSource::LocalDram
        }
    } else if remote {
        DataSource::RemoteCache
    } else if e & EVENT_LLC_ACCESS != 0 {
        DataSource::L3
    } else if e & EVENT_L1D_ACCESS != 0 && e & EVENT_L1D_REFILL == 0 {
        DataSource::L1
    } else {
        DataSource::Unknown
    }
}

/// Writing packets, for the tests and the benchmark that lay out SPE streams.
pub mod encode {
    fn short(out: &mut Vec<u8>, header: u8, payload: u64) {
        let size = 1usize << ((header >> 4) & 0x3);
        out.push(header);
        out.extend_from_slice(&payload.to_le_bytes()[..size]);
    }

    /// An address packet (index 0–3; the top byte of `payload` is its tag or NS/EL bits).
    pub fn address(out: &mut Vec<u8>, index: u8, payload: u64) {
        short(out, 0xb0 | (index & 0x7), payload);
    }

    /// A 16-bit counter packet.
    pub fn counter(out: &mut Vec<u8>, index: u8, value: u16) {
        short(out, 0x98 | (index & 0x7), u64::from(value));
    }

    /// A two-byte events packet.
    pub fn events(out: &mut Vec<u8>, bits: u16) {
        short(out, 0x52, u64::from(bits));
    }

    /// A two-byte data source packet.
    pub fn data_source(out: &mut Vec<u8>, source: u16) {
        short(out, 0x53, u64::from(source));
    }

    pub fn op_type(out: &mut Vec<u8>, class: u8, payload: u8) {
        short(out, 0x48 | (class & 0x3), u64::from(payload));
    }

    /// CONTEXTIDR_EL1.
    pub fn context(out: &mut Vec<u8>, value: u32) {
        short(out, 0x64, u64::from(value));
    }

    /// Ends the record.
    pub fn timestamp(out: &mut Vec<u8>, count: u64) {
        short(out, 0x71, count);
    }

    /// PAD packets up to a multiple of 8 bytes (perf's AUXTRACE records are).
    pub fn pad_to_8(out: &mut Vec<u8>) {
        while !out.len().is_multiple_of(8) {
            out.push(0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_load_record_decodes() {
        let mut b = Vec::new();
        encode::address(&mut b, ADDRESS_PC, 0x4000_1234 | 1 << 63);
        encode::op_type(&mut b, OP_CLASS_LOAD_STORE, 0x00);
        encode::events(&mut b, (EVENT_L1D_ACCESS | EVENT_L1D_REFILL) as u16);
        encode::counter(&mut b, COUNTER_TOTAL_LATENCY, 321);
        encode::address(&mut b, ADDRESS_DATA_VIRTUAL, 0xaa00_7fff_0000_1000);
        encode::address(&mut b, ADDRESS_DATA_PHYSICAL, 0x8000_0000_1234_5000);
        encode::data_source(&mut b, 0xe);
        encode::context(&mut b, 4242);
        encode::timestamp(&mut b, 99);
        let r: Vec<SpeRecord> = Records::new(&b).collect();
        assert_eq!(r.len(), 1);
        let r = r[0];
        assert_eq!(r.pc, Some(0x4000_1234));
        assert_eq!(r.data_virtual, Some(0x7fff_0000_1000), "the tag is dropped");
        assert_eq!(r.data_physical, Some(0x1234_5000));
        assert_eq!(r.total_latency, Some(321));
        assert_eq!(r.context, Some(4242));
        assert_eq!(r.timestamp, Some(99));
        assert_eq!(r.kind(), Some(SampleKind::Load));
        assert_eq!(data_source(&r, true), DataSource::LocalDram);
        assert_eq!(data_source(&r, false), DataSource::Unknown);
    }

    #[test]
    fn a_damaged_byte_drops_its_record_only() {
        let mut b = Vec::new();
        encode::op_type(&mut b, OP_CLASS_LOAD_STORE, 0x01);
        b.push(0xff); // no such header
        encode::timestamp(&mut b, 1);
        encode::op_type(&mut b, OP_CLASS_LOAD_STORE, 0x01);
        encode::timestamp(&mut b, 2);
        let mut records = Records::new(&b);
        let got: Vec<SpeRecord> = records.by_ref().collect();
        assert_eq!(records.bad, 1);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].op, None, "what came before the bad byte is dropped");
        assert_eq!(got[1].kind(), Some(SampleKind::Store));
    }

    #[test]
    fn cut_packets_are_bad_not_panics() {
        for len in 0..9 {
            let mut b = Vec::new();
            encode::timestamp(&mut b, u64::MAX);
            let _ = packet(&b[..len], 0);
            let _: Vec<_> = Records::new(&b[..len]).collect();
        }
        for h in 0..=255u8 {
            let _: Vec<_> = Records::new(&[0x20 | (h & 3), h, 1, 2]).collect();
        }
    }

    #[test]
    fn time_conversion_matches_the_formula() {
        let c = TimeConv {
            shift: 10,
            mult: 3 << 10,
            zero: 1000,
            ..TimeConv::default()
        };
        // mult / 2^shift = 3 ns a count.
        assert_eq!(c.perf_time(7), 1000 + 21);
        let wrapping = TimeConv {
            short: true,
            cycles: 0xff0,
            mask: 0xfff,
            ..c
        };
        // A 12-bit counter that wrapped since 0xff0: 0x005 is 0x1005.
        assert_eq!(wrapping.perf_time(0x005), 1000 + 3 * 0x1005);
    }
}
