//! Reading the instrumentation runtime's files (layout: `runtime/include/numalens_inst.h`).
//!
//! Each instrumented thread leaves a `.pages` file (exact counts per page) and/or a `.samples`
//! file (sampled accesses). They are shared mappings of the program's memory, so they hold
//! whatever was counted when the process ended, even if it was killed; an unfinished chunk or
//! sample record is recognised and skipped.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use crate::page_counts::{self, FilePages, ThreadPages};
pub use crate::sample_files::read_samples_file;
use crate::sample_files::{
    ReadBefore, Released, add_code, merge_by_time_after, on_all_cores, read_samples_files_after,
};

pub const MAGIC_PAGES: &[u8; 8] = b"NLIPAGES";
pub const MAGIC_SAMPLES: &[u8; 8] = b"NLISAMPL";
pub const VERSION: u32 = 1;
pub const HEADER_SIZE: usize = 4096;
pub const CHUNK_PAGES: usize = 64;
pub const CHUNK_SIZE: usize = 64 + CHUNK_PAGES * 24;
pub const CHUNK_VALID: u64 = 0x4b4e_5548_4349_4c4e;
pub const SAMPLE_SIZE: usize = 32;
pub const PAGE_SHIFT: u32 = 12;
/// Mode bits of the header (and of `NUMALENS_INST`).
pub const MODE_EXACT: u32 = 1;
pub const MODE_SAMPLED: u32 = 2;
/// Highest base page number of a chunk whose pages all have addresses, with room for one more
/// page after its last (the recorder probes up to a page's end).
const MAX_BASE_PAGE: u64 = (1 << (64 - PAGE_SHIFT)) - 2 * CHUNK_PAGES as u64;

/// The 64-byte header at the start of both files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstHeader {
    pub magic: [u8; 8],
    pub version: u32,
    pub pid: u32,
    pub tid: u32,
    pub page_shift: u32,
    pub start_ns: u64,
    pub sample_every: u32,
    pub mode: u32,
    pub chunk_pages: u32,
    pub record_size: u32,
    pub copy_id: u64,
    /// The file could not grow (no space left where it lives): what came after its last record
    /// was not recorded.
    pub full: bool,
}

/// One thread's counts of one page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PageCount {
    pub reads: u64,
    pub writes: u64,
    /// CLOCK_MONOTONIC of the thread's first access.
    pub first_ns: u64,
}

/// One sampled access.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InstSample {
    pub pid: u32,
    pub tid: u32,
    pub time_ns: u64,
    pub address: u64,
    pub ip: u64,
    pub weight: u32,
    pub size: u16,
    pub is_write: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum InstFileError {
    #[error("{path}: {problem}")]
    Bad { path: PathBuf, problem: String },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// Parses the header; `expect` is the magic the file must carry.
pub fn parse_header(bytes: &[u8], expect: &[u8; 8]) -> Result<InstHeader, String> {
    if bytes.len() < 64 {
        return Err(format!("too short for a header ({} bytes)", bytes.len()));
    }
    let mut magic = [0u8; 8];
    magic.copy_from_slice(&bytes[..8]);
    if &magic != expect {
        return Err(format!(
            "not a numalens instrumentation file (magic {:?})",
            String::from_utf8_lossy(&magic)
        ));
    }
    let h = InstHeader {
        magic,
        version: u32_at(bytes, 8),
        pid: u32_at(bytes, 12),
        tid: u32_at(bytes, 16),
        page_shift: u32_at(bytes, 20),
        start_ns: u64_at(bytes, 24),
        sample_every: u32_at(bytes, 32),
        mode: u32_at(bytes, 36),
        chunk_pages: u32_at(bytes, 40),
        record_size: u32_at(bytes, 44),
        copy_id: u64_at(bytes, 48),
        full: u32_at(bytes, 56) != 0,
    };
    if h.version != VERSION {
        return Err(format!(
            "version {} (this numalens reads version {VERSION}); record again with this numalens",
            h.version
        ));
    }
    if h.page_shift != PAGE_SHIFT {
        return Err(format!(
            "page shift {} (the runtime counts {}-byte pages, shift {PAGE_SHIFT}); the file is \
             damaged",
            h.page_shift,
            1u64 << PAGE_SHIFT
        ));
    }
    Ok(h)
}

fn read(path: &Path) -> Result<Vec<u8>, InstFileError> {
    std::fs::read(path).map_err(|source| InstFileError::Io {
        path: path.to_path_buf(),
        source,
    })
}

pub(crate) fn bad(path: &Path, problem: String) -> InstFileError {
    InstFileError::Bad {
        path: path.to_path_buf(),
        problem,
    }
}

/// What a `.pages` file holds: its header, every touched page as (page address, counts), and the
/// chunks skipped because they cannot be the runtime's (a damaged file keeps its other chunks).
#[derive(Debug)]
pub struct PagesFile {
    pub header: InstHeader,
    pub pages: Vec<(u64, PageCount)>,
    pub damaged_chunks: Vec<String>,
    /// No chunk of pages is listed twice, so no page is.
    pub distinct: bool,
}

/// Reads a `.pages` file.
pub fn read_pages_file(path: &Path) -> Result<PagesFile, InstFileError> {
    let bytes = read(path)?;
    let h = parse_header(&bytes, MAGIC_PAGES).map_err(|p| bad(path, p))?;
    if h.record_size as usize != CHUNK_SIZE || h.chunk_pages as usize != CHUNK_PAGES {
        return Err(bad(path, format!("unexpected chunk layout {h:?}")));
    }
    let body = bytes.get(HEADER_SIZE..).unwrap_or_default();
    let mut pages = Vec::with_capacity(body.len() / CHUNK_SIZE * CHUNK_PAGES);
    let mut damaged_chunks = Vec::new();
    let mut bases = Vec::new();
    for (n, chunk) in body.chunks_exact(CHUNK_SIZE).enumerate() {
        if u64_at(chunk, 8) != CHUNK_VALID {
            continue;
        }
        let base = u64_at(chunk, 0);
        if !base.is_multiple_of(CHUNK_PAGES as u64) || base > MAX_BASE_PAGE {
            damaged_chunks.push(format!(
                "{}: chunk {n}: page number {base:#x} is not a page of a process (a multiple of \
                 {CHUNK_PAGES} below 2^{}); its counts were left out",
                path.display(),
                64 - PAGE_SHIFT
            ));
            continue;
        }
        bases.push(base);
        for i in 0..CHUNK_PAGES {
            let at = 64 + i * 24;
            let count = PageCount {
                reads: u64_at(chunk, at),
                writes: u64_at(chunk, at + 8),
                first_ns: u64_at(chunk, at + 16),
            };
            if count.first_ns != 0 {
                pages.push(((base + i as u64) << PAGE_SHIFT, count));
            }
        }
    }
    // Reserved for full chunks; a sparse file keeps only what it holds.
    if pages.len() < pages.capacity() / 2 {
        pages.shrink_to_fit();
    }
    let listed = bases.len();
    bases.sort_unstable();
    bases.dedup();
    Ok(PagesFile {
        header: h,
        pages,
        damaged_chunks,
        distinct: bases.len() == listed,
    })
}

/// One finished sample record (`SAMPLE_SIZE` bytes) of thread `tid` of `pid`.
pub fn sample_from(pid: u32, tid: u32, r: &[u8]) -> InstSample {
    InstSample {
        pid,
        tid,
        time_ns: u64_at(r, 0),
        address: u64_at(r, 8),
        ip: u64_at(r, 16),
        weight: u32_at(r, 24),
        size: u16::from_le_bytes([r[28], r[29]]),
        is_write: r[30] != 0,
    }
}

/// The `.pages` and `.samples` files in `dir`, sorted by name.
pub fn find_inst_files(dir: &Path) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let mut pages = Vec::new();
    let mut samples = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if !name.starts_with("inst-") {
            continue;
        }
        if name.ends_with(".pages") {
            pages.push(path);
        } else if name.ends_with(".samples") {
            samples.push(path);
        }
    }
    pages.sort();
    samples.sort();
    (pages, samples)
}

/// Everything the instrumentation left in a directory.
#[derive(Debug, Default)]
pub struct InstData {
    /// Counts per thread and page address, summed over the files of a thread (several copies of
    /// the runtime, or threads that reused a tid), first access the earliest; one list per
    /// thread, each page once ([`page_counts::rows`] gives them one after the other).
    pub pages: Vec<ThreadPages>,
    pub samples: Vec<InstSample>,
    /// The mean sampling interval the samples were taken with, when there were samples.
    pub sample_every: Option<u32>,
    pub files: usize,
    pub problems: Vec<String>,
    /// The distinct (pid, ip) of `samples`, when they were gathered as the files were read
    /// while the program ran (`live_read`); `None`: not gathered.
    pub sample_code: Option<HashSet<(u32, u64)>>,
}

/// Reads every instrumentation file in `dir`; unreadable files become problems, not errors.
pub fn read_inst_dir(dir: &Path) -> InstData {
    read_inst_dir_after(dir, HashMap::new(), Released::default())
        .expect("nothing read before: nothing to contradict")
}

/// [`read_inst_dir`], each `.samples` file after what was read of it while the program ran,
/// with the samples already merged there (`released`) ahead of the merge of the rest. `None`
/// when what was merged cannot stand: a file read live is not the one found now, or could not
/// be read, or its rest goes back before what was merged (a damaged file); the caller then
/// reads everything again.
pub(crate) fn read_inst_dir_after(
    dir: &Path,
    mut before: HashMap<PathBuf, ReadBefore>,
    released: Released,
) -> Option<InstData> {
    // After a live read, the distinct code addresses come with the samples.
    let live = !before.is_empty();
    let merged_live = !released.samples.is_empty();
    let (page_files, sample_files) = find_inst_files(dir);
    let mut data = InstData {
        files: page_files.len() + sample_files.len(),
        ..InstData::default()
    };
    let mut counted = Vec::with_capacity(page_files.len());
    let read = on_all_cores(page_files.iter().collect(), |path| read_pages_file(path));
    for (path, file) in page_files.into_iter().zip(read) {
        let PagesFile {
            header: h,
            pages,
            damaged_chunks,
            distinct,
        } = match file {
            Ok(file) => file,
            Err(e) => {
                data.problems.push(e.to_string());
                continue;
            }
        };
        note_full(&mut data, &path, &h, "page counts");
        data.problems.extend(damaged_chunks);
        counted.push(FilePages {
            pid: h.pid,
            tid: h.tid,
            pages,
            distinct,
        });
    }
    data.pages = page_counts::merge(counted);
    let mut per_file = Vec::with_capacity(sample_files.len());
    let work: Vec<(PathBuf, Option<ReadBefore>)> = sample_files
        .iter()
        .map(|p| (p.clone(), before.remove(p)))
        .collect();
    let work_live: HashSet<PathBuf> = work
        .iter()
        .filter(|(_, b)| b.is_some())
        .map(|(p, _)| p.clone())
        .collect();
    let mut code = live.then(HashSet::new);
    for (path, read) in sample_files.iter().zip(read_samples_files_after(work)) {
        match read {
            Ok((h, samples, read_code)) => {
                note_full(&mut data, path, &h, "samples");
                data.sample_every.get_or_insert(h.sample_every);
                let was_read_live = work_live.contains(path);
                if merged_live && was_read_live && read_code.is_none() {
                    return None;
                }
                if let Some(code) = &mut code {
                    match read_code {
                        Some(read_code) => code.extend(read_code),
                        None => add_code(code, &samples),
                    }
                }
                per_file.push(samples);
            }
            Err(_) if merged_live && work_live.contains(path) => return None,
            Err(e) => data.problems.push(e.to_string()),
        }
    }
    // A file read live and gone now had samples in the merged part.
    if merged_live && !before.is_empty() {
        return None;
    }
    let rest = |f: &Vec<InstSample>| f.iter().all(|s| s.time_ns >= released.below);
    if !per_file.iter().all(rest) {
        return None;
    }
    let mut samples = released.samples;
    merge_by_time_after(&per_file, &mut samples);
    data.samples = samples;
    data.sample_code = code;
    Some(data)
}

/// A file that stopped growing makes the profile incomplete, saying what was lost.
fn note_full(data: &mut InstData, path: &Path, h: &InstHeader, what: &str) {
    if h.full {
        data.problems.push(format!(
            "{}: thread {} of process {} could not record more {what} (no space left on the \
             file system holding them, or the program's RLIMIT_FSIZE reached): the ones after \
             were lost; free space in /dev/shm or in the profile's directory, or raise the \
             limit, and record again",
            path.display(),
            h.tid,
            h.pid
        ));
    }
}
