//! Static data objects of the binaries a recording mapped, when their files are at hand: their
//! symbol tables give each object's name, address in the module and size, and the module's
//! mappings (`MMAP2` records) give where it was loaded.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use numalens_assemble::attribute::ObjectSpec;
use numalens_assemble::raw::PerfEvent;
use numalens_assemble::symbols::{ModuleFiles, map_file, static_objects};
use numalens_format::ObjectKind;
use object::{Object, ObjectSegment};

/// The statics of every file-backed module of every process, placed at their load address. A
/// module's file is used only when it is the one recorded: its build id is the one the recording
/// lists for its path, or, for a path listed without one, the recording was made on this host.
pub fn statics(
    tasks: &[PerfEvent],
    min_object: u64,
    build_ids: &HashMap<String, Vec<u8>>,
    this_host: bool,
) -> Vec<ObjectSpec> {
    // (pid, path) → (lowest file offset mapped, its start): the module's first mapping.
    let mut modules: BTreeMap<(u32, &str), (u64, u64)> = BTreeMap::new();
    for t in tasks {
        if let PerfEvent::Mmap {
            pid,
            start,
            pgoff,
            path,
            ..
        } = t
            && path.starts_with('/')
        {
            let e = modules
                .entry((*pid, path.as_str()))
                .or_insert((*pgoff, *start));
            if *pgoff < e.0 {
                *e = (*pgoff, *start);
            }
        }
    }
    let mut found = Vec::new();
    for ((pid, path), (pgoff, start)) in modules {
        let recorded = match build_ids.get(path) {
            Some(id) => build_id(Path::new(path)).as_ref() == Some(id),
            None => this_host,
        };
        if !recorded {
            continue;
        }
        let path = Path::new(path);
        let Some(bias) = load_bias(path, pgoff, start) else {
            continue;
        };
        let symbols_file = ModuleFiles::AsRecorded.symbols_file(path);
        let Ok(symbols) = static_objects(&symbols_file, min_object) else {
            continue;
        };
        found.extend(symbols.into_iter().map(|s| ObjectSpec {
            pid,
            kind: ObjectKind::Static,
            name: s.name,
            start: bias.wrapping_add(s.svma),
            size: s.size,
            alloc_ns: 0,
            free_ns: None,
            alloc_tid: None,
            site_key: None,
            tracked: true,
        }));
    }
    found
}

/// The build id of the ELF file at `path`.
fn build_id(path: &Path) -> Option<Vec<u8>> {
    let bytes = map_file(path).ok()?;
    let file = object::File::parse(&*bytes).ok()?;
    file.build_id().ok().flatten().map(<[u8]>::to_vec)
}

/// The load bias of the ELF file at `path` mapped at `start` from file offset `pgoff`: the
/// segment holding that offset maps file offset `o` to address `v`, so the module's address
/// `v - o + pgoff` is at `start`.
fn load_bias(path: &Path, pgoff: u64, start: u64) -> Option<u64> {
    let bytes = map_file(path).ok()?;
    let file = object::File::parse(&*bytes).ok()?;
    file.segments().find_map(|seg| {
        let (offset, size) = seg.file_range();
        let holds = offset <= pgoff && pgoff < offset.saturating_add(size.max(1));
        // The segment's first page: mappings start page-aligned in file and memory.
        let first_page = pgoff == offset & !0xfff;
        (holds || first_page)
            .then(|| start.wrapping_sub(seg.address().wrapping_sub(offset).wrapping_add(pgoff)))
    })
}
