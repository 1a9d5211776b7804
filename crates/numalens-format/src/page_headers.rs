//! Page headers checked before the Parquet decoder trusts them.
//!
//! The `parquet` crate sizes a page's decompression buffer by the uncompressed size its header
//! declares, and for LZ4_RAW fills that buffer with zeros before decompressing: a lying header
//! makes a few-kilobyte file take gigabytes of memory. So before a table is decoded, every page
//! header of every column chunk is read (Thrift compact protocol, only as far as its sizes; the
//! page data is skipped) and a page that declares more than its codec can give from its compressed
//! size, or more than numalens ever writes in one page, makes the table corrupted. Codecs
//! numalens never writes are refused by name.

use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};

use parquet::basic::Compression;
use parquet::file::metadata::{ColumnChunkMetaData, ParquetMetaData};

/// numalens writes pages of about 1 MiB (the writer's default limit, overshot by at most one
/// batch of values): anything far beyond is not one of its pages.
const MAX_PAGE: u64 = 64 << 20;
/// LZ4's block format gives at most about 255 bytes per compressed byte.
const LZ4_RATIO: u64 = 256;
/// Thrift structures nest this deep at most in a page header (statistics inside a data page
/// header); deeper is corruption, and recursion must stay bounded.
const MAX_DEPTH: u32 = 16;

/// Checks every page header of `meta`'s column chunks in `file` (the very file the decoder reads,
/// not one found again by its path); the error says which page of which column is wrong and why.
pub fn check(file: &File, meta: &ParquetMetaData) -> Result<(), String> {
    let file = file.try_clone().map_err(|e| e.to_string())?;
    let len = file.metadata().map_err(|e| e.to_string())?.len();
    let mut reader = BufReader::with_capacity(8 << 10, file);
    for group in meta.row_groups() {
        for column in group.columns() {
            check_chunk(&mut reader, len, column)?;
        }
    }
    Ok(())
}

fn check_chunk(
    reader: &mut BufReader<File>,
    len: u64,
    column: &ColumnChunkMetaData,
) -> Result<(), String> {
    let name = column.column_path().string();
    let codec = column.compression();
    if !matches!(
        codec,
        Compression::UNCOMPRESSED | Compression::LZ4_RAW | Compression::ZSTD(_)
    ) {
        return Err(format!(
            "column `{name}` is compressed with {codec}, which numalens never writes (it writes \
             zstd, LZ4_RAW or uncompressed columns): this file was not written by numalens"
        ));
    }
    // Where the decoder starts reading the chunk (`ColumnChunkMetaData::byte_range`).
    let start = column
        .dictionary_page_offset()
        .unwrap_or(column.data_page_offset());
    let (Ok(start), Ok(size)) = (
        u64::try_from(start),
        u64::try_from(column.compressed_size()),
    ) else {
        return Err(format!("column `{name}` has a negative offset or size"));
    };
    let end = start
        .checked_add(size)
        .filter(|end| *end <= len)
        .ok_or_else(|| format!("column `{name}` reaches past the end of the file"))?;
    let mut at = start;
    while at < end {
        reader
            .seek(SeekFrom::Start(at))
            .map_err(|e| e.to_string())?;
        let mut input = Limited {
            inner: reader,
            left: end - at,
        };
        let header = PageSizes::read(&mut input)
            .ok_or_else(|| format!("column `{name}`: the page header at byte {at} is damaged"))?;
        let header_len = end - at - input.left;
        let bound = match codec {
            Compression::LZ4_RAW => (header.compressed * LZ4_RATIO + 1024).min(MAX_PAGE),
            _ => MAX_PAGE,
        };
        if header.uncompressed > bound {
            return Err(format!(
                "column `{name}`: the page at byte {at} declares {} bytes uncompressed from {} \
                 compressed, more than {codec} can give or numalens writes in a page",
                header.uncompressed, header.compressed
            ));
        }
        // The decoder makes room for every value of a dictionary before it decodes one: each
        // takes at least its plain width in the page.
        if header.dictionary_values.saturating_mul(plain_width(column)) > header.uncompressed {
            return Err(format!(
                "column `{name}`: the dictionary page at byte {at} declares {} values in {} bytes",
                header.dictionary_values, header.uncompressed
            ));
        }
        at = at
            .checked_add(header_len + header.compressed)
            .filter(|next| *next <= end)
            .ok_or_else(|| {
                format!("column `{name}`: the page at byte {at} reaches past its column chunk")
            })?;
    }
    Ok(())
}

/// The fewest bytes a value of `column` takes plain-encoded (a byte array's length prefix).
fn plain_width(column: &ColumnChunkMetaData) -> u64 {
    use parquet::basic::Type;
    match column.column_type() {
        Type::BOOLEAN => 1,
        Type::INT32 | Type::FLOAT | Type::BYTE_ARRAY => 4,
        Type::INT64 | Type::DOUBLE => 8,
        Type::INT96 => 12,
        Type::FIXED_LEN_BYTE_ARRAY => column.column_descr().type_length().max(1) as u64,
    }
}

/// A reader that ends after `left` bytes: a header never reads past its column chunk.
struct Limited<'a> {
    inner: &'a mut BufReader<File>,
    left: u64,
}

impl Limited<'_> {
    fn byte(&mut self) -> Option<u8> {
        let mut b = [0u8];
        self.bytes(&mut b)?;
        Some(b[0])
    }

    fn bytes(&mut self, out: &mut [u8]) -> Option<()> {
        self.left = self.left.checked_sub(out.len() as u64)?;
        self.inner.read_exact(out).ok()
    }

    fn skip(&mut self, n: u64) -> Option<()> {
        self.left = self.left.checked_sub(n)?;
        self.inner.seek_relative(i64::try_from(n).ok()?).ok()
    }

    fn varint(&mut self) -> Option<u64> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            value |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Some(value);
            }
        }
        None
    }

    fn zigzag(&mut self) -> Option<i64> {
        let v = self.varint()?;
        Some((v >> 1) as i64 ^ -((v & 1) as i64))
    }

    /// An i32 as the decoder reads it: zigzag-decoded as an i64, then cut to 32 bits.
    fn zigzag32(&mut self) -> Option<i32> {
        Some(self.zigzag()? as i32)
    }
}

/// The two sizes of a `PageHeader` (fields 2 and 3, both required), and the number of values of
/// a dictionary page (0 for other pages), which the decoder sizes its dictionary by.
struct PageSizes {
    uncompressed: u64,
    compressed: u64,
    dictionary_values: u64,
}

/// What a header's fields gave, as the decoder keeps them (the last of a repeated one).
#[derive(Default)]
struct Found {
    uncompressed: Option<i32>,
    compressed: Option<i32>,
    dictionary_values: Option<i32>,
}

/// Compact-protocol type codes.
const STOP: u8 = 0;
const TRUE: u8 = 1;
const FALSE: u8 = 2;
const BYTE: u8 = 3;
const I16: u8 = 4;
const I32: u8 = 5;
const I64: u8 = 6;
const DOUBLE: u8 = 7;
const BINARY: u8 = 8;
const LIST: u8 = 9;
const SET: u8 = 10;
const MAP: u8 = 11;
const STRUCT: u8 = 12;

/// The structures of a page header (parquet.thrift). The decoder reads a known field by its id
/// whatever type the bytes declare, so a known field declared with another type would be read
/// differently here and there: that makes the header damaged.
#[derive(Clone, Copy, PartialEq)]
enum Schema {
    PageHeader,
    DataPage,
    IndexPage,
    DictionaryPage,
    DataPageV2,
    Statistics,
}

/// What a known field of `schema` is: its type, and its schema when it is a structure.
fn field(schema: Schema, id: i16) -> Option<(u8, Option<Schema>)> {
    use Schema::*;
    match (schema, id) {
        (PageHeader | DataPage, 1..=4) | (DictionaryPage, 1..=2) | (DataPageV2, 1..=6) => {
            Some((I32, None))
        }
        (PageHeader, 5) => Some((STRUCT, Some(DataPage))),
        (PageHeader, 6) => Some((STRUCT, Some(IndexPage))),
        (PageHeader, 7) => Some((STRUCT, Some(DictionaryPage))),
        (PageHeader, 8) => Some((STRUCT, Some(DataPageV2))),
        (DataPage, 5) | (DataPageV2, 8) => Some((STRUCT, Some(Statistics))),
        (DictionaryPage, 3) | (DataPageV2, 7) | (Statistics, 7..=8) => Some((TRUE, None)),
        (Statistics, 1 | 2 | 5 | 6) => Some((BINARY, None)),
        (Statistics, 3 | 4) => Some((I64, None)),
        _ => None,
    }
}

impl PageSizes {
    /// Reads one page header whole; `None` if it is not a well-formed one.
    fn read(input: &mut Limited<'_>) -> Option<PageSizes> {
        let mut found = Found::default();
        read_struct(input, Schema::PageHeader, 0, &mut found)?;
        Some(PageSizes {
            uncompressed: u64::try_from(found.uncompressed?).ok()?,
            compressed: u64::try_from(found.compressed?).ok()?,
            dictionary_values: u64::try_from(found.dictionary_values.unwrap_or(0)).ok()?,
        })
    }
}

/// Reads a structure of `schema`, keeping what the check needs in `found`. Field ids are i16 as
/// the decoder reads them.
fn read_struct(
    input: &mut Limited<'_>,
    schema: Schema,
    depth: u32,
    found: &mut Found,
) -> Option<()> {
    if depth > MAX_DEPTH {
        return None;
    }
    let mut id: i16 = 0;
    loop {
        let head = input.byte()?;
        let kind = head & 0x0f;
        if kind == STOP {
            return Some(());
        }
        id = match head >> 4 {
            0 => input.zigzag()? as i16,
            delta => id.checked_add(i16::from(delta))?,
        };
        let Some((expected, inner)) = field(schema, id) else {
            skip_value(input, kind, depth)?;
            continue;
        };
        let declared = if kind == FALSE { TRUE } else { kind };
        if declared != expected {
            return None;
        }
        match (inner, expected) {
            (Some(inner), _) => read_struct(input, inner, depth + 1, found)?,
            (None, I32) => {
                let value = input.zigzag32()?;
                match (schema, id) {
                    (Schema::PageHeader, 2) => found.uncompressed = Some(value),
                    (Schema::PageHeader, 3) => found.compressed = Some(value),
                    (Schema::DictionaryPage, 1) => found.dictionary_values = Some(value),
                    _ => {}
                }
            }
            (None, _) => skip_value(input, kind, depth)?,
        }
    }
}

/// Skips one value of compact-protocol type `kind` of a field this check does not know.
fn skip_value(input: &mut Limited<'_>, kind: u8, depth: u32) -> Option<()> {
    if depth > MAX_DEPTH {
        return None;
    }
    match kind {
        TRUE | FALSE => Some(()),
        BYTE => input.skip(1),
        I16 | I32 | I64 => input.varint().map(drop),
        DOUBLE => input.skip(8),
        BINARY => {
            let n = input.varint()?;
            input.skip(n)
        }
        LIST | SET => {
            let head = input.byte()?;
            let n = match head >> 4 {
                15 => input.varint()?,
                n => u64::from(n),
            };
            skip_elements(input, head & 0x0f, n, depth)
        }
        MAP => {
            let n = input.varint()?;
            if n == 0 {
                return Some(());
            }
            let types = input.byte()?;
            (0..n).try_for_each(|_| {
                skip_element(input, types >> 4, depth)?;
                skip_element(input, types & 0x0f, depth)
            })
        }
        STRUCT => loop {
            let head = input.byte()?;
            if head & 0x0f == STOP {
                return Some(());
            }
            if head >> 4 == 0 {
                input.zigzag()?;
            }
            skip_value(input, head & 0x0f, depth + 1)?;
        },
        _ => None,
    }
}

/// Elements of a list or set: every element takes at least one byte, so a count larger than
/// what is left ends the reading with an error before it loops that long.
fn skip_elements(input: &mut Limited<'_>, kind: u8, n: u64, depth: u32) -> Option<()> {
    if n > input.left {
        return None;
    }
    (0..n).try_for_each(|_| skip_element(input, kind, depth))
}

/// One element of a collection. Booleans there are refused: the decoder skips them without
/// reading a byte each, so where the header ends would differ, and no page header has them.
fn skip_element(input: &mut Limited<'_>, kind: u8, depth: u32) -> Option<()> {
    match kind {
        TRUE | FALSE => None,
        _ => skip_value(input, kind, depth + 1),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{Int64Array, RecordBatch};
    use parquet::arrow::ArrowWriter;
    use parquet::file::properties::WriterProperties;
    use parquet::file::reader::{FileReader, SerializedFileReader};

    use std::path::Path;

    use super::*;

    /// The sizes a header made of `bytes` gives, if it is well-formed.
    fn parse(bytes: &[u8]) -> Option<(u64, u64)> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h");
        std::fs::write(&path, bytes).unwrap();
        let mut reader = BufReader::new(File::open(&path).unwrap());
        let mut input = Limited {
            inner: &mut reader,
            left: bytes.len() as u64,
        };
        PageSizes::read(&mut input).map(|p| (p.uncompressed, p.compressed))
    }

    /// Headers read as the decoder reads them: ids as i16 (a long id of 65538 is field 2), the
    /// last of a repeated field, and a known field declared with another type is damaged.
    #[test]
    fn headers_are_read_as_the_decoder_reads_them() {
        // type 0, uncompressed 100, compressed 10, stop.
        let sound = [0x15, 0x00, 0x15, 0xc8, 0x01, 0x15, 0x14, 0x00];
        assert_eq!(parse(&sound), Some((100, 10)));
        // Then field 65538 (long form: i16 zigzag varint of 65538 = 0x20004), i32 1 GiB.
        let mut long_id = sound[..7].to_vec();
        long_id.extend([0x05, 0x84, 0x80, 0x08, 0x80, 0x80, 0x80, 0x80, 0x08, 0x00]);
        assert_eq!(parse(&long_id), Some((1 << 30, 10)));
        // Field 2 declared as an i64: damaged.
        assert_eq!(
            parse(&[0x15, 0x00, 0x16, 0xc8, 0x01, 0x15, 0x14, 0x00]),
            None
        );
        // An unknown field holding a list of booleans: damaged.
        assert_eq!(
            parse(&[
                0x15, 0x00, 0x15, 0xc8, 0x01, 0x15, 0x14, 0x69, 0x21, 0x01, 0x00
            ]),
            None
        );
        // Field ids that overflow an i16 by deltas: damaged, not a panic.
        let mut overflow = vec![0x05, 0xfe, 0xff, 0x03, 0x00];
        overflow.extend([0xf5, 0x00, 0x00]);
        assert_eq!(parse(&overflow), None);
        // A required size missing or negative: damaged.
        assert_eq!(parse(&[0x15, 0x00, 0x15, 0xc8, 0x01, 0x00]), None);
        assert_eq!(parse(&[0x15, 0x00, 0x15, 0x01, 0x15, 0x14, 0x00]), None);
    }

    /// A one-column table of repeated values under `codec`, and where its data page starts.
    fn table(path: &Path, codec: Compression) -> u64 {
        let column = Int64Array::from(vec![7i64; 4096]);
        let batch = RecordBatch::try_from_iter([("v", Arc::new(column) as _)]).unwrap();
        let props = WriterProperties::builder()
            .set_compression(codec)
            .set_dictionary_enabled(false)
            .build();
        let mut w =
            ArrowWriter::try_new(File::create(path).unwrap(), batch.schema(), Some(props)).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        let meta = metadata(path);
        meta.row_group(0).column(0).data_page_offset() as u64
    }

    fn metadata(path: &Path) -> ParquetMetaData {
        let reader = SerializedFileReader::new(File::open(path).unwrap()).unwrap();
        reader.metadata().clone()
    }

    #[test]
    fn sound_pages_pass_and_a_lying_size_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.parquet");
        let page = table(&path, Compression::LZ4_RAW) as usize;
        assert_eq!(check(&File::open(&path).unwrap(), &metadata(&path)), Ok(()));
        // Field 1 (the page type, 0), then field 2: the uncompressed size, a varint; made the
        // largest positive value of the same length.
        let mut bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[page..page + 3], &[0x15, 0x00, 0x15]);
        let mut at = page + 3;
        while bytes[at] & 0x80 != 0 {
            bytes[at] = 0xfe | (bytes[at] & 0x80);
            at += 1;
        }
        bytes[at] = 0x7f;
        bytes[page + 3] &= !1; // even: a positive zigzag value
        std::fs::write(&path, &bytes).unwrap();
        let e = check(&File::open(&path).unwrap(), &metadata(&path)).unwrap_err();
        assert!(
            e.contains("column `v`") && e.contains("bytes uncompressed"),
            "{e}"
        );
    }

    /// A dictionary page that declares more values than its bytes hold: the decoder would make
    /// room for all of them first.
    #[test]
    fn a_dictionary_of_more_values_than_its_page_holds_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.parquet");
        let column = Int64Array::from(vec![7i64; 4096]);
        let batch = RecordBatch::try_from_iter([("v", Arc::new(column) as _)]).unwrap();
        let props = WriterProperties::builder()
            .set_compression(Compression::UNCOMPRESSED)
            .set_dictionary_enabled(true)
            .build();
        let mut w = ArrowWriter::try_new(File::create(&path).unwrap(), batch.schema(), Some(props))
            .unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        assert_eq!(check(&File::open(&path).unwrap(), &metadata(&path)), Ok(()));
        let meta = metadata(&path);
        let at = meta
            .row_group(0)
            .column(0)
            .dictionary_page_offset()
            .unwrap() as usize;
        // Field 7 (the dictionary page header, delta 4 from field 3), then its field 1: one
        // value, the zigzag varint 0x02; made 63 (0x7e) in the same byte.
        let mut bytes = std::fs::read(&path).unwrap();
        let field = (at..at + 32)
            .find(|&i| bytes[i] == 0x4c && bytes[i + 1] == 0x15 && bytes[i + 2] == 0x02)
            .expect("the dictionary page header");
        bytes[field + 2] = 0x7e;
        std::fs::write(&path, &bytes).unwrap();
        let e = check(&File::open(&path).unwrap(), &meta).unwrap_err();
        assert!(e.contains("declares 63 values in 8 bytes"), "{e}");
    }

    #[test]
    fn codecs_numalens_never_writes_are_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.parquet");
        table(&path, Compression::SNAPPY);
        let e = check(&File::open(&path).unwrap(), &metadata(&path)).unwrap_err();
        assert!(
            e.contains("SNAPPY") && e.contains("not written by numalens"),
            "{e}"
        );
        table(&path, Compression::UNCOMPRESSED);
        assert_eq!(check(&File::open(&path).unwrap(), &metadata(&path)), Ok(()));
    }

    /// Bytes that are no page header end the check with an error, never a panic or a long loop.
    #[test]
    fn damaged_headers_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.parquet");
        let page = table(&path, Compression::UNCOMPRESSED) as usize;
        let meta = metadata(&path);
        let original = std::fs::read(&path).unwrap();
        for garbage in [
            &[0x19u8, 0xfc, 0xff, 0xff, 0xff, 0x0f][..],
            &[0x1c; 8],
            &[0xff; 8],
        ] {
            let mut bytes = original.clone();
            bytes[page..page + garbage.len()].copy_from_slice(garbage);
            std::fs::write(&path, &bytes).unwrap();
            assert!(
                check(&File::open(&path).unwrap(), &meta).is_err(),
                "{garbage:?}"
            );
        }
    }
}
