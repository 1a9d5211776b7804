//! Offline symbolisation: function, file and line of an address in a module, and the static data
//! objects of a module's symbol table. Runs in the recorder, never in the profiled program.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use object::{Object, ObjectSection, ObjectSymbol, SymbolKind};

/// Where an address is in the source.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SourceLocation {
    pub function: Option<String>,
    pub file: Option<String>,
    pub line: Option<u32>,
}

/// Symbolises addresses given as (module path, address in the module's own address space).
/// Loaders are opened once per module and kept; a module that cannot be read yields empty
/// locations rather than an error, since a profile is still useful without names.
#[derive(Default)]
pub struct Symbolizer {
    loaders: HashMap<PathBuf, Option<addr2line::Loader>>,
}

impl Symbolizer {
    pub fn new() -> Self {
        Self::default()
    }

    /// Location of `svma` (stated virtual memory address: runtime address minus load bias).
    /// For return addresses pass `svma - 1` so that the call instruction itself is looked up.
    pub fn locate(&mut self, module: &Path, svma: u64) -> SourceLocation {
        self.locate_inlined(module, svma).swap_remove(0)
    }

    /// The location of `svma` with the functions inlined there: innermost first, the function
    /// that holds the code last. Never empty.
    pub fn locate_inlined(&mut self, module: &Path, svma: u64) -> Vec<SourceLocation> {
        let loader = self
            .loaders
            .entry(module.to_path_buf())
            .or_insert_with(|| addr2line::Loader::new(module).ok());
        let Some(loader) = loader else {
            return vec![SourceLocation::default()];
        };
        let mut chain = Vec::new();
        if let Ok(mut frames) = loader.find_frames(svma) {
            while let Ok(Some(frame)) = frames.next() {
                let function = frame
                    .function
                    .as_ref()
                    .and_then(|f| f.demangle().ok().map(|s| s.into_owned()));
                let (file, line) = frame
                    .location
                    .map_or((None, None), |l| (l.file.map(str::to_string), l.line));
                chain.push(SourceLocation {
                    function,
                    file,
                    line,
                });
            }
        }
        if chain.is_empty() {
            chain.push(SourceLocation::default());
        }
        let last = chain.len() - 1;
        if chain[last].function.is_none() {
            chain[last].function = loader.find_symbol(svma).map(demangle);
        }
        chain
    }
}

/// A mangled name (C++'s and Rust's legacy `_Z…`, Rust's v0 `_R…`) in source form; any other
/// name as it is: demangling every name as C++ turned C's `a`, `b`, `c` into `signed char`,
/// `bool`, `char` (one-letter builtin type codes).
fn demangle(name: &str) -> String {
    if name.starts_with("_Z") || name.starts_with("_R") {
        addr2line::demangle_auto(name.into(), None).into_owned()
    } else {
        name.to_string()
    }
}

/// A data object from a module's symbol table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaticSymbol {
    pub name: String,
    /// Address in the module's own address space (add the load bias for the runtime address).
    pub svma: u64,
    pub size: u64,
    /// `.data`, `.bss`, `.rodata`, …
    pub section: String,
}

/// The file's bytes, mapped read-only: parsing an ELF file reads a small part of it.
pub fn map_file(path: &Path) -> std::io::Result<memmap2::Mmap> {
    let file = std::fs::File::open(path)?;
    // SAFETY: the mapping is read-only. The only hazard is a file truncated while mapped (a
    // SIGBUS on access); these are the modules of a program that has just run, which package
    // managers replace by renaming, not by truncating in place. addr2line maps them the same way.
    unsafe { memmap2::Mmap::map(&file) }
}

/// The section that marks `libnumalens.so` (runtime/src/hooks.c).
pub const RUNTIME_MARKER_SECTION: &str = "numalens_runtime";

/// Data symbols of at least `min_size` bytes in the data, bss and read-only data sections; none
/// for the preloaded runtime itself, whose statics are not the program's.
pub fn static_objects(module: &Path, min_size: u64) -> std::io::Result<Vec<StaticSymbol>> {
    let bytes = map_file(module)?;
    let file = object::File::parse(&*bytes)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string()))?;
    let mut found = Vec::new();
    if file.section_by_name(RUNTIME_MARKER_SECTION).is_some() {
        return Ok(found);
    }
    let symbols = file.symbols().chain(file.dynamic_symbols());
    for symbol in symbols {
        if symbol.kind() != SymbolKind::Data || symbol.size() < min_size || symbol.is_undefined() {
            continue;
        }
        let Some(section) = symbol
            .section_index()
            .and_then(|i| file.section_by_index(i).ok())
        else {
            continue;
        };
        let section = section.name().unwrap_or("").to_string();
        if !is_data_section(&section) {
            continue;
        }
        let Ok(name) = symbol.name() else { continue };
        found.push(StaticSymbol {
            name: demangle(name),
            svma: symbol.address(),
            size: symbol.size(),
            section,
        });
    }
    // The same symbol appears in .symtab and .dynsym; keep one.
    found.sort_by(|a, b| (a.svma, &a.name).cmp(&(b.svma, &b.name)));
    found.dedup_by(|a, b| a.svma == b.svma && a.size == b.size);
    Ok(found)
}

fn is_data_section(name: &str) -> bool {
    [".data", ".bss", ".rodata", ".data.rel.ro"]
        .iter()
        .any(|s| name == *s || name.starts_with(&format!("{s}.")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_statics_and_locations_in_a_compiled_program() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("s.c");
        std::fs::write(
            &src,
            "double grid[100000];\nint table[5000] = {1};\nconst char names[8192] = \"x\";\n\
             int small;\nint main(void) { grid[1] = table[0] + names[0] + small; return 0; }\n",
        )
        .unwrap();
        let exe = dir.path().join("s");
        let ok = std::process::Command::new("gcc")
            .args(["-g", "-O0", "-o"])
            .arg(&exe)
            .arg(&src)
            .status()
            .unwrap()
            .success();
        assert!(ok);
        let statics = static_objects(&exe, 4096).unwrap();
        let find = |n: &str| {
            statics
                .iter()
                .find(|s| s.name == n)
                .unwrap_or_else(|| panic!("{n}: {statics:?}"))
        };
        assert_eq!(find("grid").size, 800_000);
        assert_eq!(find("grid").section, ".bss");
        assert_eq!(find("table").section, ".data");
        assert!(find("names").section.starts_with(".rodata"));
        assert!(!statics.iter().any(|s| s.name == "small"));

        let bytes = std::fs::read(&exe).unwrap();
        let file = object::File::parse(&*bytes).unwrap();
        let main = file
            .symbols()
            .find(|s| s.name() == Ok("main"))
            .unwrap()
            .address();
        let location = Symbolizer::new().locate(&exe, main + 4);
        assert_eq!(location.function.as_deref(), Some("main"));
        assert!(location.file.unwrap().ends_with("s.c"));
        assert_eq!(location.line, Some(5));
    }
}
