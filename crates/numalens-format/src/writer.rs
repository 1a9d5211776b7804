//! Streaming profile writer: rows are buffered in small batches, encoded into Parquet row groups
//! as they fill, and flushed to disk, so memory stays bounded whatever the number of rows.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use arrow_array::RecordBatch;
use parquet::arrow::ArrowWriter;

use crate::cluster::clustered;
use crate::error::{FormatError, Result};
use crate::meta::{Completeness, Meta, TableInfo, unix_now_ns};
use crate::table::{Row, writer_properties};
use crate::tables::{
    CodeLocation, Migration, Object, PageNodes, PageStat, Sample, SiteFrame, Thread,
};

/// Rows converted to Arrow at a time. Small enough to stay in cache-sized buffers, large enough
/// that per-batch overhead is negligible.
const BATCH_ROWS: usize = 64 * 1024;

/// Writes one table, `TABLE.parquet`.
pub struct TableWriter<R: Row> {
    path: PathBuf,
    writer: ArrowWriter<BufWriter<File>>,
    buffer: Vec<R>,
    rows: u64,
}

impl<R: Row> TableWriter<R> {
    /// Creates `dir/TABLE.parquet`.
    pub fn create(dir: &Path) -> Result<Self> {
        let path = dir.join(format!("{}.parquet", R::TABLE));
        let file = File::create(&path).map_err(|e| FormatError::io(&path, e))?;
        let sink = BufWriter::with_capacity(1 << 20, file);
        let writer = ArrowWriter::try_new(sink, R::schema(), Some(writer_properties::<R>()))
            .map_err(|e| FormatError::table(&path, e.to_string()))?;
        Ok(TableWriter {
            path,
            writer,
            buffer: Vec::with_capacity(BATCH_ROWS),
            rows: 0,
        })
    }

    /// Appends one row.
    pub fn push(&mut self, row: R) -> Result<()> {
        self.buffer.push(row);
        if self.buffer.len() == BATCH_ROWS {
            self.flush_batch()?;
        }
        Ok(())
    }

    /// Rows written so far.
    pub fn rows(&self) -> u64 {
        self.rows + self.buffer.len() as u64
    }

    fn flush_batch(&mut self) -> Result<()> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        let batch = RecordBatch::try_new(R::schema(), R::to_arrays(&clustered(&self.buffer)))
            .map_err(|e| FormatError::table(&self.path, e.to_string()))?;
        self.writer
            .write(&batch)
            .map_err(|e| FormatError::table(&self.path, format!("write failed: {e}")))?;
        self.rows += self.buffer.len() as u64;
        self.buffer.clear();
        Ok(())
    }

    /// Writes buffered rows and the Parquet footer; returns the number of rows.
    pub fn finish(mut self) -> Result<u64> {
        self.flush_batch()?;
        self.writer
            .close()
            .map_err(|e| FormatError::table(&self.path, format!("could not finish: {e}")))?;
        Ok(self.rows)
    }
}

/// All tables of a profile being written.
struct Tables {
    samples: TableWriter<Sample>,
    threads: TableWriter<Thread>,
    sites: TableWriter<SiteFrame>,
    objects: TableWriter<Object>,
    page_stats: TableWriter<PageStat>,
    migrations: TableWriter<Migration>,
    page_nodes: TableWriter<PageNodes>,
    code_locations: TableWriter<CodeLocation>,
}

/// Writes a profile directory. `meta.json` is written first, marked incomplete, and rewritten when
/// [`ProfileWriter::finish`] is called, so an interrupted recording is recognisable as such. A
/// writer dropped without `finish` still finishes its tables, marked incomplete.
pub struct ProfileWriter {
    dir: PathBuf,
    meta: Meta,
    tables: Option<Tables>,
}

impl ProfileWriter {
    /// Creates the profile directory `dir` (which must not hold a profile already).
    pub fn create(dir: &Path, meta: Meta) -> Result<Self> {
        if dir.join("meta.json").exists() {
            return Err(FormatError::table(
                dir,
                "a profile already exists here; remove it or choose another output name",
            ));
        }
        std::fs::create_dir_all(dir).map_err(|e| FormatError::io(dir, e))?;
        meta.write(&dir.join("meta.json"))?;
        let tables = Tables {
            samples: TableWriter::create(dir)?,
            threads: TableWriter::create(dir)?,
            sites: TableWriter::create(dir)?,
            objects: TableWriter::create(dir)?,
            page_stats: TableWriter::create(dir)?,
            migrations: TableWriter::create(dir)?,
            page_nodes: TableWriter::create(dir)?,
            code_locations: TableWriter::create(dir)?,
        };
        Ok(ProfileWriter {
            dir: dir.to_path_buf(),
            meta,
            tables: Some(tables),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The meta that will be written at the end; recorders fill in counts as they go.
    pub fn meta_mut(&mut self) -> &mut Meta {
        &mut self.meta
    }

    fn tables(&mut self) -> &mut Tables {
        self.tables.as_mut().expect("tables are open until finish")
    }

    pub fn push_sample(&mut self, row: Sample) -> Result<()> {
        self.tables().samples.push(row)
    }
    pub fn push_thread(&mut self, row: Thread) -> Result<()> {
        self.tables().threads.push(row)
    }
    pub fn push_site_frame(&mut self, row: SiteFrame) -> Result<()> {
        self.tables().sites.push(row)
    }
    pub fn push_object(&mut self, row: Object) -> Result<()> {
        self.tables().objects.push(row)
    }
    pub fn push_page_stat(&mut self, row: PageStat) -> Result<()> {
        self.tables().page_stats.push(row)
    }
    pub fn push_migration(&mut self, row: Migration) -> Result<()> {
        self.tables().migrations.push(row)
    }
    pub fn push_page_nodes(&mut self, row: PageNodes) -> Result<()> {
        self.tables().page_nodes.push(row)
    }
    pub fn push_code_location(&mut self, row: CodeLocation) -> Result<()> {
        self.tables().code_locations.push(row)
    }

    /// Finishes every table and writes the final `meta.json` with `completeness`.
    pub fn finish(mut self, completeness: Completeness) -> Result<Meta> {
        self.finish_inner(completeness)?;
        Ok(self.meta.clone())
    }

    fn finish_inner(&mut self, completeness: Completeness) -> Result<()> {
        let Some(t) = self.tables.take() else {
            return Ok(());
        };
        let counts = [
            ("samples", t.samples.finish()?),
            ("threads", t.threads.finish()?),
            ("sites", t.sites.finish()?),
            ("objects", t.objects.finish()?),
            ("page_stats", t.page_stats.finish()?),
            ("migrations", t.migrations.finish()?),
            ("page_nodes", t.page_nodes.finish()?),
            ("code_locations", t.code_locations.finish()?),
        ];
        for (name, rows) in counts {
            self.meta
                .tables
                .insert(name.to_string(), TableInfo { rows });
        }
        self.meta.end_unix_ns = Some(unix_now_ns());
        self.meta.completeness = completeness;
        self.meta.write(&self.dir.join("meta.json"))
    }
}

impl Drop for ProfileWriter {
    fn drop(&mut self) {
        if self.tables.is_some() {
            // Keep what was recorded: an error path or a panic in the recorder must not lose it.
            let completeness = Completeness {
                complete: false,
                exit: None,
                reasons: vec!["the recorder stopped before finishing the profile".into()],
            };
            let _ = self.finish_inner(completeness);
        }
    }
}
