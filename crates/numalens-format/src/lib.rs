//! The numalens profile format, version 1.
//!
//! A profile is a directory `NAME.numalens/` holding `meta.json` ([`Meta`]) and one Parquet file
//! per table: `samples`, `threads`, `sites`, `objects`, `page_stats`, `migrations` (see
//! [`tables`]). pandas, polars, DuckDB and Spark read the tables directly. `docs/FORMAT.md`
//! documents every field and column.
//!
//! [`ProfileWriter`] streams rows into Parquet row groups with bounded memory; [`Profile`] reads
//! them back, whole or as projected batches. A reader rejects a newer major format version.

mod cluster;
mod columns;
mod doc;
pub mod error;
pub mod meta;
mod migrations;
mod page_headers;
mod parallel_encoder;
mod reader;
mod rungs;
mod short_names;
pub mod synth;
pub mod table;
pub mod tables;
mod writer;

pub use columns::{ColumnValue, Label};
pub use doc::column_reference;
pub use error::{FormatError, Result};
pub use meta::{
    Backend, Clock, Completeness, FORMAT_MAJOR, FORMAT_MINOR, Host, Meta, NumaBalancing, Overhead,
    ProgramExit, TableInfo,
};
pub use reader::{Batches, EVENTS_DIR, Profile};
pub use rungs::distinct_rungs;
pub use short_names::short_function_name;
pub use table::{ColumnEncoding, ColumnSpec, ROW_GROUP_ROWS, Row};
pub use tables::{
    CodeLocation, DataSource, Migration, Object, ObjectKind, PageNodes, PageStat, Sample,
    SampleKind, SiteFrame, Snoop, Thread, is_system_source,
};
pub use writer::{ProfileWriter, TableWriter};
