//! Checks, before the file is handed to the perf.data reader, that the sizes and counts it reads
//! from the file fit in the file: the reader sizes buffers by them (a feature section's declared
//! size, the number of events in `HEADER_EVENT_DESC`, an event's number of ids, the data that
//! follows an AUX trace record), so a damaged file would otherwise make it allocate what the file
//! says, up to exabytes. Every other buffer it sizes is bounded by a record's 16-bit size.

use std::io::{Read, Seek, SeekFrom};

use numalens_assemble::perf_sample::bytes::{Bytes, Truncated};

const HEADER_SIZE: usize = 104;
const HEADER_EVENT_DESC: u32 = 12;

/// What is wrong with the file's layout.
pub type Damage = &'static str;

/// A section of the file: offset and size.
fn section(b: &mut Bytes<'_>) -> Result<(u64, u64), Truncated> {
    Ok((b.u64()?, b.u64()?))
}

fn within(file_len: u64, (offset, size): (u64, u64)) -> bool {
    offset.checked_add(size).is_some_and(|end| end <= file_len)
}

/// Checks the header, the attribute and feature sections, and `HEADER_EVENT_DESC`; returns the
/// data section (offset and size), whose records [`check_records`] checks.
pub fn check<R: Read + Seek>(file: &mut R, big_endian: bool) -> Result<(u64, u64), Damage> {
    let file_len = file
        .seek(SeekFrom::End(0))
        .map_err(|_| "cannot be measured")?;
    let header = read_at(file, 0, HEADER_SIZE as u64, file_len).ok_or("its header is cut short")?;
    let mut b = Bytes::new(&header, big_endian);
    let parse = |b: &mut Bytes<'_>| -> Result<_, Truncated> {
        let _magic = b.u64()?;
        let _size = b.u64()?;
        let attr_size = b.u64()?;
        let attrs = section(b)?;
        let data = section(b)?;
        let event_types = section(b)?;
        let mut features = [0u64; 4];
        for w in &mut features {
            *w = b.u64()?;
        }
        Ok((attr_size, attrs, data, event_types, features))
    };
    if Bytes::new(&header[8..16], big_endian).u64() == Ok(16) {
        return Err(
            "it was written to a pipe (`perf record -o -`), which numalens does not read: record \
             to a file (`-o perf.data`)",
        );
    }
    let (attr_size, attrs, data, event_types, features) =
        parse(&mut b).map_err(|_| "its header is cut short")?;
    if !(16..=4096).contains(&attr_size) {
        return Err("its header declares an impossible attribute size");
    }
    if data.1 == 0 {
        return Err(
            "its data section is empty: `perf record` was killed before it finished the file",
        );
    }
    for (s, damage) in [
        (
            attrs,
            "its attribute section lies beyond the end of the file",
        ),
        (data, "its data section lies beyond the end of the file"),
        (
            event_types,
            "its event type section lies beyond the end of the file",
        ),
    ] {
        if !within(file_len, s) {
            return Err(damage);
        }
    }
    check_attr_ids(file, attrs, attr_size, file_len, big_endian)?;
    check_features(file, data, &features, file_len, big_endian)?;
    Ok(data)
}

/// `PERF_RECORD_AUXTRACE`: its data follows the record, and the reader sizes a buffer by it.
const RECORD_AUXTRACE: u32 = 71;

/// Every record of the data section `data` of `file` has a size that keeps it inside the
/// section, and an AUXTRACE record's data is inside it too. The section is walked where it is
/// mapped (no copy); a file that cannot be mapped is read.
pub fn check_records(
    file: &mut std::fs::File,
    data: (u64, u64),
    big_endian: bool,
) -> Result<(), Damage> {
    let len = usize::try_from(data.1).map_err(|_| "its data section is unreadable")?;
    // SAFETY: read only, and `check` found the section inside the file.
    let mapping = unsafe {
        memmap2::MmapOptions::new()
            .offset(data.0)
            .len(len)
            .map(&*file)
    };
    let Ok(map) = mapping else {
        return check_records_read(file, data, big_endian);
    };
    let _ = map.advise(memmap2::Advice::Sequential);
    // The pages walked are let go as the walk goes on, so that they do not count as the
    // process's memory.
    let mut released = 0;
    check_record_bytes(&map, big_endian, &mut |walked| {
        // SAFETY: a read-only mapping of a file: a page let go is read again from the file.
        let _ = unsafe {
            map.unchecked_advise_range(
                memmap2::UncheckedAdvice::DontNeed,
                released,
                walked - released,
            )
        };
        released = walked;
    })
}

/// The mapped pages are let go every this many bytes of the walk.
const RELEASE_BYTES: u64 = 4 << 20;

/// The end of the record at `at` (of the section's `end`) from its first bytes (8, or 16 for an
/// AUXTRACE record, whose data follows it).
fn record_end(head: &[u8], at: u64, end: u64, big_endian: bool) -> Result<u64, Damage> {
    let mut b = Bytes::new(head, big_endian);
    let (Ok(kind), Ok(_misc), Ok(len)) = (b.u32(), b.u16(), b.u16()) else {
        return Err("a record is cut short");
    };
    if len < 8 {
        return Err("a record's size takes it beyond the data section");
    }
    let mut next = at + u64::from(len);
    if kind == RECORD_AUXTRACE && len >= 16 {
        let aux = b.u64().map_err(|_| "a record is cut short")?;
        next = next
            .checked_add(aux)
            .ok_or("an AUX trace record's size overflows")?;
    }
    if next > end {
        return Err("a record's size takes it beyond the data section");
    }
    Ok(next)
}

/// Whether a record's first 8 bytes say it is an AUXTRACE record with its size after them.
fn has_aux_size(head: &[u8], big_endian: bool) -> bool {
    let mut b = Bytes::new(head, big_endian);
    matches!((b.u32(), b.u16(), b.u16()), (Ok(RECORD_AUXTRACE), Ok(_), Ok(len)) if len >= 16)
}

/// [`check_records`] of a section in memory; `walked` is told every [`RELEASE_BYTES`] how far
/// the walk went.
fn check_record_bytes(
    section: &[u8],
    big_endian: bool,
    walked: &mut dyn FnMut(usize),
) -> Result<(), Damage> {
    let end = section.len() as u64;
    let (mut at, mut told) = (0u64, 0u64);
    while at < end {
        let rest = &section[at as usize..];
        let head = &rest[..rest.len().min(16)];
        at = record_end(head, at, end, big_endian)?;
        if at - told >= RELEASE_BYTES {
            walked(at as usize);
            told = at;
        }
    }
    Ok(())
}

/// [`check_records`] by reading the file.
fn check_records_read<R: Read + Seek>(
    file: &mut R,
    (start, size): (u64, u64),
    big_endian: bool,
) -> Result<(), Damage> {
    let end = start + size;
    file.seek(SeekFrom::Start(start))
        .map_err(|_| "its data section is unreadable")?;
    let mut reader = std::io::BufReader::with_capacity(1 << 16, file);
    let mut at = start;
    let mut head = [0u8; 16];
    while at < end {
        reader
            .read_exact(&mut head[..8])
            .map_err(|_| "a record is cut short")?;
        let mut read = 8;
        if has_aux_size(&head[..8], big_endian) {
            reader
                .read_exact(&mut head[8..])
                .map_err(|_| "a record is cut short")?;
            read = 16;
        }
        let next = record_end(&head[..read], at, end, big_endian)?;
        reader
            .seek_relative((next - at - read as u64) as i64)
            .map_err(|_| "its data section is unreadable")?;
        at = next;
    }
    Ok(())
}

fn read_at<R: Read + Seek>(file: &mut R, offset: u64, len: u64, file_len: u64) -> Option<Vec<u8>> {
    if !within(file_len, (offset, len)) {
        return None;
    }
    file.seek(SeekFrom::Start(offset)).ok()?;
    let mut buf = vec![0; usize::try_from(len).ok()?];
    file.read_exact(&mut buf).ok()?;
    Some(buf)
}

/// Each attribute of the attribute section points at its ids: they must be in the file.
fn check_attr_ids<R: Read + Seek>(
    file: &mut R,
    attrs: (u64, u64),
    attr_size: u64,
    file_len: u64,
    big_endian: bool,
) -> Result<(), Damage> {
    let bytes =
        read_at(file, attrs.0, attrs.1, file_len).ok_or("its attribute section is unreadable")?;
    let entry = attr_size as usize;
    for chunk in bytes.chunks_exact(entry) {
        // The ids' section is the last 16 bytes of each entry.
        let mut b = Bytes::new(&chunk[entry - 16..], big_endian);
        let ids = section(&mut b).map_err(|_| "its attribute section is cut short")?;
        if !within(file_len, ids) {
            return Err("an attribute's ids lie beyond the end of the file");
        }
    }
    Ok(())
}

/// The feature sections' table follows the data; every section must be in the file, and
/// `HEADER_EVENT_DESC`'s counts within its section.
fn check_features<R: Read + Seek>(
    file: &mut R,
    data: (u64, u64),
    features: &[u64; 4],
    file_len: u64,
    big_endian: bool,
) -> Result<(), Damage> {
    let set: Vec<u32> = (0..256u32)
        .filter(|bit| features[*bit as usize / 64] & (1 << (bit % 64)) != 0)
        .collect();
    let table_at = data
        .0
        .checked_add(data.1)
        .ok_or("its data section overflows")?;
    let table = read_at(file, table_at, 16 * set.len() as u64, file_len)
        .ok_or("its feature table lies beyond the end of the file (was perf record killed?)")?;
    let mut b = Bytes::new(&table, big_endian);
    for feature in set {
        let s = section(&mut b).map_err(|_| "its feature table is cut short")?;
        if !within(file_len, s) {
            return Err("a feature section lies beyond the end of the file");
        }
        if feature == HEADER_EVENT_DESC {
            let bytes = read_at(file, s.0, s.1, file_len).ok_or("its event list is unreadable")?;
            check_event_desc(&bytes, big_endian)
                .map_err(|_| "its event list (HEADER_EVENT_DESC) is damaged")?;
        }
    }
    Ok(())
}

/// Every event of `HEADER_EVENT_DESC` (attribute, id count, name, ids) fits in the section.
fn check_event_desc(section: &[u8], big_endian: bool) -> Result<(), Truncated> {
    let mut b = Bytes::new(section, big_endian);
    let count = b.u32()?;
    let attr_size = b.u32()? as usize;
    // Each event takes at least its attribute, its id count and its name's length.
    if (count as usize).saturating_mul(attr_size.saturating_add(8)) > b.remaining() {
        return Err(Truncated);
    }
    for _ in 0..count {
        b.take(attr_size)?;
        let ids = b.u32()?;
        b.header_string()?;
        b.skip_words(u64::from(ids))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::write::{EventAttr, FEATURE_NUMA_TOPOLOGY, PerfDataWriter};

    fn file() -> Vec<u8> {
        let mut w = PerfDataWriter::new();
        w.event(EventAttr {
            name: "e".into(),
            ids: vec![1, 2],
            ..EventAttr::default()
        });
        w.feature(FEATURE_NUMA_TOPOLOGY, vec![0; 4]);
        w.comm(1, 1, "prog", 0);
        w.finish()
    }

    fn word(b: &[u8], at: usize) -> u64 {
        u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
    }

    /// The checks of a file in `bytes`, its records walked both in memory and read: they agree.
    fn check_bytes(bytes: &[u8]) -> Result<(), Damage> {
        let mut cursor = std::io::Cursor::new(bytes);
        let (start, size) = check(&mut cursor, false)?;
        let read = check_records_read(&mut cursor, (start, size), false);
        let section = &bytes[start as usize..(start + size) as usize];
        assert_eq!(check_record_bytes(section, false, &mut |_| ()), read);
        read
    }

    #[test]
    fn sizes_beyond_the_file_are_damage_not_allocations() {
        let good = file();
        check_bytes(&good).unwrap();
        let data_end = |b: &[u8]| {
            let word = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
            (word(40) + word(48)) as usize
        };
        // The feature table follows the data, in feature order: the event list (12), then the
        // NUMA topology (14), each an offset and a size. The topology claims an exabyte.
        let mut huge = good.clone();
        let at = data_end(&huge) + 24;
        huge[at..at + 8].copy_from_slice(&(1u64 << 60).to_le_bytes());
        assert_eq!(
            check_bytes(&huge),
            Err("a feature section lies beyond the end of the file")
        );
        // The event list claims four billion events.
        let mut events = good.clone();
        let desc_at = data_end(&events);
        let offset = u64::from_le_bytes(events[desc_at..desc_at + 8].try_into().unwrap()) as usize;
        events[offset..offset + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(
            check_bytes(&events)
                .unwrap_err()
                .contains("HEADER_EVENT_DESC")
        );
        // A file cut inside its data.
        assert!(check_bytes(&good[..good.len() / 2]).is_err());
    }

    #[test]
    fn records_that_leave_the_data_section_are_damage() {
        let good = file();
        let data_at = word(&good, 40) as usize;
        // The COMM record becomes an AUXTRACE record whose data claims 52 TB.
        let mut aux = good.clone();
        aux[data_at..data_at + 4].copy_from_slice(&71u32.to_le_bytes());
        aux[data_at + 8..data_at + 16].copy_from_slice(&(52u64 << 40).to_le_bytes());
        assert_eq!(
            check_bytes(&aux),
            Err("a record's size takes it beyond the data section")
        );
        // A record of size 4.
        let mut tiny = good.clone();
        tiny[data_at + 6..data_at + 8].copy_from_slice(&4u16.to_le_bytes());
        assert_eq!(
            check_bytes(&tiny),
            Err("a record's size takes it beyond the data section")
        );
    }

    #[test]
    fn a_killed_recording_and_a_pipe_are_named() {
        let good = file();
        let mut killed = good.clone();
        killed[48..56].copy_from_slice(&0u64.to_le_bytes());
        assert!(check_bytes(&killed).unwrap_err().contains("was killed"));
        let mut pipe = good.clone();
        pipe[8..16].copy_from_slice(&16u64.to_le_bytes());
        assert!(check_bytes(&pipe).unwrap_err().contains("pipe"));
    }
}
