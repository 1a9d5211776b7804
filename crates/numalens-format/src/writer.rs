//! Streaming profile writer: rows are buffered in small batches, encoded into Parquet row groups
//! as they fill, and flushed to disk, so memory stays bounded whatever the number of rows.
//!
//! A table that outgrows one batch is encoded on a thread of its own from then on: the recorder
//! keeps producing rows (attributing faults) while earlier batches are grouped by thread, turned
//! into Arrow columns, encoded and compressed, column by column on two threads
//! (`parallel_encoder.rs`). The producing thread only hands its rows over: when it had to build
//! the Arrow columns itself, that was half of its work after a program's end, and it finished
//! last.

use std::fs::File;
use std::io::BufWriter;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;

use arrow_array::RecordBatch;
use parquet::arrow::ArrowWriter;

use crate::cluster::cluster_order;
use crate::error::{FormatError, Result};
use crate::meta::{Completeness, Meta, TableInfo, unix_now_ns};
use crate::parallel_encoder::ParallelEncoder;
use crate::table::{Columns, Row, TableSize, writer_properties};
use crate::tables::{
    CodeLocation, Migration, Object, PageNodes, PageStat, Sample, SiteFrame, Thread,
};

/// Rows handed to the encoder at a time and grouped by thread together; a table with fewer rows
/// is small (LZ4). Small batches let the encoding start soon after the rows do and leave little
/// to encode after the last one; their columns are reused once encoded, where 65,536-row batches
/// were faulted in afresh (a fifth of the recorder's work after a sampled program's end). The
/// price: a thread's runs of rows are shorter, and a samples file of 8 threads about 3 % larger
/// (9 % with 64 threads, synthetic samples).
const BATCH_ROWS: usize = 16 * 1024;

/// Bytes of write buffer per table file: under glibc's mmap threshold.
const SINK_BUFFER: usize = 64 * 1024;

/// Full batches of rows waiting for the encoding thread: enough to ride out an uneven batch, few
/// enough to bound memory (a samples batch is about 2 MiB).
const QUEUED_BATCHES: usize = 2;

/// Where a table's encoded row groups go: the file alone until the table's size is known (it
/// decides the codec), then the Parquet writer.
enum Sink {
    File(BufWriter<File>),
    Parquet(Box<ArrowWriter<BufWriter<File>>>),
    /// Only while switching from the file to the writer, or after that failed.
    Switching,
}

/// Turns batches of rows into Parquet row groups of one file.
struct BatchEncoder<R> {
    path: PathBuf,
    sink: Sink,
    rows: PhantomData<fn(R)>,
}

impl<R: Row> BatchEncoder<R> {
    /// The Parquet writer, made on first use with the codec for `size`.
    fn writer(&mut self, size: TableSize) -> Result<&mut ArrowWriter<BufWriter<File>>> {
        self.sink = match std::mem::replace(&mut self.sink, Sink::Switching) {
            Sink::File(file) => Sink::Parquet(Box::new(
                ArrowWriter::try_new(file, R::schema(), Some(writer_properties::<R>(size)))
                    .map_err(|e| FormatError::table(&self.path, e.to_string()))?,
            )),
            made => made,
        };
        match &mut self.sink {
            Sink::Parquet(writer) => Ok(writer),
            _ => Err(FormatError::table(&self.path, "an earlier write failed")),
        }
    }

    /// Encodes the rows of a table that never filled a batch (large tables go to a thread).
    fn encode_small(&mut self, rows: &RowBatch<R>) -> Result<()> {
        let batch = record_batch(rows, &self.path)?;
        let path = self.path.clone();
        self.writer(TableSize::Small)?
            .write(&batch)
            .map_err(|e| FormatError::table(&path, format!("write failed: {e}")))
    }

    /// The Parquet writer, for a caller that writes the rows itself.
    fn into_writer(mut self, size: TableSize) -> Result<ArrowWriter<BufWriter<File>>> {
        self.writer(size)?;
        let Sink::Parquet(writer) = self.sink else {
            unreachable!("made by writer() above")
        };
        Ok(*writer)
    }

    /// Writes the footer. A table that never filled a batch is small.
    fn close(self) -> Result<()> {
        let path = self.path.clone();
        self.into_writer(TableSize::Small)?
            .close()
            .map(|_| ())
            .map_err(|e| FormatError::table(&path, format!("could not finish: {e}")))
    }
}

/// A batch of rows grouped by thread (`cluster.rs`) as Arrow columns.
fn record_batch<R: Row>(rows: &RowBatch<R>, path: &Path) -> Result<RecordBatch> {
    let order = rows.order();
    let arrays = (0..R::COLUMNS.len())
        .map(|column| rows.columns.array(column, &order))
        .collect();
    RecordBatch::try_new(R::schema(), arrays).map_err(|e| FormatError::table(path, e.to_string()))
}

/// Rows waiting to be encoded: their columns, and each row's cluster key.
struct RowBatch<R: Row> {
    columns: R::Columns,
    keys: Vec<Option<u64>>,
}

impl<R: Row> Default for RowBatch<R> {
    fn default() -> Self {
        RowBatch {
            columns: R::Columns::default(),
            keys: Vec::new(),
        }
    }
}

impl<R: Row> RowBatch<R> {
    fn push(&mut self, row: R) {
        self.keys.push(row.cluster_key());
        self.columns.push(row);
    }

    fn len(&self) -> usize {
        self.keys.len()
    }

    fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Room for `rows` more rows; a no-op when there is (a batch given back is reused).
    fn reserve(&mut self, rows: usize) {
        self.keys.reserve_exact(rows);
        self.columns.reserve(rows);
    }

    fn clear(&mut self) {
        self.keys.clear();
        self.columns.clear();
    }

    /// The rows grouped by thread (`cluster.rs`).
    fn order(&self) -> Vec<u32> {
        cluster_order(&self.keys)
    }
}

/// Where full batches go: encoded right away, or handed to the table's encoding thread.
enum Encoder<R: Row> {
    Inline(Box<BatchEncoder<R>>),
    Thread {
        batches: SyncSender<RowBatch<R>>,
        /// Batches the thread is done with, emptied, to be filled again: a fresh one is about
        /// 2 MiB of pages to fault in.
        emptied: Receiver<RowBatch<R>>,
        handle: JoinHandle<Result<()>>,
    },
}

impl<R: Row + Send + 'static> Encoder<R> {
    fn on_thread(encoder: Box<BatchEncoder<R>>) -> Self {
        let (batches, queue) = sync_channel::<RowBatch<R>>(QUEUED_BATCHES);
        let (give_back, emptied) = sync_channel::<RowBatch<R>>(QUEUED_BATCHES);
        let handle = std::thread::spawn(move || {
            let path = encoder.path.clone();
            let failed = |e: parquet::errors::ParquetError| {
                FormatError::table(&path, format!("write failed: {e}"))
            };
            let writer = encoder.into_writer(TableSize::Large)?;
            let mut parallel = ParallelEncoder::new(writer, R::schema())
                .map_err(|e| FormatError::table(&path, format!("could not start writing: {e}")))?;
            for mut batch in queue {
                parallel
                    .write_batch::<R>(&batch.columns, &batch.order())
                    .map_err(failed)?;
                batch.clear();
                // Full when the producer has enough already: then this one is freed.
                let _ = give_back.try_send(batch);
            }
            parallel
                .close()
                .map_err(|e| FormatError::table(&path, format!("could not finish: {e}")))
        });
        Encoder::Thread {
            batches,
            emptied,
            handle,
        }
    }
}

/// The encoding thread's result once it has ended (after an error, or when the sender is gone).
fn join_encoder(handle: JoinHandle<Result<()>>, path: &Path) -> Result<()> {
    handle
        .join()
        .unwrap_or_else(|_| Err(FormatError::table(path, "the encoding thread panicked")))
}

/// Writes one table, `TABLE.parquet`.
pub struct TableWriter<R: Row + Send + 'static> {
    path: PathBuf,
    /// `None` only while switching to a thread, or after an encoding error.
    encoder: Option<Encoder<R>>,
    buffer: RowBatch<R>,
    rows: u64,
}

impl<R: Row + Send + 'static> TableWriter<R> {
    /// Creates `dir/TABLE.parquet`.
    pub fn create(dir: &Path) -> Result<Self> {
        let path = dir.join(format!("{}.parquet", R::TABLE));
        let file = File::create(&path).map_err(|e| FormatError::io(&path, e))?;
        let encoder = BatchEncoder {
            path: path.clone(),
            // Parquet hands over whole pages, which pass straight through; the buffer gathers
            // the small writes (headers, footer). A larger one was mapped and unmapped per
            // table, and an unmap in a threaded process interrupts every other CPU.
            sink: Sink::File(BufWriter::with_capacity(SINK_BUFFER, file)),
            rows: PhantomData,
        };
        Ok(TableWriter {
            path,
            encoder: Some(Encoder::Inline(Box::new(encoder))),
            buffer: RowBatch::default(),
            rows: 0,
        })
    }

    /// Appends one row.
    pub fn push(&mut self, row: R) -> Result<()> {
        if self.buffer.is_empty() {
            self.buffer.reserve(BATCH_ROWS);
        }
        self.buffer.push(row);
        if self.buffer.len() == BATCH_ROWS {
            self.hand_over_batch()?;
        }
        Ok(())
    }

    /// Rows written so far.
    pub fn rows(&self) -> u64 {
        self.rows + self.buffer.len() as u64
    }

    /// A full batch: the table is large, so it is encoded on its own thread from now on.
    fn hand_over_batch(&mut self) -> Result<()> {
        let encoder = match self.encoder.take() {
            Some(Encoder::Inline(encoder)) => Encoder::on_thread(encoder),
            Some(thread) => thread,
            None => return Err(self.stopped()),
        };
        let Encoder::Thread {
            batches,
            emptied,
            handle,
        } = encoder
        else {
            unreachable!("switched to a thread above")
        };
        let next = emptied.try_recv().unwrap_or_default();
        let batch = std::mem::replace(&mut self.buffer, next);
        let count = batch.len() as u64;
        if batches.send(batch).is_err() {
            // The thread stopped at an error (the encoder is gone from now on): report it.
            drop(batches);
            return Err(join_encoder(handle, &self.path)
                .err()
                .unwrap_or_else(|| self.stopped()));
        }
        self.rows += count;
        self.encoder = Some(Encoder::Thread {
            batches,
            emptied,
            handle,
        });
        Ok(())
    }

    fn stopped(&self) -> FormatError {
        FormatError::table(&self.path, "an earlier write failed")
    }

    /// Writes buffered rows and the Parquet footer; returns the number of rows.
    pub fn finish(mut self) -> Result<u64> {
        match self.encoder.take() {
            Some(Encoder::Inline(mut encoder)) => {
                // Never outgrew one batch: a small table, encoded here.
                if !self.buffer.is_empty() {
                    encoder.encode_small(&self.buffer)?;
                    self.rows += self.buffer.len() as u64;
                }
                encoder.close()?;
            }
            Some(Encoder::Thread {
                batches, handle, ..
            }) => {
                // The rest goes to the thread too, whose columns two threads build and encode.
                let sent = if self.buffer.is_empty() {
                    Ok(())
                } else {
                    self.rows += self.buffer.len() as u64;
                    batches.send(std::mem::take(&mut self.buffer))
                };
                drop(batches);
                join_encoder(handle, &self.path)?;
                if sent.is_err() {
                    return Err(self.stopped());
                }
            }
            None => return Err(self.stopped()),
        }
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
    /// Creates the profile directory `dir`, which must not hold a profile already; the
    /// `meta.json` of a recording that never finished (`Meta::is_unfinished`) is written over.
    pub fn create(dir: &Path, meta: Meta) -> Result<Self> {
        let existing = dir.join("meta.json");
        if existing.exists() && !Meta::read(&existing).is_ok_and(|m| m.is_unfinished()) {
            return Err(FormatError::table(
                dir,
                "a profile already exists here; remove it or choose another output name",
            ));
        }
        std::fs::create_dir_all(dir).map_err(|e| FormatError::io(dir, e))?;
        meta.write(&dir.join("meta.json"))?;
        // Creating a file is mostly the file system's work, a few hundred microseconds each on
        // ext4; half of them are created on a second thread.
        let (first, second) = std::thread::scope(|s| {
            let second = s.spawn(|| create_four(dir));
            (
                create_four(dir),
                second.join().expect("creating a file does not panic"),
            )
        });
        let (samples, threads, sites, objects) = first?;
        let (page_stats, migrations, page_nodes, code_locations) = second?;
        let tables = Tables {
            samples,
            threads,
            sites,
            objects,
            page_stats,
            migrations,
            page_nodes,
            code_locations,
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
        let jobs: Vec<(&str, FinishJob)> = vec![
            ("samples", Box::new(move || t.samples.finish())),
            ("page_stats", Box::new(move || t.page_stats.finish())),
            ("threads", Box::new(move || t.threads.finish())),
            ("sites", Box::new(move || t.sites.finish())),
            ("objects", Box::new(move || t.objects.finish())),
            ("migrations", Box::new(move || t.migrations.finish())),
            ("page_nodes", Box::new(move || t.page_nodes.finish())),
            (
                "code_locations",
                Box::new(move || t.code_locations.finish()),
            ),
        ];
        for (name, rows) in finish_tables(jobs) {
            self.meta
                .tables
                .insert(name.to_string(), TableInfo { rows: rows? });
        }
        // A recording that says when it ended (an imported one) keeps that end.
        self.meta.end_unix_ns.get_or_insert_with(unix_now_ns);
        self.meta.completeness = completeness;
        self.meta.write(&self.dir.join("meta.json"))
    }
}

/// Finishes one table: its last row group, footer and file.
type FinishJob = Box<dyn FnOnce() -> Result<u64> + Send>;

/// Four tables' writers, made together.
type FourWriters<A, B, C, D> = (
    TableWriter<A>,
    TableWriter<B>,
    TableWriter<C>,
    TableWriter<D>,
);

/// Creates four table files in `dir`.
fn create_four<A, B, C, D>(dir: &Path) -> Result<FourWriters<A, B, C, D>>
where
    A: Row + Send + 'static,
    B: Row + Send + 'static,
    C: Row + Send + 'static,
    D: Row + Send + 'static,
{
    Ok((
        TableWriter::create(dir)?,
        TableWriter::create(dir)?,
        TableWriter::create(dir)?,
        TableWriter::create(dir)?,
    ))
}

/// Runs the tables' finishing jobs on up to four threads, the caller's included, taking them in
/// the order given (largest first), and returns each table's result in that order. Every table
/// costs a fixed part (a compressor per column, the footer, closing the file), so even a small
/// profile's eight tables finish in about half the time on two cores.
fn finish_tables(jobs: Vec<(&'static str, FinishJob)>) -> Vec<(&'static str, Result<u64>)> {
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 4)
        .min(jobs.len());
    let queue = std::sync::Mutex::new(jobs.into_iter().enumerate());
    let results = std::sync::Mutex::new(Vec::new());
    let work = || {
        loop {
            // The lock is released before the job runs: the guard is a temporary of this line.
            let Some((index, (name, job))) = queue.lock().expect("queue lock").next() else {
                break;
            };
            let rows = job();
            results
                .lock()
                .expect("results lock")
                .push((index, name, rows));
        }
    };
    std::thread::scope(|s| {
        for _ in 1..workers {
            s.spawn(work);
        }
        work();
    });
    let mut results = results.into_inner().expect("results lock");
    results.sort_by_key(|(index, ..)| *index);
    results
        .into_iter()
        .map(|(_, name, rows)| (name, rows))
        .collect()
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
