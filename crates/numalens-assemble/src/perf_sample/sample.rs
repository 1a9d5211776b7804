//! The body of a `PERF_RECORD_SAMPLE`, decoded field by field in the order the kernel writes
//! them (`perf_output_sample` in kernel/events/core.c), for any `sample_type`.

use super::bytes::{Bytes, Truncated};

pub const IP: u64 = 1 << 0;
pub const TID: u64 = 1 << 1;
pub const TIME: u64 = 1 << 2;
pub const ADDR: u64 = 1 << 3;
pub const READ: u64 = 1 << 4;
pub const CALLCHAIN: u64 = 1 << 5;
pub const ID: u64 = 1 << 6;
pub const CPU: u64 = 1 << 7;
pub const PERIOD: u64 = 1 << 8;
pub const STREAM_ID: u64 = 1 << 9;
pub const RAW: u64 = 1 << 10;
pub const BRANCH_STACK: u64 = 1 << 11;
pub const REGS_USER: u64 = 1 << 12;
pub const STACK_USER: u64 = 1 << 13;
pub const WEIGHT: u64 = 1 << 14;
pub const DATA_SRC: u64 = 1 << 15;
pub const IDENTIFIER: u64 = 1 << 16;
pub const TRANSACTION: u64 = 1 << 17;
pub const REGS_INTR: u64 = 1 << 18;
pub const PHYS_ADDR: u64 = 1 << 19;
pub const AUX: u64 = 1 << 20;
pub const CGROUP: u64 = 1 << 21;
pub const DATA_PAGE_SIZE: u64 = 1 << 22;
pub const CODE_PAGE_SIZE: u64 = 1 << 23;
pub const WEIGHT_STRUCT: u64 = 1 << 24;

const READ_TOTAL_TIME_ENABLED: u64 = 1 << 0;
const READ_TOTAL_TIME_RUNNING: u64 = 1 << 1;
const READ_ID: u64 = 1 << 2;
const READ_GROUP: u64 = 1 << 3;
const READ_LOST: u64 = 1 << 4;

const BRANCH_HW_INDEX: u64 = 1 << 17;
const BRANCH_COUNTERS: u64 = 1 << 19;

/// What of an event's attributes decides the layout of its samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Layout {
    pub sample_type: u64,
    pub read_format: u64,
    pub branch_sample_type: u64,
    pub sample_regs_user: u64,
    pub sample_regs_intr: u64,
}

/// The weight field: one number (`PERF_SAMPLE_WEIGHT`), or three (`PERF_SAMPLE_WEIGHT_STRUCT`:
/// on Intel the access's latency in `var1`, the instruction's in `var2`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Weight {
    Full(u64),
    Struct { var1: u32, var2: u16, var3: u16 },
}

impl Weight {
    /// The access latency in cycles.
    pub fn latency(self) -> u64 {
        match self {
            Weight::Full(w) => w,
            Weight::Struct { var1, .. } => u64::from(var1),
        }
    }
}

/// The fields numalens uses from a sample; the others are stepped over.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sample<'a> {
    pub ip: Option<u64>,
    pub pid: Option<u32>,
    pub tid: Option<u32>,
    pub time: Option<u64>,
    pub addr: Option<u64>,
    pub id: Option<u64>,
    pub cpu: Option<u32>,
    pub period: Option<u64>,
    pub raw: Option<&'a [u8]>,
    pub weight: Option<Weight>,
    pub data_src: Option<u64>,
    pub phys_addr: Option<u64>,
    pub data_page_size: Option<u64>,
}

/// Decodes a sample's body.
pub fn decode<'a>(
    body: &'a [u8],
    big_endian: bool,
    layout: &Layout,
) -> Result<Sample<'a>, Truncated> {
    let t = layout.sample_type;
    let mut b = Bytes::new(body, big_endian);
    let mut s = first_fields(&mut b, t)?;
    b.u64_if(t & STREAM_ID != 0)?;
    if t & CPU != 0 {
        s.cpu = Some(b.u32()?);
        b.u32()?;
    }
    s.period = b.u64_if(t & PERIOD != 0)?;
    if t & READ != 0 {
        skip_read(&mut b, layout.read_format)?;
    }
    if t & CALLCHAIN != 0 {
        let n = b.u64()?;
        b.skip_words(n)?;
    }
    if t & RAW != 0 {
        let size = b.u32()?;
        s.raw = Some(b.take(size as usize)?);
    }
    if t & BRANCH_STACK != 0 {
        skip_branches(&mut b, layout.branch_sample_type)?;
    }
    if t & REGS_USER != 0 {
        skip_regs(&mut b, layout.sample_regs_user)?;
    }
    if t & STACK_USER != 0 {
        let size = b.u64()?;
        b.take(usize::try_from(size).map_err(|_| Truncated)?)?;
        if size != 0 {
            b.u64()?;
        }
    }
    s.weight = decode_weight(&mut b, t)?;
    s.data_src = b.u64_if(t & DATA_SRC != 0)?;
    b.u64_if(t & TRANSACTION != 0)?;
    if t & REGS_INTR != 0 {
        skip_regs(&mut b, layout.sample_regs_intr)?;
    }
    s.phys_addr = b.u64_if(t & PHYS_ADDR != 0)?;
    b.u64_if(t & CGROUP != 0)?;
    s.data_page_size = b.u64_if(t & DATA_PAGE_SIZE != 0)?;
    b.u64_if(t & CODE_PAGE_SIZE != 0)?;
    // PERF_SAMPLE_AUX comes last and nothing after it is needed.
    Ok(s)
}

/// Fields of 8 bytes each, whatever the event.
const FIXED: u64 = IDENTIFIER
    | IP
    | TID
    | TIME
    | ADDR
    | ID
    | STREAM_ID
    | CPU
    | PERIOD
    | DATA_SRC
    | TRANSACTION
    | PHYS_ADDR
    | CGROUP
    | DATA_PAGE_SIZE
    | CODE_PAGE_SIZE;
/// Fields whose size the sample itself says.
const VARIABLE: u64 = READ | CALLCHAIN | RAW | BRANCH_STACK | REGS_USER | STACK_USER | REGS_INTR;

/// The size of every sample of `layout`, when it has no field of variable size.
pub fn fixed_size(layout: &Layout) -> Option<usize> {
    let t = layout.sample_type;
    if t & VARIABLE != 0 {
        return None;
    }
    let weight = u32::from(t & (WEIGHT | WEIGHT_STRUCT) != 0);
    Some(8 * ((t & FIXED).count_ones() + weight) as usize)
}

/// The first fields of a sample of a layout of fixed size (see [`fixed_size`]): the id, IP,
/// thread, time and data address — what counting samples needs, without the rest. It fails
/// exactly when [`decode`] would: when the body is shorter than the layout's size.
pub fn decode_head<'a>(
    body: &'a [u8],
    big_endian: bool,
    layout: &Layout,
    size: usize,
) -> Result<Sample<'a>, Truncated> {
    if body.len() < size {
        return Err(Truncated);
    }
    first_fields(&mut Bytes::new(body, big_endian), layout.sample_type)
}

/// The fields every sample starts with, in the kernel's order: up to the id.
fn first_fields<'a>(b: &mut Bytes<'a>, t: u64) -> Result<Sample<'a>, Truncated> {
    let mut s = Sample::default();
    let identifier = b.u64_if(t & IDENTIFIER != 0)?;
    s.ip = b.u64_if(t & IP != 0)?;
    if t & TID != 0 {
        s.pid = Some(b.u32()?);
        s.tid = Some(b.u32()?);
    }
    s.time = b.u64_if(t & TIME != 0)?;
    s.addr = b.u64_if(t & ADDR != 0)?;
    s.id = b.u64_if(t & ID != 0)?.or(identifier);
    Ok(s)
}

/// `WEIGHT` and `WEIGHT_STRUCT` share one 8-byte slot; the struct's members are laid out in the
/// file's byte order as the kernel's union is (`var1_dw` first on little-endian machines).
fn decode_weight(b: &mut Bytes<'_>, t: u64) -> Result<Option<Weight>, Truncated> {
    if t & WEIGHT_STRUCT != 0 {
        let (var1, var2, var3) = if b.big_endian() {
            let var3 = b.u16()?;
            let var2 = b.u16()?;
            (b.u32()?, var2, var3)
        } else {
            let var1 = b.u32()?;
            let var2 = b.u16()?;
            (var1, var2, b.u16()?)
        };
        Ok(Some(Weight::Struct { var1, var2, var3 }))
    } else if t & WEIGHT != 0 {
        Ok(Some(Weight::Full(b.u64()?)))
    } else {
        Ok(None)
    }
}

fn skip_read(b: &mut Bytes<'_>, format: u64) -> Result<(), Truncated> {
    let times = u64::from(format & READ_TOTAL_TIME_ENABLED != 0)
        + u64::from(format & READ_TOTAL_TIME_RUNNING != 0);
    let per_value = 1 + u64::from(format & READ_ID != 0) + u64::from(format & READ_LOST != 0);
    if format & READ_GROUP != 0 {
        let n = b.u64()?;
        b.skip_words(times)?;
        b.skip_words(n.checked_mul(per_value).ok_or(Truncated)?)
    } else {
        b.skip_words(times + per_value)
    }
}

fn skip_branches(b: &mut Bytes<'_>, branch_type: u64) -> Result<(), Truncated> {
    let n = b.u64()?;
    if branch_type & BRANCH_HW_INDEX != 0 {
        b.u64()?;
    }
    // from, to, flags per branch; then one counter word per branch when counters are sampled.
    b.skip_words(n.checked_mul(3).ok_or(Truncated)?)?;
    if branch_type & BRANCH_COUNTERS != 0 {
        b.skip_words(n)?;
    }
    Ok(())
}

fn skip_regs(b: &mut Bytes<'_>, mask: u64) -> Result<(), Truncated> {
    // ABI 0 (PERF_SAMPLE_REGS_ABI_NONE): no registers follow.
    if b.u64()? != 0 {
        b.skip_words(u64::from(mask.count_ones()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_head_of_a_fixed_layout_fails_where_the_whole_decoding_does() {
        let layout = Layout {
            sample_type: IP | TID | TIME | ADDR | WEIGHT_STRUCT | DATA_SRC | PHYS_ADDR,
            ..Layout::default()
        };
        let size = fixed_size(&layout).unwrap();
        assert_eq!(size, 56);
        let body: Vec<u8> = (0..size as u8).collect();
        for len in 0..=size {
            let whole = decode(&body[..len], false, &layout);
            let head = decode_head(&body[..len], false, &layout, size);
            assert_eq!(whole.is_ok(), head.is_ok(), "{len} bytes");
            if let (Ok(w), Ok(h)) = (whole, head) {
                let fields = |s: &Sample<'_>| (s.ip, s.pid, s.tid, s.time, s.addr);
                assert_eq!(fields(&w), fields(&h));
            }
        }
        let callchain = Layout {
            sample_type: IP | CALLCHAIN,
            ..Layout::default()
        };
        assert_eq!(fixed_size(&callchain), None);
    }
}
