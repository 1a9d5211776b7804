//! The records of a perf.data file's data section, in time order. `perf record` writes each pass
//! over its rings as a round ended by `PERF_RECORD_FINISHED_ROUND`; records of one round are in
//! ring order, not time order, and perf's rule (ordered events) is that once a round has ended,
//! every record up to the latest time seen before the previous round ended can be handed on.
//!
//! The section is mapped, not read: records stay where they lie in the file's pages (the page
//! cache's, shared by both passes: nothing is copied, nor zeroed to be read into); at each
//! round's end their keys (time, place) are sorted (only when out of order, which a single ring's
//! round is not) and those that are due are handed on from where they lie. The pages before the
//! first record still held are let go as the reading moves on, so that what the process holds is
//! about one round, not the file. No allocation or copy per record, no sorting of what is
//! already in order: the `linux-perf-data` crate's iterator allocates a buffer per record and
//! sorts every round, which was a third of the import's time. Files with compressed records
//! (`perf record -z`), and files that cannot be mapped, are read through that crate instead.

use memmap2::{Advice, Mmap, MmapOptions, UncheckedAdvice};

use linux_perf_data::linux_perf_event_reader::{
    Endianness, RawData, RawEventRecord, RecordParseInfo, RecordType,
};
use linux_perf_data::{PerfFile, RawUserRecord, UserRecordType};

use crate::ImportError;

/// A record of the data section.
pub enum Rec<'a> {
    /// A sample's body, with the index of its event: all a sample needs, without the parsing
    /// set-up of a [`RawEventRecord`] (which cost as much as reading the sample).
    Sample(usize, RawData<'a>),
    /// Another kernel record (task, mapping, loss, …).
    Event(RawEventRecord<'a>),
    /// A record perf wrote (AUXTRACE data, time conversion, …).
    User(RawUserRecord<'a>),
}

const RECORD_SAMPLE: u32 = 9;
const RECORD_FINISHED_ROUND: u32 = 68;
const RECORD_AUXTRACE: u32 = 71;
/// The first type perf (not the kernel) writes.
const USER_TYPE_START: u32 = 64;
/// Without round marks (writers other than perf), a round is made every this many bytes.
const ROUND_BYTES: usize = 32 << 20;
/// The mapped pages already read are let go every this many bytes.
const RELEASE_BYTES: usize = 4 << 20;

/// Where a held record's bytes are, and when it happened.
#[derive(Clone, Copy)]
struct Key {
    time: u64,
    /// File order, for records of the same time.
    seq: u64,
    start: usize,
    len: usize,
    kind: u32,
    misc: u16,
    event: usize,
}

/// In what order records are handed on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Time order (perf's ordered events).
    Time,
    /// The file's order: for a reader that puts right what it keeps (nothing is held or sorted).
    File,
}

/// The data section `(offset, size)` of `file`, mapped; `None` when it cannot be (then the file
/// is read through the `linux-perf-data` crate).
pub fn map_data(file: &std::fs::File, (offset, size): (u64, u64)) -> Option<Mmap> {
    let len = usize::try_from(size).ok().filter(|&l| l > 0)?;
    // SAFETY: the mapping is read only. A file cut short while it is mapped would fault on the
    // pages past its new end; `layout_check` refused files shorter than their header says, and
    // perf does not cut a finished file.
    let map = unsafe { MmapOptions::new().offset(offset).len(len).map(file) }.ok()?;
    // Read once, front to back: the kernel reads ahead further and drops behind.
    let _ = map.advise(Advice::Sequential);
    Some(map)
}

/// Hands every record of the data section `data` (of the file `perf_file` describes) to `each`,
/// in `order`.
pub fn for_each(
    data: &Mmap,
    perf_file: &PerfFile,
    order: Order,
    each: &mut dyn FnMut(Rec<'_>) -> Result<(), ImportError>,
) -> Result<(), ImportError> {
    let big_endian = perf_file.endian() == Endianness::BigEndian;
    let mut reader = RoundReader::new(perf_file, big_endian, order, data);
    reader.take_records(each)?;
    if reader.parsed < data.len() {
        // What is left is a record the section's end cuts (the first pass, in file order, stops
        // at it before anything is written).
        return Err(ImportError::Damaged(
            "a record's size takes it beyond the data section",
        ));
    }
    reader.finish(each)
}

/// The data section's offset and size, from the file's header. Read where it lies: the file's
/// position (which a clone of it shares) is not moved.
pub fn data_section(file: &std::fs::File, big_endian: bool) -> Result<(u64, u64), ImportError> {
    use std::os::unix::fs::FileExt;
    let mut header = [0u8; 56];
    file.read_exact_at(&mut header, 0)
        .map_err(|_| ImportError::Damaged("its header is cut short"))?;
    let word = |at: usize| {
        let b: [u8; 8] = header[at..at + 8].try_into().unwrap_or_default();
        if big_endian {
            u64::from_be_bytes(b)
        } else {
            u64::from_le_bytes(b)
        }
    };
    Ok((word(40), word(48)))
}

struct RoundReader<'m> {
    order: Order,
    big_endian: bool,
    endian: Endianness,
    parse_infos: Vec<RecordParseInfo>,
    ids: ahash::AHashMap<u64, usize>,
    /// The mapped section; records before `parsed` are taken (handed on or held).
    map: &'m Mmap,
    parsed: usize,
    /// The pages before this are let go.
    released: usize,
    keys: Vec<Key>,
    seq: u64,
    /// The latest time seen, and the latest seen when the previous round ended.
    latest: u64,
    due_until: u64,
    bytes_since_round: usize,
}

impl<'m> RoundReader<'m> {
    fn new(perf_file: &PerfFile, big_endian: bool, order: Order, map: &'m Mmap) -> Self {
        let endian = perf_file.endian();
        let attrs = perf_file.event_attributes();
        let ids = attrs
            .iter()
            .enumerate()
            .flat_map(|(i, a)| a.event_ids.iter().map(move |&id| (id, i)))
            .collect();
        RoundReader {
            order,
            big_endian,
            endian,
            parse_infos: attrs
                .iter()
                .map(|a| RecordParseInfo::new(&a.attr, endian))
                .collect(),
            ids,
            map,
            parsed: 0,
            released: 0,
            keys: Vec::new(),
            seq: 0,
            latest: 0,
            due_until: 0,
            bytes_since_round: 0,
        }
    }

    fn u32_at(&self, b: &[u8]) -> u32 {
        let w = [b[0], b[1], b[2], b[3]];
        if self.big_endian {
            u32::from_be_bytes(w)
        } else {
            u32::from_le_bytes(w)
        }
    }

    fn u64_at(&self, b: &[u8]) -> u64 {
        let mut w = [0u8; 8];
        w.copy_from_slice(&b[..8]);
        if self.big_endian {
            u64::from_be_bytes(w)
        } else {
            u64::from_le_bytes(w)
        }
    }

    /// Lets go of the mapped pages before the first held record, once enough were read: they
    /// are the page cache's, and would otherwise count as the process's memory to the end.
    fn release(&mut self) {
        let first_held = self.keys.iter().map(|k| k.start).min();
        let keep_from = first_held.map_or(self.parsed, |s| s.min(self.parsed));
        if keep_from - self.released < RELEASE_BYTES {
            return;
        }
        // SAFETY: the mapping is of a file, read only: a page let go is read again from the
        // file if it is touched again, with the same bytes.
        let _ = unsafe {
            self.map.unchecked_advise_range(
                UncheckedAdvice::DontNeed,
                self.released,
                keep_from - self.released,
            )
        };
        self.released = keep_from;
    }

    /// Takes the whole records from `parsed` on.
    fn take_records(
        &mut self,
        each: &mut dyn FnMut(Rec<'_>) -> Result<(), ImportError>,
    ) -> Result<(), ImportError> {
        let mut at = self.parsed;
        let bytes: &'m [u8] = self.map;
        while bytes.len() - at >= 8 {
            let h = &bytes[at..at + 8];
            let kind = self.u32_at(h);
            let misc = u16::from_le_bytes([h[4], h[5]]);
            let size = u16::from_le_bytes([h[6], h[7]]);
            let (misc, size) = if self.big_endian {
                (misc.swap_bytes(), size.swap_bytes())
            } else {
                (misc, size)
            };
            let mut len = usize::from(size);
            if len < 8 {
                return Err(ImportError::Damaged(
                    "a record's size takes it beyond the data section",
                ));
            }
            if kind == RECORD_AUXTRACE && len >= 16 && bytes.len() - at >= 16 {
                // Its data follows the record, outside the record's size.
                let aux = self.u64_at(&bytes[at + 8..]);
                len = usize::try_from(aux)
                    .ok()
                    .and_then(|a| a.checked_add(len))
                    .ok_or(ImportError::Damaged("an AUX trace record's size overflows"))?;
            } else if kind == RECORD_AUXTRACE && len >= 16 {
                break;
            }
            if bytes.len() - at < len {
                break;
            }
            self.take(kind, misc, at..at + len, each)?;
            at += len;
            self.parsed = at;
            if self.order == Order::File {
                self.release();
            }
        }
        Ok(())
    }

    fn take(
        &mut self,
        kind: u32,
        misc: u16,
        record: std::ops::Range<usize>,
        each: &mut dyn FnMut(Rec<'_>) -> Result<(), ImportError>,
    ) -> Result<(), ImportError> {
        if kind == RECORD_FINISHED_ROUND {
            return self.round_end(each);
        }
        let (start, len) = (record.start + 8, record.len() - 8);
        let body = &self.map[start..record.end];
        let event = self.event_of(kind, body);
        if self.order == Order::File {
            return each(self.rec(kind, misc, event, body)?);
        }
        let time = self.time_of(kind, event, body).unwrap_or(self.latest);
        self.latest = self.latest.max(time);
        self.keys.push(Key {
            time,
            seq: self.seq,
            start,
            len,
            kind,
            misc,
            event,
        });
        self.seq += 1;
        self.bytes_since_round += record.len();
        if self.bytes_since_round > ROUND_BYTES {
            self.round_end(each)?;
        }
        Ok(())
    }

    /// The word at `from_start` bytes of a sample's body, or `from_end` of another record's (its
    /// `sample_id` trailer).
    fn word(
        &self,
        kind: u32,
        body: &[u8],
        from_start: Option<u8>,
        from_end: Option<u8>,
    ) -> Option<u64> {
        let at = if kind == RECORD_SAMPLE {
            usize::from(from_start?)
        } else {
            body.len().checked_sub(usize::from(from_end?))?
        };
        body.get(at..at + 8).map(|w| self.u64_at(w))
    }

    /// The event of a kernel record, by its id (events share where their ids are).
    fn event_of(&self, kind: u32, body: &[u8]) -> usize {
        if self.parse_infos.len() <= 1 || kind >= USER_TYPE_START {
            return 0;
        }
        let ids = &self.parse_infos[0].id_parse_info;
        let (start, end) = (
            ids.sample_record_id_offset_from_start,
            ids.nonsample_record_id_offset_from_end,
        );
        self.word(kind, body, start, end)
            .and_then(|id| self.ids.get(&id).copied())
            .unwrap_or(0)
    }

    fn time_of(&self, kind: u32, event: usize, body: &[u8]) -> Option<u64> {
        if kind >= USER_TYPE_START {
            return None;
        }
        let info = self.parse_infos.get(event)?;
        let (start, end) = (
            info.sample_record_time_offset_from_start,
            info.nonsample_record_time_offset_from_end,
        );
        self.word(kind, body, start, end)
    }

    /// The record of a body.
    fn rec<'b>(
        &self,
        kind: u32,
        misc: u16,
        event: usize,
        body: &'b [u8],
    ) -> Result<Rec<'b>, ImportError> {
        let data = RawData::Single(body);
        if kind >= USER_TYPE_START {
            // Types this reader does not know stay what perf calls them: user records of no use.
            let record_type = UserRecordType::try_from(RecordType(kind))
                .unwrap_or(UserRecordType::PERF_FINISHED_ROUND);
            return Ok(Rec::User(RawUserRecord {
                record_type,
                endian: self.endian,
                misc,
                data,
            }));
        }
        if kind == RECORD_SAMPLE {
            return Ok(Rec::Sample(event, data));
        }
        let info = self
            .parse_infos
            .get(event)
            .copied()
            .ok_or(ImportError::Damaged("the file has records but no event"))?;
        Ok(Rec::Event(RawEventRecord::new(
            RecordType(kind),
            misc,
            data,
            info,
        )))
    }

    /// A round ended: hands on the records due and forgets them.
    fn round_end(
        &mut self,
        each: &mut dyn FnMut(Rec<'_>) -> Result<(), ImportError>,
    ) -> Result<(), ImportError> {
        self.bytes_since_round = 0;
        if !self.keys.is_sorted_by_key(|k| (k.time, k.seq)) {
            self.keys.sort_unstable_by_key(|k| (k.time, k.seq));
        }
        let due = self.keys.partition_point(|k| k.time <= self.due_until);
        self.hand_on(0..due, each)?;
        self.keys.drain(..due);
        self.due_until = self.latest;
        self.release();
        Ok(())
    }

    fn hand_on(
        &self,
        range: std::ops::Range<usize>,
        each: &mut dyn FnMut(Rec<'_>) -> Result<(), ImportError>,
    ) -> Result<(), ImportError> {
        for k in &self.keys[range] {
            let body = &self.map[k.start..k.start + k.len];
            each(self.rec(k.kind, k.misc, k.event, body)?)?;
        }
        Ok(())
    }

    /// The end of the data: everything held, in time order.
    fn finish(
        mut self,
        each: &mut dyn FnMut(Rec<'_>) -> Result<(), ImportError>,
    ) -> Result<(), ImportError> {
        self.keys.sort_unstable_by_key(|k| (k.time, k.seq));
        let all = 0..self.keys.len();
        self.hand_on(all, each)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::{IP, TID, TIME};
    use crate::write::{EventAttr, PerfDataWriter, SampleFields};

    /// Times of the samples handed on, in `order`, from rounds of samples at `rounds`' times.
    fn handed_on(rounds: &[&[u64]], order: Order) -> Vec<u64> {
        let mut w = PerfDataWriter::new();
        let e = w.event(EventAttr {
            sample_type: IP | TID | TIME,
            ..EventAttr::default()
        });
        for round in rounds {
            for &time in *round {
                let s = SampleFields {
                    time,
                    ..SampleFields::default()
                };
                w.sample(e, &s);
            }
            w.finished_round();
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("perf.data");
        w.write_to(&path).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let reader =
            linux_perf_data::PerfFileReader::parse_file(std::io::BufReader::new(file)).unwrap();
        let mut times = Vec::new();
        let file = std::fs::File::open(&path).unwrap();
        let section = data_section(&file, false).unwrap();
        let map = map_data(&file, section).expect("a file's data section maps");
        let layout = crate::sample::Layout {
            sample_type: IP | TID | TIME,
            ..Default::default()
        };
        for_each(&map, &reader.perf_file, order, &mut |r| {
            if let Rec::Sample(_, data) = r {
                let body = data.as_slice();
                let s = crate::sample::decode(&body, false, &layout).unwrap();
                times.push(s.time.unwrap());
            }
            Ok(())
        })
        .unwrap();
        times
    }

    /// A file of a COMM record and 8 samples, its first record's size made `size`, imported.
    fn import_with_first_record_size(size: Option<u16>) -> Result<crate::Imported, ImportError> {
        let mut w = PerfDataWriter::new();
        let e = w.event(crate::write::mem_loads_event(1, vec![1]));
        w.comm(7, 7, "prog", 1);
        for time in 2..10 {
            let s = SampleFields {
                pid: 7,
                tid: 7,
                time,
                addr: 0x1000 * time,
                id: 1,
                ..SampleFields::default()
            };
            w.sample(e, &s);
        }
        let mut bytes = w.finish();
        let data_at = u64::from_le_bytes(bytes[40..48].try_into().unwrap()) as usize;
        if let Some(size) = size {
            bytes[data_at + 6..data_at + 8].copy_from_slice(&size.to_le_bytes());
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("perf.data");
        std::fs::write(&path, bytes).unwrap();
        let opts = crate::ImportOptions { min_object: 4096 };
        crate::import(&path, &dir.path().join("out.numalens"), &opts)
    }

    #[test]
    fn a_record_that_leaves_the_data_section_is_refused() {
        let imported = import_with_first_record_size(Some(u16::MAX)).map(|_| ());
        assert!(
            matches!(imported, Err(ImportError::Damaged(why)) if why.contains("beyond the data section")),
            "{imported:?}"
        );
        let tiny = import_with_first_record_size(Some(4)).map(|_| ());
        assert!(matches!(tiny, Err(ImportError::Damaged(_))), "{tiny:?}");
        // The file as written imports.
        let whole = import_with_first_record_size(None).unwrap();
        assert_eq!(whole.accesses, 8);
    }

    #[test]
    fn rounds_come_out_in_time_order() {
        // The second round holds a record older than the first round's newest: perf's rule
        // holds the first round's newer records back until the second round ended.
        let rounds: [&[u64]; 3] = [&[30, 10, 20], &[60, 25, 50], &[70, 65]];
        assert_eq!(
            handed_on(&rounds, Order::Time),
            [10, 20, 25, 30, 50, 60, 65, 70]
        );
        assert_eq!(
            handed_on(&rounds, Order::File),
            [30, 10, 20, 60, 25, 50, 70, 65]
        );
    }
}
