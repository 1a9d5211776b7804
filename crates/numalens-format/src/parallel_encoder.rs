//! A large table's encoder: the columns of each batch are built and encoded by two threads at
//! once.
//!
//! Parquet encodes and compresses each column on its own, and each column's Arrow array can be
//! built from the rows on its own, so a batch's columns can be shared out: the table's encoding
//! thread and a helper take them one at a time until none is left. The thread producing the
//! rows only hands them over. While it still produces rows the three threads share the cores;
//! once it has handed over the last batch, which is when everyone waits for the profile, two
//! threads build and encode instead of one.

use std::fs::File;
use std::io::BufWriter;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use arrow_schema::SchemaRef;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_writer::{ArrowColumnWriter, ArrowRowGroupWriterFactory, compute_leaves};
use parquet::errors::ParquetError;
use parquet::file::writer::SerializedFileWriter;

use crate::table::{Columns, ROW_GROUP_ROWS, Row};

type FileWriter = SerializedFileWriter<BufWriter<File>>;

/// Writes row groups of at most [`ROW_GROUP_ROWS`] rows, each column encoded by whichever of
/// two threads comes to it first.
pub(crate) struct ParallelEncoder {
    file: FileWriter,
    factory: ArrowRowGroupWriterFactory,
    schema: SchemaRef,
    /// The open row group's column writers, one per field; empty between row groups.
    writers: Vec<ArrowColumnWriter>,
    rows_in_group: usize,
    /// Rows per row group: [`ROW_GROUP_ROWS`] but in tests.
    group_rows: usize,
}

impl ParallelEncoder {
    /// Takes over a writer that has not written a row yet (its header and properties stay).
    pub(crate) fn new(
        writer: ArrowWriter<BufWriter<File>>,
        schema: SchemaRef,
    ) -> Result<Self, ParquetError> {
        let (file, factory) = writer.into_serialized_writer()?;
        Ok(ParallelEncoder {
            file,
            factory,
            schema,
            writers: Vec::new(),
            rows_in_group: 0,
            group_rows: ROW_GROUP_ROWS,
        })
    }

    /// Encodes the rows of `columns` at `order`, closing row groups as they fill. Each column's
    /// array is built by the thread that encodes it, so the building is shared out too.
    pub(crate) fn write_batch<R: Row>(
        &mut self,
        columns: &R::Columns,
        order: &[u32],
    ) -> Result<(), ParquetError> {
        let mut rest = order;
        while !rest.is_empty() {
            if self.writers.is_empty() {
                self.open_row_group()?;
            }
            let take = rest.len().min(self.group_rows - self.rows_in_group);
            let (part, tail) = rest.split_at(take);
            rest = tail;
            let schema = &self.schema;
            in_parallel(self.writers.iter_mut().enumerate(), |(i, writer)| {
                let array = columns.array(i, part);
                for leaf in compute_leaves(schema.field(i), &array)? {
                    writer.write(&leaf)?;
                }
                Ok(())
            })?;
            self.rows_in_group += take;
            if self.rows_in_group == self.group_rows {
                self.close_row_group()?;
            }
        }
        Ok(())
    }

    /// Closes the last row group and writes the footer.
    pub(crate) fn close(mut self) -> Result<(), ParquetError> {
        if !self.writers.is_empty() {
            self.close_row_group()?;
        }
        self.file.close().map(|_| ())
    }

    fn open_row_group(&mut self) -> Result<(), ParquetError> {
        let writers = self
            .factory
            .create_column_writers(self.file.flushed_row_groups().len())?;
        // Field i is column writer i only when every field is one leaf, as in every table here.
        if writers.len() != self.schema.fields().len() {
            return Err(ParquetError::General(format!(
                "{} column writers for {} fields: nested fields are not supported",
                writers.len(),
                self.schema.fields().len()
            )));
        }
        self.writers = writers;
        self.rows_in_group = 0;
        Ok(())
    }

    /// Flushes each column's last page (in parallel too) and appends the chunks in field order.
    fn close_row_group(&mut self) -> Result<(), ParquetError> {
        let writers = std::mem::take(&mut self.writers);
        let chunks = in_parallel(writers, ArrowColumnWriter::close)?;
        let mut group = self.file.next_row_group()?;
        for chunk in chunks {
            chunk.append_to_row_group(&mut group)?;
        }
        group.close().map(|_| ())
    }
}

/// `work` applied to every item, by the calling thread and one helper, each taking the next item
/// not taken yet; the results in the items' order, or the first error in that order. When no
/// helper can be started (a limit on threads), the calling thread does it all.
fn in_parallel<T, U, F>(items: impl IntoIterator<Item = T>, work: F) -> Result<Vec<U>, ParquetError>
where
    T: Send,
    U: Send,
    F: Fn(T) -> Result<U, ParquetError> + Sync,
{
    let items: Vec<Mutex<Option<T>>> = items.into_iter().map(|t| Mutex::new(Some(t))).collect();
    let results: Vec<Mutex<Option<Result<U, ParquetError>>>> =
        items.iter().map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    let take_and_work = || {
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(slot) = items.get(i) else { break };
            let item = slot.lock().expect("item lock").take();
            if let Some(item) = item {
                *results[i].lock().expect("result lock") = Some(work(item));
            }
        }
    };
    std::thread::scope(|s| {
        if items.len() > 1 {
            // A helper that cannot be made is no error: its items are left to this thread.
            let _ = std::thread::Builder::new().spawn_scoped(s, take_and_work);
        }
        take_and_work();
    });
    results
        .into_iter()
        .map(|r| {
            r.into_inner()
                .expect("result lock")
                .unwrap_or_else(|| Err(ParquetError::General("a column was not encoded".into())))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::{SynthConfig, SynthSamples};
    use crate::table::{TableSize, writer_properties};
    use crate::tables::Sample;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use std::time::{Duration, Instant};

    #[test]
    fn two_threads_work_at_once() {
        // Each of the first two items waits until both are being worked: one thread alone
        // would wait out the deadline on the first.
        let inside = AtomicUsize::new(0);
        let met = in_parallel(0..2u32, |_| {
            inside.fetch_add(1, Ordering::SeqCst);
            let deadline = Instant::now() + Duration::from_secs(10);
            while inside.load(Ordering::SeqCst) < 2 && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
            Ok(inside.load(Ordering::SeqCst) == 2)
        })
        .unwrap();
        assert_eq!(met, vec![true, true]);
    }

    #[test]
    fn row_groups_close_inside_a_batch_and_every_row_comes_back_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("samples.parquet");
        let file = BufWriter::new(File::create(&path).unwrap());
        let props = writer_properties::<Sample>(TableSize::Large);
        let writer = ArrowWriter::try_new(file, Sample::schema(), Some(props)).unwrap();
        let mut encoder = ParallelEncoder::new(writer, Sample::schema()).unwrap();
        encoder.group_rows = 1000;
        let rows: Vec<Sample> = SynthSamples::new(SynthConfig::default())
            .take(2100)
            .collect();
        for batch in rows.chunks(700) {
            let mut columns = <Sample as Row>::Columns::default();
            for row in batch {
                columns.push(row.clone());
            }
            let order: Vec<u32> = (0..batch.len() as u32).collect();
            encoder.write_batch::<Sample>(&columns, &order).unwrap();
        }
        encoder.close().unwrap();

        let reader = SerializedFileReader::new(File::open(&path).unwrap()).unwrap();
        let groups: Vec<i64> = reader
            .metadata()
            .row_groups()
            .iter()
            .map(|g| g.num_rows())
            .collect();
        assert_eq!(groups, vec![1000, 1000, 100]);
        let mut back = Vec::new();
        for batch in ParquetRecordBatchReaderBuilder::try_new(File::open(&path).unwrap())
            .unwrap()
            .build()
            .unwrap()
        {
            back.extend(Sample::from_batch(&batch.unwrap(), &path).unwrap());
        }
        assert_eq!(back, rows);
    }

    #[test]
    fn every_item_is_worked_once_and_results_keep_the_items_order() {
        let seen = Mutex::new(Vec::new());
        let out = in_parallel(0..100u32, |i| {
            seen.lock().unwrap().push(i);
            Ok(i * 2)
        })
        .unwrap();
        assert_eq!(out, (0..100).map(|i| i * 2).collect::<Vec<_>>());
        let mut seen = seen.into_inner().unwrap();
        seen.sort();
        assert_eq!(seen, (0..100).collect::<Vec<_>>());
    }

    #[test]
    fn the_first_error_in_item_order_is_returned() {
        let out = in_parallel(0..10u32, |i| {
            if i == 3 || i == 7 {
                Err(ParquetError::General(format!("item {i}")))
            } else {
                Ok(i)
            }
        });
        assert!(out.unwrap_err().to_string().contains("item 3"));
    }
}
