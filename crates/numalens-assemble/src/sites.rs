//! Call sites: frames mapped to (module, offset), a stable key that survives ASLR, names.

use std::collections::HashMap;
use std::path::Path;

use numalens_format::{SiteFrame, distinct_rungs, is_system_source, short_function_name};

use crate::symbols::{SourceLocation, Symbolizer};

/// A module loaded in a process.
#[derive(Debug, Clone)]
pub struct LoadedModule {
    pub path: String,
    pub build_id: Vec<u8>,
    pub load_bias: u64,
    pub low: u64,
    pub high: u64,
}

/// A symbolised call site.
#[derive(Debug, Clone)]
pub struct Site {
    pub key: u64,
    /// Short name for objects allocated here: `function (file:line)` of the first frame in the
    /// program's own code.
    pub name: String,
    pub frames: Vec<SiteFrame>,
}

/// Libraries whose frames are not where the user allocates: the name skips them.
const ALLOCATOR_MODULES: &[&str] = &[
    "libc.so",
    "libstdc++.so",
    "libgomp.so",
    "libgfortran.so",
    "libnumalens",
];

/// Builds a site from return addresses (innermost first).
pub fn site(frames: &[u64], modules: &[LoadedModule], symbols: &mut Symbolizer) -> Site {
    let mut rows = Vec::new();
    let mut key = Fnv::new();
    for &address in frames {
        let module = modules.iter().find(|m| (m.low..m.high).contains(&address));
        let (path, offset, chain) = match module {
            Some(m) => {
                let svma = address.wrapping_sub(m.load_bias);
                key.write(if m.build_id.is_empty() {
                    m.path.as_bytes()
                } else {
                    &m.build_id
                });
                key.write(&svma.to_le_bytes());
                let chain = symbols.locate_inlined(Path::new(&m.path), svma.saturating_sub(1));
                (m.path.clone(), svma, chain)
            }
            None => {
                key.write(&address.to_le_bytes());
                let unknown = vec![SourceLocation::default()];
                (String::from("[unknown]"), address, unknown)
            }
        };
        // Functions inlined at the return address are frames of their own, at the same offset.
        for location in chain {
            rows.push(SiteFrame {
                site_key: 0,
                depth: rows.len() as u32,
                module: path.clone(),
                offset,
                function: location.function,
                file: location.file,
                line: location.line,
            });
        }
    }
    let key = key.finish();
    for row in &mut rows {
        row.site_key = key;
    }
    Site {
        key,
        name: site_name(&rows),
        frames: rows,
    }
}

fn site_name(frames: &[SiteFrame]) -> String {
    match naming_frame(frames) {
        Some(at) => frame_name(&frames[at]),
        None => "[no call site]".into(),
    }
}

/// Whether a frame is the program's own code: not the allocator's library, not a system header.
fn own_frame(f: &SiteFrame) -> bool {
    !ALLOCATOR_MODULES.iter().any(|m| f.module.contains(m))
        && !f.file.as_deref().is_some_and(is_system_source)
}

/// The frame that names a site: the first of the program's own code, else the innermost.
fn naming_frame(frames: &[SiteFrame]) -> Option<usize> {
    frames
        .iter()
        .position(own_frame)
        .or((!frames.is_empty()).then_some(0))
}

/// `function (file:line)`, or `module+offset` without a function name.
fn frame_name(frame: &SiteFrame) -> String {
    let function = frame
        .function
        .as_deref()
        .map(short_function_name)
        .unwrap_or_else(|| {
            let module = Path::new(&frame.module)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned());
            format!("{}+{:#x}", module.unwrap_or_default(), frame.offset)
        });
    match (&frame.file, frame.line) {
        (Some(file), Some(line)) => {
            let file = Path::new(file)
                .file_name()
                .map_or(file.clone(), |n| n.to_string_lossy().into_owned());
            format!("{function} ({file}:{line})")
        }
        _ => function,
    }
}

/// Renames the sites of a wrapper the program allocates through (`xmalloc (polybench.c:523)`
/// inside `polybench_alloc_data`, `alloc_2d_dbl`): when one name would name several sites,
/// every array of the program got it and no finding could say which array it meant. Such sites
/// are named by their next own frame outward, again while names still collide
/// (`main (jacobi-2d-omp.c:88)`). Returns the new name of each renamed site by site key.
pub fn name_wrapped_sites(sites: &mut SiteTable) -> HashMap<u64, String> {
    let mut renamed = HashMap::new();
    let ladders: Vec<Vec<&SiteFrame>> =
        sites.done.values().map(|s| own_frames(&s.frames)).collect();
    // Frames are told apart by what the analysis compares (`numalens-analyze` `sites.rs`): the
    // whole function name, the file's path and the line, not the shortened name shown; a frame
    // without a function by its module and offset.
    let places: Vec<Vec<FramePlace>> = ladders
        .iter()
        .map(|l| l.iter().map(|f| frame_place(f)).collect())
        .collect();
    let rungs = distinct_rungs(&places, MAX_WRAPPER_DEPTH);
    let names: Vec<Option<String>> = ladders
        .iter()
        .zip(rungs)
        .map(|(ladder, rung)| (rung > 0).then(|| frame_name(ladder[rung])))
        .collect();
    for (site, name) in sites.done.values_mut().zip(names) {
        if let Some(name) = name {
            site.name = name;
            renamed.insert(site.key, site.name.clone());
        }
    }
    renamed
}

/// How many wrappers deep a site's name may climb.
const MAX_WRAPPER_DEPTH: usize = 4;

type FramePlace<'a> = (
    Result<&'a str, (&'a str, u64)>,
    Option<&'a str>,
    Option<u32>,
);

fn frame_place(f: &SiteFrame) -> FramePlace<'_> {
    let function = f.function.as_deref().ok_or((f.module.as_str(), f.offset));
    (function, f.file.as_deref(), f.line)
}

/// A site's own frames from its naming frame outward, consecutive repeats of a place once.
fn own_frames(frames: &[SiteFrame]) -> Vec<&SiteFrame> {
    let Some(at) = naming_frame(frames) else {
        return Vec::new();
    };
    let mut own: Vec<&SiteFrame> = vec![&frames[at]];
    // Only callers with a source line: `_start` and other frames without debug information say
    // nothing a programmer can act on.
    for frame in frames[at + 1..]
        .iter()
        .filter(|f| own_frame(f) && f.line.is_some())
    {
        if own.last().map(|l| frame_place(l)) != Some(frame_place(frame)) {
            own.push(frame);
        }
    }
    own
}

/// The site of a static variable: one frame, its definition's file and line, at the variable's
/// address in its module (no call stack allocates a static). Keyed like call sites, so the same
/// variable has the same key in every run of the same build.
pub fn definition_site(
    module: &LoadedModule,
    svma: u64,
    name: &str,
    file: String,
    line: u32,
) -> Site {
    let mut key = Fnv::new();
    key.write(if module.build_id.is_empty() {
        module.path.as_bytes()
    } else {
        &module.build_id
    });
    key.write(&svma.to_le_bytes());
    let key = key.finish();
    let short = Path::new(&file)
        .file_name()
        .map_or(file.clone(), |n| n.to_string_lossy().into_owned());
    Site {
        key,
        name: format!("{name} ({short}:{line})"),
        frames: vec![SiteFrame {
            site_key: key,
            depth: 0,
            module: module.path.clone(),
            offset: svma,
            // A static at file scope is in no function.
            function: None,
            file: Some(file),
            line: Some(line),
        }],
    }
}

/// Sites of one process, symbolised once each.
#[derive(Default)]
pub struct SiteTable {
    raw: HashMap<u64, Vec<u64>>,
    done: HashMap<u64, Site>,
    /// Definitions of statics: not the runtime's, so kept apart from its site ids.
    definitions: Vec<Site>,
}

impl SiteTable {
    pub fn add_raw(&mut self, site_id: u64, frames: Vec<u64>) {
        self.raw.insert(site_id, frames);
    }

    /// The site with the runtime's `site_id`, symbolised on first use.
    pub fn get(
        &mut self,
        site_id: u64,
        modules: &[LoadedModule],
        symbols: &mut Symbolizer,
    ) -> Option<&Site> {
        if !self.done.contains_key(&site_id) {
            let frames = self.raw.get(&site_id)?;
            let built = site(frames, modules, symbols);
            self.done.insert(site_id, built);
        }
        self.done.get(&site_id)
    }

    pub fn add_definition(&mut self, site: Site) {
        self.definitions.push(site);
    }

    /// The sites objects were allocated at, by key (the same recording writes the same
    /// `sites` table), then the statics' definitions.
    pub fn used(&self) -> impl Iterator<Item = &Site> {
        let mut done: Vec<&Site> = self.done.values().collect();
        done.sort_unstable_by_key(|s| s.key);
        done.into_iter().chain(&self.definitions)
    }
}

/// FNV-1a, 64 bits: a stable hash (std's hasher may change between releases).
struct Fnv(u64);

impl Fnv {
    fn new() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ *b as u64).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    fn finish(&self) -> u64 {
        self.0
    }
}
