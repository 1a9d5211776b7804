//! Profile reader: opens a profile directory, checks its version, and reads tables whole (small
//! tables) or as projected record batches (samples), optionally in parallel over row groups.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use arrow_array::RecordBatch;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder};

use crate::error::{FormatError, Result};
use crate::meta::Meta;
use crate::table::Row;

/// Where a recording keeps the runtime's logs until its profile is written (`numalens recover`
/// reads them when it was not).
pub const EVENTS_DIR: &str = ".events";

/// Rows per record batch handed to callers.
const READ_BATCH_ROWS: usize = 64 * 1024;

/// An open profile directory.
#[derive(Debug, Clone)]
pub struct Profile {
    dir: PathBuf,
    meta: Meta,
}

impl Profile {
    /// Opens `dir`, reading and checking `meta.json`.
    pub fn open(dir: &Path) -> Result<Profile> {
        match std::fs::metadata(dir) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(FormatError::table(
                    dir,
                    "is a file, not a profile directory",
                ));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(FormatError::table(dir, "does not exist"));
            }
            Err(e) => return Err(FormatError::io(dir, e)),
        }
        let meta_path = dir.join("meta.json");
        // Only a meta.json that is not there makes this "not a profile"; one that cannot be
        // looked at (a directory without search permission) is an error of its own.
        match std::fs::metadata(&meta_path) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(FormatError::NotAProfile {
                    path: dir.to_path_buf(),
                });
            }
            Err(e) => return Err(FormatError::io(&meta_path, e)),
        }
        let meta = Meta::read(&meta_path)?;
        if meta.is_unfinished() {
            return Err(FormatError::Unfinished {
                path: dir.to_path_buf(),
                recoverable: dir.join(EVENTS_DIR).is_dir(),
            });
        }
        Ok(Profile {
            dir: dir.to_path_buf(),
            meta,
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn meta(&self) -> &Meta {
        &self.meta
    }

    /// Path of a table's Parquet file.
    pub fn table_path<R: Row>(&self) -> PathBuf {
        self.dir.join(format!("{}.parquet", R::TABLE))
    }

    /// Number of rows and row groups of a table, from its footer (no data is read).
    pub fn table_shape<R: Row>(&self) -> Result<(u64, usize)> {
        if self.predates::<R>() {
            return Ok((0, 0));
        }
        let (_, builder) = self.open_table::<R>()?;
        let meta = builder.metadata();
        let rows = meta.file_metadata().num_rows().max(0) as u64;
        Ok((rows, meta.num_row_groups()))
    }

    /// Every row of a table, all columns.
    pub fn read_all<R: Row>(&self) -> Result<Vec<R>> {
        let path = self.table_path::<R>();
        let mut rows = Vec::new();
        for batch in self.batches::<R>(None, None)? {
            rows.extend(R::from_batch(&batch?, &path)?);
        }
        Ok(rows)
    }

    /// Record batches of a table with only `columns` (all when `None`), from the given row groups
    /// (all when `None`).
    pub fn batches<R: Row>(
        &self,
        columns: Option<&[&str]>,
        row_groups: Option<Vec<usize>>,
    ) -> Result<Batches> {
        if self.predates::<R>() {
            return Ok(Batches {
                path: self.table_path::<R>(),
                inner: None,
            });
        }
        let (path, builder) = self.open_table::<R>()?;
        let mut builder = builder.with_batch_size(READ_BATCH_ROWS);
        if let Some(columns) = columns {
            check_columns::<R>(&path, columns)?;
            let mask = ProjectionMask::columns(builder.parquet_schema(), columns.iter().copied());
            builder = builder.with_projection(mask);
        }
        if let Some(groups) = row_groups {
            builder = builder.with_row_groups(groups);
        }
        let inner = builder
            .build()
            .map_err(|e| FormatError::table(&path, format!("cannot be read: {e}")))?;
        Ok(Batches {
            path,
            inner: Some(inner),
        })
    }

    /// True when the profile was written by a format minor version older than the table, so the
    /// table is absent and reads as empty.
    fn predates<R: Row>(&self) -> bool {
        let minor = self.meta.format_version.split('.').nth(1);
        let minor = minor.and_then(|m| m.parse::<u32>().ok()).unwrap_or(0);
        minor < R::SINCE_MINOR && !self.table_path::<R>().exists()
    }

    /// Calls `f` on every projected batch of a table, spreading row groups over `threads` threads.
    /// Batches of one row group arrive in order; different row groups interleave.
    pub fn for_each_batch_parallel<R, F>(
        &self,
        columns: &[&str],
        threads: usize,
        f: F,
    ) -> Result<()>
    where
        R: Row,
        F: Fn(RecordBatch) -> Result<()> + Sync,
    {
        let (_, groups) = self.table_shape::<R>()?;
        let threads = threads.clamp(1, groups.max(1));
        std::thread::scope(|scope| {
            let workers: Vec<_> = (0..threads)
                .map(|worker| {
                    let mine: Vec<usize> = (worker..groups).step_by(threads).collect();
                    let f = &f;
                    scope.spawn(move || -> Result<()> {
                        for batch in self.batches::<R>(Some(columns), Some(mine))? {
                            f(batch?)?;
                        }
                        Ok(())
                    })
                })
                .collect();
            workers
                .into_iter()
                .try_for_each(|w| w.join().expect("batch callbacks do not panic"))
        })
    }

    fn open_table<R: Row>(&self) -> Result<(PathBuf, ParquetRecordBatchReaderBuilder<File>)> {
        let path = self.table_path::<R>();
        let file = File::open(&path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => FormatError::MissingTable {
                path: self.dir.clone(),
                table: R::TABLE,
            },
            _ => FormatError::io(&path, e),
        })?;
        let checked = file.try_clone().map_err(|e| FormatError::io(&path, e))?;
        let opened = catch_unwind(AssertUnwindSafe(|| {
            ParquetRecordBatchReaderBuilder::try_new(file)
        }));
        match opened {
            Ok(Ok(builder)) => match crate::page_headers::check(&checked, builder.metadata()) {
                Ok(()) => Ok((path, builder)),
                Err(problem) => Err(FormatError::table(
                    &path,
                    format!("is corrupted: {problem}"),
                )),
            },
            Ok(Err(e)) => Err(self.diagnose_unreadable(&path, &e.to_string())),
            Err(_) => Err(self.diagnose_unreadable(&path, "the footer could not be decoded")),
        }
    }
}

fn check_columns<R: Row>(path: &Path, columns: &[&str]) -> Result<()> {
    for name in columns {
        if !R::COLUMNS.iter().any(|c| c.name == *name) {
            let known: Vec<_> = R::COLUMNS.iter().map(|c| c.name).collect();
            return Err(FormatError::table(
                path,
                format!("has no column `{name}` (columns: {})", known.join(", ")),
            ));
        }
    }
    Ok(())
}

impl Profile {
    /// Tells a truncated file from a corrupted one, and an interrupted recording from a file cut
    /// short after a recording that finished.
    fn diagnose_unreadable(&self, path: &Path, detail: &str) -> FormatError {
        let truncated = !has_parquet_footer(path).unwrap_or(false);
        let problem = match (truncated, self.meta.completeness.complete) {
            (true, false) => "is truncated (no Parquet footer): the recording was interrupted \
                              before this table was finished"
                .to_string(),
            (true, true) => "is truncated (no Parquet footer) although meta.json says the \
                             recording finished: the file was cut short or damaged afterwards \
                             (a full disk, an incomplete copy); copy the profile again"
                .to_string(),
            (false, _) => format!("is corrupted: {detail}"),
        };
        FormatError::table(path, problem)
    }
}

fn has_parquet_footer(path: &Path) -> std::io::Result<bool> {
    let mut file = File::open(path)?;
    let len = file.metadata()?.len();
    if len < 12 {
        return Ok(false);
    }
    let mut tail = [0u8; 4];
    file.seek(SeekFrom::End(-4))?;
    file.read_exact(&mut tail)?;
    Ok(&tail == b"PAR1")
}

/// Record batches of one table; decoding errors name the file.
pub struct Batches {
    path: PathBuf,
    /// `None` for a table the profile predates.
    inner: Option<ParquetRecordBatchReader>,
}

impl Iterator for Batches {
    type Item = Result<RecordBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        // The Parquet decoders may panic on some corrupted pages; a corrupted file must give an
        // error naming it, never bring the whole tool down.
        let inner = self.inner.as_mut()?;
        let next = catch_unwind(AssertUnwindSafe(|| inner.next()));
        match next {
            Ok(None) => None,
            Ok(Some(Ok(batch))) => Some(Ok(batch)),
            Ok(Some(Err(e))) => Some(Err(FormatError::table(
                &self.path,
                format!("is corrupted: {e}"),
            ))),
            Err(_) => Some(Err(FormatError::table(
                &self.path,
                "is corrupted: a data page could not be decoded",
            ))),
        }
    }
}
