//! Helpers of the record-level tests: build a program from `tests/record_progs/`, record it, and
//! look at the profile the way a user would (first toucher of each page, the object and call site
//! of an address).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use numalens_format::{Object, ObjectKind, Profile, Sample, SampleKind, SiteFrame, Thread};
use numalens_record::record::RecordOptions;
use numalens_record::session::{Recorded, record};

pub const PAGE: u64 = 4096;

pub fn prog_source(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/record_progs")
        .join(name)
}

/// Compiles `sources` (under `tests/record_progs/`) with `compiler` into `dir/out`.
pub fn build(dir: &Path, compiler: &str, sources: &[&str], out: &str, flags: &[&str]) -> PathBuf {
    let exe = dir.join(out);
    let output = Command::new(compiler)
        .args(["-O1", "-g", "-pthread"])
        .args(flags)
        .arg("-o")
        .arg(&exe)
        .args(sources.iter().map(|s| prog_source(s)))
        .output()
        .unwrap_or_else(|e| panic!("{compiler} runs: {e}"));
    assert!(
        output.status.success(),
        "{compiler} {sources:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    exe
}

/// The line of `source` holding `marker` (a comment such as `/* site: array */`), so that tests
/// name the lines they check without hard-coding numbers that every edit would shift.
pub fn line_of(source: &str, marker: &str) -> u32 {
    let text = std::fs::read_to_string(prog_source(source)).unwrap();
    let index = text
        .lines()
        .position(|l| l.contains(marker))
        .unwrap_or_else(|| panic!("{marker} not in {source}"));
    index as u32 + 1
}

/// Records `program OUT args…`, where OUT is `dir/stdout.txt`: the programs append what they
/// print there (so that a chain of processes can share it), and are recorded directly rather
/// than through a shell, whose own start would add first touches that are not the program's.
pub fn record_program(dir: &Path, program: &Path, args: &[&str]) -> (Recorded, Profile) {
    record_with(dir, program, args, |_| {})
}

/// Same, with options changed by `tweak` first.
pub fn record_with(
    dir: &Path,
    program: &Path,
    args: &[&str],
    tweak: impl FnOnce(&mut RecordOptions),
) -> (Recorded, Profile) {
    let out = dir.join("stdout.txt");
    let args = std::iter::once(out.into_os_string())
        .chain(args.iter().map(Into::into))
        .collect();
    let mut opts = RecordOptions::new(program, args, dir.join("p.numalens"));
    tweak(&mut opts);
    let recorded = record(&opts).unwrap();
    let profile = Profile::open(&recorded.profile).unwrap();
    (recorded, profile)
}

/// `key value` lines the program printed; a key printed twice keeps its last value.
pub fn printed(dir: &Path) -> HashMap<String, String> {
    std::fs::read_to_string(dir.join("stdout.txt"))
        .unwrap()
        .lines()
        .filter_map(|l| l.rsplit_once(' '))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

pub trait Printed {
    fn num(&self, key: &str) -> u64;
    fn addr(&self, key: &str) -> u64;
}

impl Printed for HashMap<String, String> {
    fn num(&self, key: &str) -> u64 {
        let v = self.get(key).unwrap_or_else(|| panic!("{key} not printed"));
        v.parse().unwrap_or_else(|_| panic!("{key}: {v}"))
    }

    fn addr(&self, key: &str) -> u64 {
        let v = self.get(key).unwrap_or_else(|| panic!("{key} not printed"));
        u64::from_str_radix(v.trim_start_matches("0x"), 16).unwrap_or_else(|_| panic!("{key}: {v}"))
    }
}

/// What a test reads from a profile.
pub struct View {
    pub samples: Vec<Sample>,
    pub objects: Vec<Object>,
    pub frames: Vec<SiteFrame>,
    pub threads: Vec<Thread>,
    /// (pid, page) → index of the first-touch sample of that page (the earliest, if several).
    first: HashMap<(u32, u64), usize>,
}

impl View {
    pub fn read(profile: &Profile) -> View {
        let samples = profile.read_all::<Sample>().unwrap();
        let mut first: HashMap<(u32, u64), usize> = HashMap::new();
        for (i, s) in samples.iter().enumerate() {
            if s.kind != SampleKind::FirstTouch {
                continue;
            }
            let slot = first.entry((s.pid, s.address & !(PAGE - 1))).or_insert(i);
            if s.time_ns < samples[*slot].time_ns {
                *slot = i;
            }
        }
        View {
            samples,
            objects: profile.read_all::<Object>().unwrap(),
            frames: profile.read_all::<SiteFrame>().unwrap(),
            threads: profile.read_all::<Thread>().unwrap(),
            first,
        }
    }

    /// The heap object of `pid` that starts at `start` (the one allocated last, if reused).
    pub fn object_at(&self, pid: u32, start: u64) -> &Object {
        self.objects
            .iter()
            .filter(|o| o.pid == pid && o.start == start)
            .max_by_key(|o| o.alloc_ns)
            .unwrap_or_else(|| panic!("no object of {pid} at {start:#x}"))
    }

    pub fn object(&self, id: u64) -> &Object {
        &self.objects[id as usize]
    }

    /// The frames of a site, innermost first.
    pub fn site(&self, key: u64) -> Vec<&SiteFrame> {
        let mut frames: Vec<_> = self.frames.iter().filter(|f| f.site_key == key).collect();
        frames.sort_by_key(|f| f.depth);
        frames.dedup_by_key(|f| f.depth);
        frames
    }

    /// The first frame of the object's site in `function`, with its file and line.
    pub fn frame_in<'a>(&'a self, object: &Object, function: &str) -> &'a SiteFrame {
        let key = object
            .site_key
            .unwrap_or_else(|| panic!("{} has no site", object.name));
        let frames = self.site(key);
        frames
            .iter()
            .find(|f| f.function.as_deref().is_some_and(|n| n.contains(function)))
            .copied()
            .unwrap_or_else(|| panic!("no frame in {function} for {}: {frames:#?}", object.name))
    }

    /// The pages wholly inside `[start, start + len)`, each with its first-touch sample.
    pub fn pages_of(&self, pid: u32, start: u64, len: u64) -> Vec<(u64, Option<&Sample>)> {
        let first = (start + PAGE - 1) & !(PAGE - 1);
        let end = (start + len) & !(PAGE - 1);
        (first..end)
            .step_by(PAGE as usize)
            .map(|p| (p, self.first_touch(pid, p)))
            .collect()
    }

    /// Asserts that every page wholly inside the range was first touched by `tid`, and that the
    /// sample is attributed to `object`.
    pub fn assert_touched_by(&self, pid: u32, start: u64, len: u64, tid: u32, object: u64) {
        let pages = self.pages_of(pid, start, len);
        assert!(!pages.is_empty(), "no whole page in {start:#x}+{len}");
        for (page, sample) in pages {
            let s = sample.unwrap_or_else(|| panic!("page {page:#x} of {pid} has no first touch"));
            assert_eq!(s.tid, tid, "first toucher of page {page:#x}");
            assert_eq!(s.object_id, Some(object), "object of page {page:#x}");
        }
    }

    /// The first-touch sample of the page at `page` in `pid`.
    pub fn first_touch(&self, pid: u32, page: u64) -> Option<&Sample> {
        self.first.get(&(pid, page)).map(|&i| &self.samples[i])
    }

    pub fn thread(&self, tid: u32) -> &Thread {
        self.threads
            .iter()
            .find(|t| t.tid == tid)
            .unwrap_or_else(|| panic!("thread {tid} not in the profile"))
    }
}

/// An object the runtime or the symbol tables told about (allocation, mapping with a call site,
/// static, stack, TLS), as opposed to a mapping of last resort from the maps snapshots.
pub fn is_tracked(o: &Object) -> bool {
    o.site_key.is_some() || o.alloc_tid.is_some() || o.kind == ObjectKind::Static
}

/// A mapping of last resort of a module (code, data segment, or the anonymous .bss right after
/// the data segment): its first touches are instruction fetches, the loader's relocations and
/// the libraries' own small statics, most of them before any code of the runtime runs.
fn is_module_mapping(o: &Object, view: &View) -> bool {
    if is_tracked(o) {
        return false;
    }
    match o.kind {
        ObjectKind::Code | ObjectKind::File => true,
        ObjectKind::Mmap => view.objects.iter().any(|f| {
            f.pid == o.pid
                && f.kind == ObjectKind::File
                && !is_tracked(f)
                && f.start + f.size == o.start
        }),
        _ => false,
    }
}

/// First-touch shares of a recording, in %: on tracked objects over all first touches, and over
/// the first touches of data (those on module mappings left out).
pub fn shares(program: &str, recorded: &Recorded, view: &View) -> (f64, f64) {
    let s = &recorded.summary;
    let total = 100.0 * s.first_touches_tracked as f64 / s.first_touches.max(1) as f64;
    let on = |s: &Sample| s.object_id.map(|id| view.object(id));
    let first = view
        .samples
        .iter()
        .filter(|s| s.kind == SampleKind::FirstTouch);
    let modules = first
        .clone()
        .filter(|s| on(s).is_some_and(|o| is_module_mapping(o, view)))
        .count() as u64;
    let tracked = first.filter(|s| on(s).is_some_and(is_tracked)).count() as u64;
    let data = 100.0 * tracked as f64 / (s.first_touches - modules).max(1) as f64;
    eprintln!(
        "{program}: {} first touches, {} on tracked objects ({total:.2} %); {modules} on module \
         mappings; {data:.2} % of the other {} on tracked objects",
        s.first_touches,
        s.first_touches_tracked,
        s.first_touches - modules
    );
    (total, data)
}

/// Asserts the attribution target: at least 99 % of the first touches of data on tracked
/// objects. On failure, says where the others went, and from which module they were touched.
pub fn assert_tracked(program: &str, recorded: &Recorded, view: &View) {
    let (_, data) = shares(program, recorded, view);
    if data >= 99.0 {
        return;
    }
    let mut by_object: HashMap<String, u64> = HashMap::new();
    for s in view
        .samples
        .iter()
        .filter(|s| s.kind == SampleKind::FirstTouch)
    {
        let name = match s.object_id.map(|id| view.object(id)) {
            Some(o) if is_tracked(o) || is_module_mapping(o, view) => continue,
            Some(o) => format!("{:?} {} (pid {})", o.kind, o.name, o.pid),
            None => format!("no object (pid {})", s.pid),
        };
        // Who touched it: the code mapping holding the faulting instruction.
        let by = s.ip.and_then(|ip| {
            view.objects.iter().find(|o| {
                o.pid == s.pid
                    && o.kind == ObjectKind::Code
                    && (o.start..o.start + o.size).contains(&ip)
            })
        });
        let by = by.map_or("?", |o| o.name.rsplit('/').next().unwrap_or(""));
        *by_object
            .entry(format!("{name}, touched from {by}"))
            .or_default() += 1;
    }
    let mut top: Vec<_> = by_object.into_iter().collect();
    top.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
    top.truncate(20);
    panic!(
        "{program}: only {data:.2} % of first touches of data on tracked objects; the others: {top:#?}"
    );
}
