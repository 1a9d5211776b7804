//! A table of the profile: a Rust row type, its Arrow schema and its Parquet encodings, declared
//! once with [`table!`] so that the writer, the reader and the docs cannot disagree.

use std::path::Path;

use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::SchemaRef;
use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::file::properties::{EnabledStatistics, WriterProperties, WriterVersion};
use parquet::schema::types::ColumnPath;

use crate::error::Result;

/// Rows per Parquet row group. Bounds the writer's memory (one encoded row group is buffered) and
/// is the unit of parallel reading.
pub const ROW_GROUP_ROWS: usize = 1 << 20;

/// How a column is encoded in Parquet; chosen per column for size and decoding speed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnEncoding {
    /// Dictionary + RLE/bit-packing: for columns with few distinct values (tid, kind, node).
    Dict,
    /// DELTA_BINARY_PACKED: for increasing or clustered integers (time, addresses).
    Delta,
    /// Plain values, no dictionary: for columns with mostly distinct values.
    Plain,
    /// BYTE_STREAM_SPLIT + compression: byte planes of wide values compress separately.
    Split,
}

/// One column: name and encoding.
#[derive(Debug, Clone, Copy)]
pub struct ColumnSpec {
    pub name: &'static str,
    pub encoding: ColumnEncoding,
    /// Column documentation (from the field's doc comment), used by `docs/FORMAT.md` checks.
    pub doc: &'static str,
}

/// A row type of one profile table.
pub trait Row: Sized {
    /// Table name; the file is `TABLE.parquet` inside the profile directory.
    const TABLE: &'static str;
    /// The format minor version that added the table; profiles of older minor versions do not
    /// have it, and read it as empty.
    const SINCE_MINOR: u32 = 0;
    const COLUMNS: &'static [ColumnSpec];
    fn schema() -> SchemaRef;
    /// A write batch of these rows, stored column by column.
    type Columns: Columns<Self>;
    /// Rows with equal keys are stored next to each other within a write batch (keeping their
    /// order), which lets per-thread columns compress to almost nothing; `None` keeps row order.
    fn cluster_key(&self) -> Option<u64> {
        None
    }
    /// Rows of a batch that holds every column of the table (extra columns are ignored).
    fn from_batch(batch: &RecordBatch, path: &Path) -> Result<Vec<Self>>;
}

/// A write batch of rows stored column by column: each row is split into its columns as it comes,
/// so that building a column's array later reads one contiguous vector, not every row again (a
/// samples row is over a hundred bytes, and reading every row once per column made the Arrow
/// columns as costly as their Parquet encoding).
pub trait Columns<R>: Default + Send + Sync + 'static {
    fn push(&mut self, row: R);
    fn clear(&mut self);
    /// Room for `rows` rows in every column.
    fn reserve(&mut self, rows: usize);
    /// The Arrow array of `column` (an index into `Row::COLUMNS`) of the rows at `order`.
    fn array(&self, column: usize, order: &[u32]) -> ArrayRef;
}

/// How the compressed columns of a table are compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableSize {
    /// At least one full write batch: zstd level 1, fast, and it halves what the encodings
    /// leave.
    Large,
    /// Fewer rows than one write batch: LZ4_RAW. A zstd compressor and decompressor are made for
    /// every column of a row group, and making one probes the CPU (`cpuid`, which a VM traps:
    /// about 6 us each here), so zstd cost a small profile's eight tables more to set up than to
    /// compress. LZ4 needs no set-up, and on a few thousand rows the difference in size is a few
    /// KiB.
    Small,
}

/// Parquet writer settings for a table: the codec for its size, per-column encodings, row-group
/// size and chunk-level statistics (enough for time-range pruning without the cost of per-page
/// statistics).
pub fn writer_properties<R: Row>(size: TableSize) -> WriterProperties {
    let compression = match size {
        TableSize::Large => Compression::ZSTD(ZstdLevel::try_new(1).expect("level 1 is valid")),
        TableSize::Small => Compression::LZ4_RAW,
    };
    let mut props = WriterProperties::builder()
        .set_writer_version(WriterVersion::PARQUET_2_0)
        .set_compression(compression)
        .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
        .set_statistics_enabled(EnabledStatistics::Chunk)
        .set_created_by(format!("numalens {}", crate::meta::TOOL_VERSION));
    let schema = R::schema();
    for column in R::COLUMNS {
        let path = ColumnPath::from(column.name);
        if is_label(&schema, column.name) {
            // A label column's min/max is a string comparison per row (a tenth of the time to
            // write a sampled profile), and no reader filters row groups by label.
            props = props.set_column_statistics_enabled(path.clone(), EnabledStatistics::None);
        }
        props = match column.encoding {
            ColumnEncoding::Dict => props.set_column_dictionary_enabled(path, true),
            // Compression gains nothing on bit-packed deltas and costs write time.
            ColumnEncoding::Delta => props
                .set_column_dictionary_enabled(path.clone(), false)
                .set_column_compression(path.clone(), Compression::UNCOMPRESSED)
                .set_column_encoding(path, Encoding::DELTA_BINARY_PACKED),
            ColumnEncoding::Split => props
                .set_column_dictionary_enabled(path.clone(), false)
                .set_column_encoding(path, Encoding::BYTE_STREAM_SPLIT),
            ColumnEncoding::Plain => props
                .set_column_dictionary_enabled(path.clone(), false)
                .set_column_encoding(path, Encoding::PLAIN),
        };
    }
    props.build()
}

/// Whether `column` holds an enum's labels (a dictionary of strings, `columns.rs`).
fn is_label(schema: &SchemaRef, column: &str) -> bool {
    schema.field_with_name(column).is_ok_and(|f| {
        matches!(f.data_type(), arrow_schema::DataType::Dictionary(_, value)
            if **value == arrow_schema::DataType::Utf8)
    })
}

/// Declares a table row struct, its columns (with encodings) and its Arrow mapping.
macro_rules! table {
    (
        $(#[$meta:meta])*
        pub struct $name:ident in $table:literal $(since $since:literal)?, columns $columns:ident $(, cluster $row:ident => $key:block)? {
            $( #[doc = $doc:literal] pub $field:ident : $ty:ty => $enc:ident, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq)]
        pub struct $name { $( #[doc = $doc] pub $field: $ty, )* }

        #[doc = concat!("A write batch of [`", stringify!($name), "`] rows, column by column.")]
        #[derive(Debug, Default)]
        pub struct $columns { $( $field: Vec<$ty>, )* }

        impl $crate::table::Columns<$name> for $columns {
            fn push(&mut self, row: $name) {
                $( self.$field.push(row.$field); )*
            }
            fn clear(&mut self) {
                $( self.$field.clear(); )*
            }
            fn reserve(&mut self, rows: usize) {
                $( self.$field.reserve_exact(rows); )*
            }
            fn array(&self, column: usize, order: &[u32]) -> arrow_array::ArrayRef {
                use $crate::columns::ColumnValue;
                type Build<C> = fn(&C, &[u32]) -> arrow_array::ArrayRef;
                let builds: &[Build<Self>] = &[$(
                    |c, order| <$ty as ColumnValue>::build(
                        order.iter().map(|&i| &c.$field[i as usize]),
                    ),
                )*];
                builds[column](self, order)
            }
        }

        impl $crate::table::Row for $name {
            const TABLE: &'static str = $table;
            type Columns = $columns;
            $( const SINCE_MINOR: u32 = $since; )?
            const COLUMNS: &'static [$crate::table::ColumnSpec] = &[$(
                $crate::table::ColumnSpec {
                    name: stringify!($field),
                    encoding: $crate::table::ColumnEncoding::$enc,
                    doc: $doc,
                },
            )*];

            $(
                fn cluster_key(&self) -> Option<u64> {
                    let $row = self;
                    Some($key)
                }
            )?

            fn schema() -> arrow_schema::SchemaRef {
                use $crate::columns::ColumnValue;
                std::sync::Arc::new(arrow_schema::Schema::new(vec![$(
                    arrow_schema::Field::new(
                        stringify!($field),
                        <$ty as ColumnValue>::data_type(),
                        <$ty as ColumnValue>::nullable(),
                    ),
                )*]))
            }

            fn from_batch(
                batch: &arrow_array::RecordBatch,
                path: &std::path::Path,
            ) -> $crate::error::Result<Vec<Self>> {
                use $crate::columns::ColumnValue;
                $(
                    // Optional columns added by a later minor version read as missing values.
                    let mut $field = match batch.column_by_name(stringify!($field)) {
                        Some(column) => {
                            <$ty as ColumnValue>::extract(column, path, stringify!($field))?
                        }
                        None => <$ty as ColumnValue>::absent(batch.num_rows()).ok_or_else(|| {
                            $crate::columns::column_error(path, stringify!($field), "is missing")
                        })?,
                    }
                    .into_iter();
                )*
                let mut rows = Vec::with_capacity(batch.num_rows());
                for _ in 0..batch.num_rows() {
                    rows.push($name { $( $field: $field.next().expect("column has a value per row"), )* });
                }
                Ok(rows)
            }
        }
    };
}
pub(crate) use table;
