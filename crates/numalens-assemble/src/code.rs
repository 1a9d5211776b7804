//! Where the faulting instructions are: each distinct (pid, ip) of the samples symbolised to
//! module, offset, function, file and line, so the profile says which line of code touched a page.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use numalens_format::CodeLocation;
use numalens_inst::files::InstData;
use object::{Object, ObjectSegment};

use crate::objects::ProcessView;
use crate::raw::{Access, Fault, PerfEvent};
use crate::sites::LoadedModule;
use crate::symbols::{ModuleFiles, SourceLocation, Symbolizer};

/// Addresses at or above this are the kernel's (faults taken inside system calls).
const KERNEL_START: u64 = 0xffff_8000_0000_0000;

/// Symbolises `ips` with the modules the runtime saw, or else the executable mappings perf
/// reported (programs without the runtime, e.g. static ones).
pub fn code_locations(
    ips: &BTreeSet<(u32, u64)>,
    views: &[ProcessView],
    tasks: &[PerfEvent],
    symbols: &mut Symbolizer,
) -> Vec<CodeLocation> {
    let by_pid: HashMap<u32, &ProcessView> = views.iter().map(|v| (v.pid, v)).collect();
    let mut mapped = MappedModules::new(tasks, symbols.files().clone());
    ips.iter()
        .map(|&(pid, ip)| {
            let found = if ip >= KERNEL_START {
                Some(("[kernel]".to_string(), ip, false))
            } else {
                by_pid
                    .get(&pid)
                    .and_then(|v| module_of(&v.modules, ip))
                    .or_else(|| mapped.locate(pid, ip))
            };
            let (module, offset, location) = match found {
                Some((module, svma, true)) => {
                    let location = symbols.locate(Path::new(&module), svma);
                    (module, svma, location)
                }
                Some((module, offset, false)) => (module, offset, SourceLocation::default()),
                None => (String::new(), ip, SourceLocation::default()),
            };
            CodeLocation {
                pid,
                ip,
                module,
                offset,
                function: location.function,
                file: location.file,
                line: location.line,
            }
        })
        .collect()
}

/// The code addresses the report names: sample IPs and thread start routines, per process.
pub fn code_addresses(
    faults: &[Fault],
    accesses: &[Access],
    inst_data: &InstData,
    views: &[ProcessView],
) -> BTreeSet<(u32, u64)> {
    let mut ips: BTreeSet<(u32, u64)> = distinct(faults.iter().map(|f| (f.pid, f.ip)))
        .into_iter()
        .collect();
    ips.extend(distinct(accesses.iter().map(|a| (a.pid, a.ip))));
    match &inst_data.sample_code {
        // Gathered as the samples were read while the program ran.
        Some(code) => ips.extend(
            code.iter()
                .map(|(pid, ip)| (*pid, crate::inst::code_address(*ip))),
        ),
        None => ips.extend(distinct(
            inst_data
                .samples
                .iter()
                .map(|s| (s.pid, crate::inst::sample_ip(s))),
        )),
    }
    for view in views {
        ips.extend(
            view.threads
                .iter()
                .filter(|t| t.start_routine != 0)
                .map(|t| (view.pid, t.start_routine)),
        );
    }
    ips
}

/// The distinct values of `keys`. Millions of samples come from a few hundred instructions, the
/// same one often several times in a row: a hash set that skips repeats finds them at a
/// fraction of the cost of a search of the ordered set per sample.
fn distinct(keys: impl Iterator<Item = (u32, u64)>) -> ahash::AHashSet<(u32, u64)> {
    let mut seen = ahash::AHashSet::new();
    let mut last = None;
    for key in keys {
        if last != Some(key) {
            seen.insert(key);
            last = Some(key);
        }
    }
    seen
}

/// (module path, address in the module's own space, symbolisable) from the runtime's module list.
fn module_of(modules: &[LoadedModule], ip: u64) -> Option<(String, u64, bool)> {
    let m = modules.iter().find(|m| (m.low..m.high).contains(&ip))?;
    Some((m.path.clone(), ip.wrapping_sub(m.load_bias), true))
}

/// A loadable ELF segment: file offset, size in the file, virtual address.
type Segment = (u64, u64, u64);

/// Executable file mappings from perf MMAP2 records, turned into module addresses through the
/// ELF program headers (a file offset is not a virtual address for non-PIE executables).
struct MappedModules {
    maps: HashMap<u32, Vec<(u64, u64, u64, String)>>,
    /// Per module path: (file offset, size, virtual address) of each loadable segment.
    segments: HashMap<String, Option<Vec<Segment>>>,
    files: ModuleFiles,
}

impl MappedModules {
    fn new(tasks: &[PerfEvent], files: ModuleFiles) -> Self {
        let mut maps: HashMap<u32, Vec<_>> = HashMap::new();
        for t in tasks {
            if let PerfEvent::Mmap {
                pid,
                start,
                len,
                pgoff,
                prot,
                path,
                ..
            } = t
                && prot & libc::PROT_EXEC as u32 != 0
                && path.starts_with('/')
            {
                maps.entry(*pid).or_default().push((
                    *start,
                    start.saturating_add(*len),
                    *pgoff,
                    path.clone(),
                ));
            }
        }
        MappedModules {
            maps,
            segments: HashMap::new(),
            files,
        }
    }

    fn locate(&mut self, pid: u32, ip: u64) -> Option<(String, u64, bool)> {
        let (start, _, pgoff, path) = self
            .maps
            .get(&pid)?
            .iter()
            .rev()
            .find(|(s, e, _, _)| (*s..*e).contains(&ip))?
            .clone();
        let file_offset = (ip - start).checked_add(pgoff)?;
        let segments = self
            .segments
            .entry(path.clone())
            .or_insert_with(|| load_segments(&self.files.file(Path::new(&path))));
        let svma = segments.as_ref().and_then(|segs| {
            segs.iter()
                .find(|(off, size, _)| (*off..off + size).contains(&file_offset))
                .map(|(off, _, vaddr)| vaddr + (file_offset - off))
        });
        Some(match svma {
            Some(svma) => (path, svma, true),
            None => (path, file_offset, false),
        })
    }
}

fn load_segments(path: &Path) -> Option<Vec<Segment>> {
    let bytes = crate::symbols::map_file(path).ok()?;
    let file = object::File::parse(&*bytes).ok()?;
    Some(
        file.segments()
            .map(|s| {
                let (offset, size) = s.file_range();
                (offset, size, s.address())
            })
            .collect(),
    )
}
