//! Benchmark of the profile format: write and read synthetic samples shaped like real ones.
//!
//! `cargo run --release -p numalens-format --example format_bench [-- SAMPLES]` prints a table.
//! Each measurement runs in a child process of its own so that its peak memory is its own.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use arrow_array::cast::AsArray;
use arrow_array::types::{UInt8Type, UInt32Type, UInt64Type};
use numalens_format::synth::{SynthConfig, SynthSamples};
use numalens_format::{Backend, Clock, Completeness, Host, Meta, Profile, ProfileWriter, Sample};

const ANALYSIS_COLUMNS: &[&str] = &["time_ns", "tid", "address", "kind", "weight", "object_id"];

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("generate") => child_generate(args[2].parse().unwrap()),
        Some("write") => child_write(args[2].parse().unwrap(), Path::new(&args[3])),
        Some("read") => child_read(Path::new(&args[2]), args[3].parse().unwrap()),
        other => {
            let big = other
                .map(|n| n.parse().expect("SAMPLES is a number"))
                .unwrap_or(10_000_000);
            run_all(big);
        }
    }
}

fn run_all(big: u64) {
    let dir = tempdir_in_target();
    let small = big / 10;
    let small_dir = dir.join("small.numalens");
    let big_dir = dir.join("big.numalens");
    let generated = child("generate", &[big.to_string()]);
    let w_small = child("write", &[small.to_string(), path_arg(&small_dir)]);
    let w_big = child("write", &[big.to_string(), path_arg(&big_dir)]);
    let r1 = child("read", &[path_arg(&big_dir), "1".into()]);
    let r2 = child("read", &[path_arg(&big_dir), "2".into()]);
    let bytes = std::fs::metadata(big_dir.join("samples.parquet"))
        .unwrap()
        .len();
    println!(
        "numalens profile format benchmark ({} samples, synthetic, 8 threads)",
        big
    );
    println!(
        "{:<44} {:>14} {:>12} {:>12}",
        "measurement", "samples/s", "seconds", "peak RSS MiB"
    );
    row("generate only (no writing)", big, &generated);
    row(
        &format!("write {small} samples (generate + write)"),
        small,
        &w_small,
    );
    row(
        &format!("write {big} samples (generate + write)"),
        big,
        &w_big,
    );
    let writer_only = 1.0 / (w_big.secs / big as f64 - generated.secs / big as f64);
    println!(
        "{:<44} {:>14.0}",
        "write, generation time subtracted", writer_only
    );
    row("read 6 analysis columns, 1 thread", big, &r1);
    row("read 6 analysis columns, 2 threads", big, &r2);
    println!();
    println!(
        "bytes per sample on disk: {:.2} ({} bytes, all 12 columns)",
        bytes as f64 / big as f64,
        bytes
    );
    column_sizes(&big_dir.join("samples.parquet"), big);
    let _ = std::fs::remove_dir_all(&dir);
}

struct Measured {
    secs: f64,
    rss_mib: f64,
}

fn row(label: &str, n: u64, m: &Measured) {
    println!(
        "{:<44} {:>14.0} {:>12.3} {:>12.1}",
        label,
        n as f64 / m.secs,
        m.secs,
        m.rss_mib
    );
}

fn child(mode: &str, args: &[String]) -> Measured {
    let exe = std::env::current_exe().unwrap();
    let out = Command::new(exe)
        .arg(mode)
        .args(args)
        .output()
        .expect("run child");
    assert!(
        out.status.success(),
        "{mode} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let mut fields = text.split_whitespace().map(|f| f.parse::<f64>().unwrap());
    Measured {
        secs: fields.next().unwrap(),
        rss_mib: fields.next().unwrap(),
    }
}

fn report(start: Instant) {
    println!("{} {}", start.elapsed().as_secs_f64(), peak_rss_mib());
}

fn child_generate(n: u64) {
    let start = Instant::now();
    let mut checksum = 0u64;
    for s in SynthSamples::new(SynthConfig::default()).take(n as usize) {
        checksum = checksum.wrapping_add(s.address ^ s.time_ns);
    }
    std::hint::black_box(checksum);
    report(start);
}

fn child_write(n: u64, dir: &Path) {
    let meta = Meta::new(
        vec!["format_bench".into()],
        Backend {
            name: "synthetic".into(),
            settings: Default::default(),
        },
        Host {
            hostname: "bench".into(),
            kernel: String::new(),
            arch: std::env::consts::ARCH.into(),
        },
        Clock {
            name: "synthetic".into(),
            origin_ns: 0,
        },
    );
    let start = Instant::now();
    let mut writer = ProfileWriter::create(dir, meta).unwrap();
    for s in SynthSamples::new(SynthConfig::default()).take(n as usize) {
        writer.push_sample(s).unwrap();
    }
    writer
        .finish(Completeness {
            complete: true,
            exit: None,
            reasons: vec![],
        })
        .unwrap();
    report(start);
}

fn child_read(dir: &Path, threads: usize) {
    let start = Instant::now();
    let profile = Profile::open(dir).unwrap();
    let total = std::sync::atomic::AtomicU64::new(0);
    profile
        .for_each_batch_parallel::<Sample, _>(ANALYSIS_COLUMNS, threads, |batch| {
            // Touch every value so that nothing is left undecoded.
            let time = batch.column(0).as_primitive::<UInt64Type>();
            let tid = batch.column(1).as_primitive::<UInt32Type>();
            let address = batch.column(2).as_primitive::<UInt64Type>();
            let kind = batch.column(3).as_dictionary::<UInt8Type>();
            let weight = batch.column(4).as_primitive::<UInt32Type>();
            let object = batch.column(5).as_primitive::<UInt64Type>();
            let mut sum = 0u64;
            for i in 0..batch.num_rows() {
                sum = sum
                    .wrapping_add(time.value(i) ^ address.value(i))
                    .wrapping_add(tid.value(i) as u64 + weight.value(i) as u64)
                    .wrapping_add(kind.keys().value(i) as u64 + object.value(i));
            }
            total.fetch_add(sum, std::sync::atomic::Ordering::Relaxed);
            Ok(())
        })
        .unwrap();
    std::hint::black_box(total);
    report(start);
}

fn column_sizes(path: &Path, n: u64) {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let reader = SerializedFileReader::new(std::fs::File::open(path).unwrap()).unwrap();
    let meta = reader.metadata();
    let columns = meta.file_metadata().schema_descr().num_columns();
    println!(
        "{:<14} {:>14} {:>10}  encodings",
        "column", "bytes/sample", "ratio"
    );
    for c in 0..columns {
        let mut bytes = 0i64;
        let mut raw = 0i64;
        let mut encodings = Vec::new();
        for rg in meta.row_groups() {
            let col = rg.column(c);
            bytes += col.compressed_size();
            raw += col.uncompressed_size();
            encodings = col.encodings().collect::<Vec<_>>();
        }
        let name = meta
            .file_metadata()
            .schema_descr()
            .column(c)
            .name()
            .to_string();
        let ratio = raw as f64 / bytes.max(1) as f64;
        println!(
            "{:<14} {:>14.3} {:>10.2}  {:?}",
            name,
            bytes as f64 / n as f64,
            ratio,
            encodings
        );
    }
}

fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map(|kb| kb / 1024.0)
        .unwrap_or(f64::NAN)
}

fn tempdir_in_target() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("numalens-format-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn path_arg(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}
