//! What the fuzz targets share: a scratch directory for readers that take paths, and the
//! meta.json of the profiles they write.

use std::path::Path;

use numalens_format::{Backend, Clock, Host, Meta};

/// The meta.json of a profile a fuzz target writes: complete as far as the reader can tell (a
/// new `Meta` is the one a recording starts with, which readers refuse as unfinished).
pub fn meta() -> Meta {
    let mut meta = Meta::new(
        vec!["fuzz".into()],
        Backend {
            name: "synthetic".into(),
            settings: Default::default(),
        },
        Host {
            hostname: "fuzz".into(),
            kernel: "0".into(),
            arch: "x86_64".into(),
        },
        Clock {
            name: "CLOCK_MONOTONIC".into(),
            origin_ns: 0,
        },
    );
    meta.completeness.complete = true;
    meta.completeness.reasons.clear();
    meta
}

/// A fresh directory for one input, in memory when `/dev/shm` exists: the readers under test open
/// files by path, and a disk would make every execution pay for a write.
pub fn scratch() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    let mut builder = tempfile::Builder::new();
    builder.prefix("numalens-fuzz-");
    if shm.is_dir() {
        builder.tempdir_in(shm)
    } else {
        builder.tempdir()
    }
    .expect("a scratch directory can be created")
}

/// Splits an input into at most `n` parts at the separator `NLFUZZ--`, so one input can carry
/// several files; parts that are not there are empty.
pub fn split(data: &[u8], n: usize) -> Vec<&[u8]> {
    const SEPARATOR: &[u8] = b"NLFUZZ--";
    let mut parts = Vec::with_capacity(n);
    let mut rest = data;
    while parts.len() + 1 < n {
        match rest.windows(SEPARATOR.len()).position(|w| w == SEPARATOR) {
            Some(at) => {
                parts.push(&rest[..at]);
                rest = &rest[at + SEPARATOR.len()..];
            }
            None => break,
        }
    }
    parts.push(rest);
    parts.resize(n, &[]);
    parts
}

/// The profile reader runs the Parquet decoders under `catch_unwind` and turns their panics on
/// corrupted pages into errors naming the file (`numalens_format::Batches`); libFuzzer's panic
/// hook would abort on those too. This hook only prints, so a caught panic is not a finding and
/// a panic that escapes the reader still is (libfuzzer-sys aborts on it).
pub fn let_the_reader_catch_decoder_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        std::panic::set_hook(Box::new(|info| eprintln!("{info}")));
    });
}
