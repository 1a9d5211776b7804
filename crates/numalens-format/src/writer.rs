//! Streaming profile writer: rows are buffered in small batches, encoded into Parquet row groups
//! as they fill, and flushed to disk, so memory stays bounded whatever the number of rows.
//!
//! A table that outgrows one batch is encoded on a thread of its own from then on: the recorder
//! keeps producing rows (attributing faults) while the previous batch is encoded and compressed,
//! which on a two-core machine roughly halves the time to write a large samples table. The
//! producing thread groups each batch by thread and turns it into Arrow columns itself before it
//! hands it over: Parquet's encoding and compression are the larger part, and that split keeps
//! the two threads about equally busy.

use std::fs::File;
use std::io::BufWriter;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{SyncSender, sync_channel};
use std::thread::JoinHandle;

use arrow_array::RecordBatch;
use parquet::arrow::ArrowWriter;

use crate::cluster::clustered;
use crate::error::{FormatError, Result};
use crate::meta::{Completeness, Meta, TableInfo, unix_now_ns};
use crate::table::{Row, TableSize, writer_properties};
use crate::tables::{
    CodeLocation, Migration, Object, PageNodes, PageStat, Sample, SiteFrame, Thread,
};

/// Rows converted to Arrow at a time. Small enough to stay in cache-sized buffers, large enough
/// that per-batch overhead is negligible.
const BATCH_ROWS: usize = 64 * 1024;

/// Bytes of write buffer per table file: under glibc's mmap threshold.
const SINK_BUFFER: usize = 64 * 1024;

/// Full batches, as Arrow columns, waiting for the encoding thread: enough to ride out an uneven
/// batch, few enough to bound memory (a samples batch is a few MiB).
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

    fn encode(&mut self, rows: &[R], size: TableSize) -> Result<()> {
        let batch = record_batch(rows, &self.path)?;
        self.write(&batch, size)
    }

    fn write(&mut self, batch: &RecordBatch, size: TableSize) -> Result<()> {
        let path = self.path.clone();
        self.writer(size)?
            .write(batch)
            .map_err(|e| FormatError::table(&path, format!("write failed: {e}")))
    }

    /// Writes the footer. A table that never reached a second batch is small.
    fn close(mut self) -> Result<()> {
        self.writer(TableSize::Small)?;
        let Sink::Parquet(writer) = self.sink else {
            unreachable!("made by writer() above")
        };
        writer
            .close()
            .map(|_| ())
            .map_err(|e| FormatError::table(&self.path, format!("could not finish: {e}")))
    }
}

/// A batch of rows grouped by thread (`cluster.rs`) as Arrow columns.
fn record_batch<R: Row>(rows: &[R], path: &Path) -> Result<RecordBatch> {
    RecordBatch::try_new(R::schema(), R::to_arrays(&clustered(rows)))
        .map_err(|e| FormatError::table(path, e.to_string()))
}

/// Where full batches go: encoded right away, or handed to the table's encoding thread.
enum Encoder<R> {
    Inline(Box<BatchEncoder<R>>),
    Thread {
        batches: SyncSender<RecordBatch>,
        handle: JoinHandle<Result<Box<BatchEncoder<R>>>>,
    },
}

impl<R: Row + Send + 'static> Encoder<R> {
    fn on_thread(mut encoder: Box<BatchEncoder<R>>) -> Self {
        let (batches, queue) = sync_channel::<RecordBatch>(QUEUED_BATCHES);
        let handle = std::thread::spawn(move || {
            for batch in queue {
                encoder.write(&batch, TableSize::Large)?;
            }
            Ok(encoder)
        });
        Encoder::Thread { batches, handle }
    }

    /// The thread's result once it has ended (after an error, or when the sender is gone).
    fn join(
        handle: JoinHandle<Result<Box<BatchEncoder<R>>>>,
        path: &Path,
    ) -> Result<Box<BatchEncoder<R>>> {
        handle
            .join()
            .unwrap_or_else(|_| Err(FormatError::table(path, "the encoding thread panicked")))
    }
}

/// Writes one table, `TABLE.parquet`.
pub struct TableWriter<R: Row + Send + 'static> {
    path: PathBuf,
    /// `None` only while switching to a thread, or after an encoding error.
    encoder: Option<Encoder<R>>,
    buffer: Vec<R>,
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
            buffer: Vec::new(),
            rows: 0,
        })
    }

    /// Appends one row.
    pub fn push(&mut self, row: R) -> Result<()> {
        if self.buffer.capacity() == 0 {
            self.buffer.reserve_exact(BATCH_ROWS);
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
        let Encoder::Thread { batches, handle } = encoder else {
            unreachable!("switched to a thread above")
        };
        // Converted here, so the buffer is reused at once; an error leaves the encoder gone.
        let batch = record_batch(&self.buffer, &self.path)?;
        let count = self.buffer.len() as u64;
        self.buffer.clear();
        if batches.send(batch).is_err() {
            // The thread stopped at an error: report it.
            drop(batches);
            return Err(Encoder::join(handle, &self.path)
                .err()
                .unwrap_or_else(|| self.stopped()));
        }
        self.rows += count;
        self.encoder = Some(Encoder::Thread { batches, handle });
        Ok(())
    }

    fn stopped(&self) -> FormatError {
        FormatError::table(&self.path, "an earlier write failed")
    }

    /// Writes buffered rows and the Parquet footer; returns the number of rows.
    pub fn finish(mut self) -> Result<u64> {
        let mut encoder = match self.encoder.take() {
            Some(Encoder::Inline(encoder)) => encoder,
            Some(Encoder::Thread {
                batches, handle, ..
            }) => {
                drop(batches);
                Encoder::join(handle, &self.path)?
            }
            None => return Err(self.stopped()),
        };
        if !self.buffer.is_empty() {
            // Rows left after batches went to the thread belong to a large table.
            let size = if self.rows > 0 {
                TableSize::Large
            } else {
                TableSize::Small
            };
            encoder.encode(&self.buffer, size)?;
            self.rows += self.buffer.len() as u64;
        }
        encoder.close()?;
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
