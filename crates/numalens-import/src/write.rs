//! Writing perf.data files in the layout `perf record` writes (header, attributes with their ids,
//! records, feature sections), for tests that check the import against `perf script` reading the
//! same file, and for the import benchmark. Samples are laid out as the kernel lays them out for
//! the fields a memory sample carries.

use std::io::Write;

use crate::sample::*;

const ATTR_SIZE: u32 = 128; // PERF_ATTR_SIZE_VER7
const HEADER_SIZE: u64 = 104;
const RECORD_MMAP2: u32 = 10;
const RECORD_COMM: u32 = 3;
const RECORD_SAMPLE: u32 = 9;
const RECORD_FINISHED_ROUND: u32 = 68;
const RECORD_AUX: u32 = 11;
const RECORD_SWITCH_CPU_WIDE: u32 = 15;
const MISC_SWITCH_OUT: u16 = 1 << 13;
const RECORD_AUXTRACE_INFO: u32 = 70;
const RECORD_AUXTRACE: u32 = 71;
const RECORD_TIME_CONV: u32 = 79;
/// `perf_record_auxtrace_info.type` of Arm SPE.
const AUXTRACE_ARM_SPE: u32 = 4;
pub const FEATURE_CPUID: u32 = 9;
pub const FEATURE_PMU_MAPPINGS: u32 = 16;
const FEATURE_EVENT_DESC: u32 = 12;
pub const FEATURE_NUMA_TOPOLOGY: u32 = 14;
pub const FEATURE_MEM_TOPOLOGY: u32 = 22;

/// `perf_event_attr.flags` bits the tests set.
pub const FLAG_SAMPLE_ID_ALL: u64 = 1 << 18;
pub const FLAG_MMAP2: u64 = 1 << 23;
/// `precise_ip` = 2 (PEBS, IBS): the sampled instruction is the one that accessed.
pub const FLAG_PRECISE_2: u64 = 2 << 15;

/// An event of the recording.
#[derive(Debug, Clone, Default)]
pub struct EventAttr {
    pub name: String,
    pub type_: u32,
    pub config: u64,
    pub config1: u64,
    pub sample_period: u64,
    pub sample_type: u64,
    pub flags: u64,
    pub ids: Vec<u64>,
}

/// The fields of one sample; those its event's `sample_type` does not name are not written.
#[derive(Debug, Clone, Default)]
pub struct SampleFields {
    pub ip: u64,
    pub pid: u32,
    pub tid: u32,
    pub time: u64,
    pub addr: u64,
    pub id: u64,
    pub cpu: u32,
    pub period: u64,
    pub callchain: Vec<u64>,
    pub raw: Vec<u8>,
    /// Written as one u64, whichever of WEIGHT / WEIGHT_STRUCT the event has (see [`weight_struct`]).
    pub weight: u64,
    pub data_src: u64,
    pub phys_addr: u64,
    pub data_page_size: u64,
}

/// The u64 a little-endian kernel writes for `perf_sample_weight`'s struct members.
pub fn weight_struct(var1: u32, var2: u16, var3: u16) -> u64 {
    u64::from(var1) | u64::from(var2) << 32 | u64::from(var3) << 48
}

/// The event `perf mem record` opens on Intel: PEBS load latency above 30 cycles
/// (`cpu/mem-loads,ldlat=30/P`), every `period`th load, with what a memory sample carries.
pub fn mem_loads_event(period: u64, ids: Vec<u64>) -> EventAttr {
    EventAttr {
        name: "cpu/mem-loads,ldlat=30/P".into(),
        type_: 4, // PERF_TYPE_RAW
        config: 0x1cd,
        config1: 30, // ldlat
        sample_period: period,
        sample_type: IP
            | TID
            | TIME
            | ADDR
            | ID
            | CPU
            | PERIOD
            | WEIGHT_STRUCT
            | DATA_SRC
            | PHYS_ADDR,
        flags: FLAG_SAMPLE_ID_ALL | FLAG_MMAP2 | FLAG_PRECISE_2,
        ids,
    }
}

/// The header sections of a two-node machine with memory blocks of `block` bytes: CPUs 0-1 and
/// blocks 0-7 on node 0, CPUs 2-3 and blocks 8-15 on node 1.
pub fn two_node_sections(w: &mut PerfDataWriter, block: u64) {
    let mut mem = Vec::new();
    for x in [1u64, block, 2, 0, 8, 16, 0x00ff, 1, 8, 16, 0xff00] {
        put64(&mut mem, x);
    }
    w.feature(FEATURE_MEM_TOPOLOGY, mem);
    let mut numa = Vec::new();
    put32(&mut numa, 2);
    for (id, cpus) in [(0u32, "0-1"), (1, "2-3")] {
        put32(&mut numa, id);
        put64(&mut numa, 1 << 20); // total KiB
        put64(&mut numa, 1 << 19); // free KiB
        put_string(&mut numa, cpus);
    }
    w.feature(FEATURE_NUMA_TOPOLOGY, numa);
}

#[derive(Default)]
pub struct PerfDataWriter {
    attrs: Vec<EventAttr>,
    data: Vec<u8>,
    features: Vec<(u32, Vec<u8>)>,
}

fn put64(v: &mut Vec<u8>, x: u64) {
    v.extend_from_slice(&x.to_le_bytes());
}

fn put32(v: &mut Vec<u8>, x: u32) {
    v.extend_from_slice(&x.to_le_bytes());
}

/// A `perf_header_string`: length, then the text NUL-padded to 64 bytes.
pub fn put_string(v: &mut Vec<u8>, s: &str) {
    let len = (s.len() + 1).div_ceil(64) * 64;
    put32(v, len as u32);
    let mut bytes = s.as_bytes().to_vec();
    bytes.resize(len, 0);
    v.extend(bytes);
}

impl PerfDataWriter {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an event; returns its index.
    pub fn event(&mut self, attr: EventAttr) -> usize {
        self.attrs.push(attr);
        self.attrs.len() - 1
    }

    /// Adds a feature section (`HEADER_*` number and its bytes).
    pub fn feature(&mut self, id: u32, bytes: Vec<u8>) {
        self.features.push((id, bytes));
    }

    fn record(&mut self, kind: u32, misc: u16, body: &[u8]) {
        let size = 8 + body.len();
        put32(&mut self.data, kind);
        self.data.extend_from_slice(&misc.to_le_bytes());
        self.data.extend_from_slice(&(size as u16).to_le_bytes());
        self.data.extend_from_slice(body);
    }

    /// The `sample_id` trailer of a non-sample record of event 0.
    fn sample_id(&self, body: &mut Vec<u8>, pid: u32, tid: u32, time: u64) {
        self.sample_id_on(body, (pid, tid, time), 0);
    }

    /// The `sample_id` of a record written on `cpu`.
    fn sample_id_on(&self, body: &mut Vec<u8>, (pid, tid, time): (u32, u32, u64), cpu: u32) {
        let a = &self.attrs[0];
        if a.flags & FLAG_SAMPLE_ID_ALL == 0 {
            return;
        }
        let t = a.sample_type;
        if t & TID != 0 {
            put32(body, pid);
            put32(body, tid);
        }
        if t & TIME != 0 {
            put64(body, time);
        }
        if t & ID != 0 {
            put64(body, a.ids.first().copied().unwrap_or(0));
        }
        if t & CPU != 0 {
            put64(body, u64::from(cpu));
        }
        if t & IDENTIFIER != 0 {
            put64(body, a.ids.first().copied().unwrap_or(0));
        }
    }

    /// `PERF_RECORD_SWITCH_CPU_WIDE` on `cpu` at `time`: `task` (pid, tid) switched out (`out`)
    /// for `other`, or in from it.
    pub fn switch_cpu_wide(
        &mut self,
        out: bool,
        task: (u32, u32),
        other: (u32, u32),
        (time, cpu): (u64, u32),
    ) {
        let mut body = Vec::new();
        put32(&mut body, other.0);
        put32(&mut body, other.1);
        self.sample_id_on(&mut body, (task.0, task.1, time), cpu);
        let misc = if out { MISC_SWITCH_OUT } else { 0 };
        self.record(RECORD_SWITCH_CPU_WIDE, misc, &body);
    }

    pub fn comm(&mut self, pid: u32, tid: u32, name: &str, time: u64) {
        let mut body = Vec::new();
        put32(&mut body, pid);
        put32(&mut body, tid);
        let mut text = name.as_bytes().to_vec();
        text.resize((name.len() + 1).div_ceil(8) * 8, 0);
        body.extend(text);
        self.sample_id(&mut body, pid, tid, time);
        self.record(RECORD_COMM, 0, &body);
    }

    /// A mapping (`PERF_RECORD_MMAP2` with device and inode numbers).
    #[allow(clippy::too_many_arguments)]
    pub fn mmap2(
        &mut self,
        pid: u32,
        start: u64,
        len: u64,
        pgoff: u64,
        prot: u32,
        flags: u32,
        path: &str,
        time: u64,
    ) {
        let mut body = Vec::new();
        put32(&mut body, pid);
        put32(&mut body, pid);
        for x in [start, len, pgoff] {
            put64(&mut body, x);
        }
        // maj, min, ino, ino_generation
        put32(&mut body, 0);
        put32(&mut body, 0);
        put64(&mut body, 0);
        put64(&mut body, 0);
        put32(&mut body, prot);
        put32(&mut body, flags);
        let mut text = path.as_bytes().to_vec();
        text.resize((path.len() + 1).div_ceil(8) * 8, 0);
        body.extend(text);
        self.sample_id(&mut body, pid, pid, time);
        // PERF_RECORD_MISC_USER
        self.record(RECORD_MMAP2, 2, &body);
    }

    /// `PERF_RECORD_AUXTRACE_INFO` of an Arm SPE recording (perf's first layout: the PMU's type
    /// and whether the AUX buffers are per CPU).
    pub fn auxtrace_info_spe(&mut self, pmu_type: u32, per_cpu: bool) {
        let mut body = Vec::new();
        put32(&mut body, AUXTRACE_ARM_SPE);
        put32(&mut body, 0);
        put64(&mut body, u64::from(pmu_type));
        put64(&mut body, u64::from(per_cpu));
        self.record(RECORD_AUXTRACE_INFO, 0, &body);
    }

    /// `PERF_RECORD_TIME_CONV`: time = zero + count × mult / 2^shift (the count wrapping at
    /// `mask` above `cycles` when `short`).
    pub fn time_conv(&mut self, shift: u64, mult: u64, zero: u64, short: Option<(u64, u64)>) {
        let mut body = Vec::new();
        for x in [shift, mult, zero] {
            put64(&mut body, x);
        }
        let (cycles, mask) = short.unwrap_or((0, !0));
        put64(&mut body, cycles);
        put64(&mut body, mask);
        // cap_user_time_zero, cap_user_time_short, 6 reserved bytes.
        body.extend_from_slice(&[1, u8::from(short.is_some()), 0, 0, 0, 0, 0, 0]);
        self.record(RECORD_TIME_CONV, 0, &body);
    }

    /// `PERF_RECORD_AUX`: the kernel's note that `size` bytes at `offset` of the AUX buffer are
    /// new (`flags`: truncated, overwrite, …), of event 0.
    /// It was written on `cpu` (for the task running there).
    pub fn aux(&mut self, (offset, size, flags): (u64, u64, u64), task: (u32, u32, u64), cpu: u32) {
        let mut body = Vec::new();
        for x in [offset, size, flags] {
            put64(&mut body, x);
        }
        self.sample_id_on(&mut body, task, cpu);
        self.record(RECORD_AUX, 0, &body);
    }

    /// `PERF_RECORD_AUXTRACE`: AUX data copied by perf (`data`, padded to 8 bytes), of queue
    /// `idx`, recorded per CPU (`tid` -1) or per thread (`cpu` -1). Its data follows the record
    /// and is not counted in the record's size.
    pub fn auxtrace(&mut self, data: &[u8], offset: u64, idx: u32, tid: u32, cpu: u32) {
        let mut padded = data.to_vec();
        padded.resize(data.len().div_ceil(8) * 8, 0);
        let mut body = Vec::new();
        put64(&mut body, padded.len() as u64);
        put64(&mut body, offset);
        put64(&mut body, 0x5eed_0000 + u64::from(idx)); // reference
        for x in [idx, tid, cpu, 0] {
            put32(&mut body, x);
        }
        self.record(RECORD_AUXTRACE, 0, &body);
        self.data.extend_from_slice(&padded);
    }

    /// `PERF_RECORD_FINISHED_ROUND`: what `perf record` writes after each pass over the rings, so
    /// that readers sort one round at a time.
    pub fn finished_round(&mut self) {
        self.record(RECORD_FINISHED_ROUND, 0, &[]);
    }

    /// A sample of event `event`.
    pub fn sample(&mut self, event: usize, s: &SampleFields) {
        let t = self.attrs[event].sample_type;
        let mut b = Vec::with_capacity(128);
        let words = [(IDENTIFIER, s.id), (IP, s.ip)];
        for (bit, x) in words {
            if t & bit != 0 {
                put64(&mut b, x);
            }
        }
        if t & TID != 0 {
            put32(&mut b, s.pid);
            put32(&mut b, s.tid);
        }
        for (bit, x) in [
            (TIME, s.time),
            (ADDR, s.addr),
            (ID, s.id),
            (STREAM_ID, s.id),
        ] {
            if t & bit != 0 {
                put64(&mut b, x);
            }
        }
        if t & CPU != 0 {
            put32(&mut b, s.cpu);
            put32(&mut b, 0);
        }
        if t & PERIOD != 0 {
            put64(&mut b, s.period);
        }
        if t & CALLCHAIN != 0 {
            put64(&mut b, s.callchain.len() as u64);
            s.callchain.iter().for_each(|&ip| put64(&mut b, ip));
        }
        if t & RAW != 0 {
            // The raw data and its size are padded together to a multiple of 8 bytes.
            let padded = (4 + s.raw.len()).div_ceil(8) * 8 - 4;
            put32(&mut b, padded as u32);
            let mut raw = s.raw.clone();
            raw.resize(padded, 0);
            b.extend(raw);
        }
        for (bit, x) in [
            (WEIGHT | WEIGHT_STRUCT, s.weight),
            (DATA_SRC, s.data_src),
            (PHYS_ADDR, s.phys_addr),
            (DATA_PAGE_SIZE, s.data_page_size),
        ] {
            if t & bit != 0 {
                put64(&mut b, x);
            }
        }
        self.record(RECORD_SAMPLE, 2, &b);
    }

    fn attr_bytes(a: &EventAttr) -> Vec<u8> {
        let mut v = Vec::with_capacity(ATTR_SIZE as usize);
        put32(&mut v, a.type_);
        put32(&mut v, ATTR_SIZE);
        for x in [a.config, a.sample_period, a.sample_type, 0, a.flags] {
            put64(&mut v, x);
        }
        put32(&mut v, 0); // wakeup_events
        put32(&mut v, 0); // bp_type
        put64(&mut v, a.config1);
        v.resize(ATTR_SIZE as usize, 0);
        v
    }

    fn event_desc(&self) -> Vec<u8> {
        let mut v = Vec::new();
        put32(&mut v, self.attrs.len() as u32);
        put32(&mut v, ATTR_SIZE);
        for a in &self.attrs {
            v.extend(Self::attr_bytes(a));
            put32(&mut v, a.ids.len() as u32);
            put_string(&mut v, &a.name);
            a.ids.iter().for_each(|&id| put64(&mut v, id));
        }
        v
    }

    /// The whole file.
    pub fn finish(mut self) -> Vec<u8> {
        let desc = self.event_desc();
        self.features.push((FEATURE_EVENT_DESC, desc));
        self.features.sort_by_key(|(id, _)| *id);
        // Layout: header, ids, attrs, data, feature section table, feature data.
        let mut ids = Vec::new();
        let mut id_sections = Vec::new();
        for a in &self.attrs {
            id_sections.push((HEADER_SIZE + ids.len() as u64, 8 * a.ids.len() as u64));
            a.ids.iter().for_each(|&id| put64(&mut ids, id));
        }
        let attrs_at = HEADER_SIZE + ids.len() as u64;
        let mut attrs = Vec::new();
        for (a, (at, size)) in self.attrs.iter().zip(&id_sections) {
            attrs.extend(Self::attr_bytes(a));
            put64(&mut attrs, *at);
            put64(&mut attrs, *size);
        }
        let data_at = attrs_at + attrs.len() as u64;
        let table_at = data_at + self.data.len() as u64;
        let mut table = Vec::new();
        let mut feature_data = Vec::new();
        let mut at = table_at + 16 * self.features.len() as u64;
        for (_, bytes) in &self.features {
            put64(&mut table, at);
            put64(&mut table, bytes.len() as u64);
            at += bytes.len() as u64;
            feature_data.extend(bytes);
        }
        let mut bitmap = [0u64; 4];
        for (id, _) in &self.features {
            bitmap[*id as usize / 64] |= 1 << (id % 64);
        }
        let mut file = Vec::new();
        file.extend(b"PERFILE2");
        put64(&mut file, HEADER_SIZE);
        put64(&mut file, u64::from(ATTR_SIZE) + 16);
        for x in [
            attrs_at,
            attrs.len() as u64,
            data_at,
            self.data.len() as u64,
            0,
            0,
        ] {
            put64(&mut file, x);
        }
        bitmap.iter().for_each(|&w| put64(&mut file, w));
        for part in [&ids, &attrs, &self.data, &table, &feature_data] {
            file.extend_from_slice(part);
        }
        file
    }

    /// Writes the file to `path`.
    pub fn write_to(self, path: &std::path::Path) -> std::io::Result<()> {
        std::fs::File::create(path)?.write_all(&self.finish())
    }
}
