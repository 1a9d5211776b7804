//! The `inst` backend: exact and sampled access tracing through compiler instrumentation.
//!
//! Programs built with `numalens cc` (see [`toolchain`]) call the hooks of
//! `runtime/inst/` before each load and store. Under `numalens record --backend inst` the hooks
//! count, per thread and page, reads, writes and the first access (exact mode) and/or write every
//! Nth access of each thread as a sample (sampled mode) into files that [`files`] reads back.

pub mod calls_mark;
pub mod files;
pub mod gcc_plugin;
pub mod guard;
pub mod inline;
pub mod live_merge;
pub mod live_read;
pub mod llvm_plugin;
pub mod page_counts;
pub mod per_compiler;
mod sample_files;
pub mod staging;
pub mod tail;
pub mod toolchain;

use std::ffi::{OsStr, OsString};

use object::{Object, ObjectSection, ObjectSymbol};

/// What the hooks record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InstMode {
    /// Per-thread page tables of reads, writes and first access.
    Exact,
    /// Every Nth access of each thread as a sample of weight N.
    Sampled,
    /// Both at once.
    Both,
}

impl InstMode {
    /// The value of `NUMALENS_INST`.
    pub fn env_value(self) -> &'static str {
        match self {
            InstMode::Exact => "exact",
            InstMode::Sampled => "sampled",
            InstMode::Both => "both",
        }
    }

    pub fn exact(self) -> bool {
        self != InstMode::Sampled
    }

    pub fn sampled(self) -> bool {
        self != InstMode::Exact
    }
}

/// Settings of the `inst` backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InstOptions {
    pub mode: InstMode,
    /// Mean accesses per sample of each thread (sampled mode).
    pub sample_every: u32,
    /// Samples per second the program's sampling threads take at most together (0: no cap):
    /// above its share, a thread's interval doubles, and each sample's weight says how many
    /// accesses it stands for (`runtime/inst/sample_rate.h`).
    pub max_sample_rate: u32,
}

/// Default mean sampling interval: one sample per 1024 accesses of a thread. It keeps a sample's
/// cost (a clock read and a 32-byte record, about 130 ns of thread time) near 0.1 ns per access,
/// while a 256 MiB array swept once still yields a sample for every second page per sweep; the
/// intervals are randomised around it so loops cannot alias with it (docs/INST.md).
pub const DEFAULT_SAMPLE_EVERY: u32 = 1024;

/// Default cap on a process's samples per second, shared among its sampling threads. Below
/// its share a thread samples every `DEFAULT_SAMPLE_EVERY` accesses; a busy loop makes ten to a
/// hundred times more (jacobi-2d's two threads took 4.7 M samples in a second), whose writing
/// after the program's end took most of the recorder's time. At the cap, a second of a busy
/// two-thread run still has 25,000 to 100,000 samples (a thread's interval doubles above its
/// share and halves under a quarter of it), and a finding needs a few hundred. A cap per
/// thread (100,000, then 50,000) let the samples, and the work after the end, grow with the
/// threads; four real codes' findings were the same at 100,000 and 50,000 a thread
/// (docs/INST.md).
pub const DEFAULT_MAX_SAMPLE_RATE: u32 = 100_000;

impl Default for InstOptions {
    fn default() -> Self {
        InstOptions {
            mode: InstMode::Both,
            sample_every: DEFAULT_SAMPLE_EVERY,
            max_sample_rate: DEFAULT_MAX_SAMPLE_RATE,
        }
    }
}

impl InstOptions {
    /// The environment the hooks read.
    pub fn env(&self) -> Vec<(OsString, OsString)> {
        vec![
            ("NUMALENS_INST".into(), self.mode.env_value().into()),
            (
                "NUMALENS_INST_EVERY".into(),
                self.sample_every.to_string().into(),
            ),
            (
                "NUMALENS_INST_MAX_RATE".into(),
                self.max_sample_rate.to_string().into(),
            ),
        ]
    }
}

/// Why a program cannot be recorded with the `inst` backend.
#[derive(Debug, thiserror::Error)]
pub enum InstCheckError {
    #[error(
        "{0} is not built with numalens' instrumentation, so `--backend inst` has nothing to \
         count. Rebuild it with the compiler wrappers, e.g. `make CC=\"numalens cc\" \
         CXX=\"numalens c++\" FC=\"numalens fortran\"` (CMake: the same CC/CXX/FC variables), or \
         record it with `--backend faults`"
    )]
    NotInstrumented(String),
    #[error(
        "{0} is linked with ThreadSanitizer's own runtime (libtsan), which takes the \
         instrumentation's calls instead of numalens. Rebuild it with `numalens cc`/`c++`/\
         `fortran` without `-fsanitize=thread` or `-ltsan` on the command line"
    )]
    Libtsan(String),
    #[error(
        "{program} is a script ({interpreter}), not the program: `--backend inst` counts the \
         accesses of a program built with `numalens cc`, and the script only starts it. Give \
         `record` the real executable{hint}"
    )]
    Script {
        program: String,
        interpreter: String,
        /// Where libtool keeps the real program, when it is there.
        hint: String,
    },
    #[error("{0}: {1}")]
    Unreadable(String, String),
}

/// A wrapper script (libtool's `prog` for `.libs/prog`, a launcher): the error says where the real
/// program is when libtool's place for it holds it.
fn script_error(program: String, path: &std::path::Path, first_line: &[u8]) -> InstCheckError {
    let line = first_line.split(|b| *b == b'\n').next().unwrap_or_default();
    let interpreter = format!("#!{}", String::from_utf8_lossy(line).trim());
    let libs = path
        .file_name()
        .map(|name| path.with_file_name(".libs").join(name));
    let hint = match libs {
        Some(real) if real.is_file() => format!(" (libtool's is {})", real.display()),
        _ => " (libtool keeps it in .libs/ beside the script; a launcher script names it)".into(),
    };
    InstCheckError::Script {
        program,
        interpreter,
        hint,
    }
}

/// What [`check_program`] learnt of a program built with `numalens cc`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InstProgram {
    /// Why its hooks are calls, as its links recorded ([`calls_mark`]); empty when they are
    /// inlined (or it was linked before links said so).
    pub hooks_are_calls: Vec<String>,
}

impl InstProgram {
    /// The line to tell the user when the hooks are calls.
    pub fn calls_note(&self, program: &OsStr) -> Option<String> {
        (!self.hooks_are_calls.is_empty()).then(|| {
            format!(
                "{} was built without inlined hooks ({}): recording is about twice as slow as it \
                 could be; fix that and rebuild with `numalens cc`",
                program.to_string_lossy(),
                self.hooks_are_calls.join("; ")
            )
        })
    }
}

/// Checks that `program` carries the hooks' marker section and no ThreadSanitizer runtime.
pub fn check_program(program: &OsStr) -> Result<InstProgram, InstCheckError> {
    let name = program.to_string_lossy().into_owned();
    let path = program_path(program)
        .ok_or_else(|| InstCheckError::Unreadable(name.clone(), "not found".into()))?;
    let bytes = std::fs::read(&path)
        .map_err(|e| InstCheckError::Unreadable(name.clone(), e.to_string()))?;
    if let Some(line) = bytes.strip_prefix(b"#!") {
        return Err(script_error(name, &path, line));
    }
    let file = object::File::parse(&*bytes).map_err(|e| {
        InstCheckError::Unreadable(name.clone(), format!("not an ELF program ({e})"))
    })?;
    let ours = file.section_by_name("numalens_inst").is_some();
    let needs_libtsan = file
        .section_by_name(".dynstr")
        .and_then(|s| s.data().ok())
        .is_some_and(|d| d.windows(9).any(|w| w == b"libtsan.s"));
    let has_tsan_runtime = file
        .symbols()
        .chain(file.dynamic_symbols())
        .any(|s| !s.is_undefined() && s.name() == Ok("__tsan_mutex_create"));
    if needs_libtsan || has_tsan_runtime {
        return Err(InstCheckError::Libtsan(name));
    }
    if !ours {
        return Err(InstCheckError::NotInstrumented(name));
    }
    Ok(InstProgram {
        hooks_are_calls: calls_mark::reasons(&file),
    })
}

/// The program's path as exec would find it.
pub fn program_path(program: &OsStr) -> Option<std::path::PathBuf> {
    let direct = std::path::Path::new(program);
    if direct.components().count() > 1 {
        return Some(direct.to_path_buf());
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}
