//! What the fuzz targets share: a scratch directory for readers that take paths.

use std::path::Path;

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
