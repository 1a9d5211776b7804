//! Offline symbolisation: function, file and line of an address in a module, and the static data
//! objects of a module's symbol table. Runs in the recorder, never in the profiled program.

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use addr2line::gimli;
use object::{Object, ObjectSection, ObjectSymbol, SymbolKind};

/// Where an address is in the source.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SourceLocation {
    pub function: Option<String>,
    pub file: Option<String>,
    pub line: Option<u32>,
}

/// Where the files of the modules a recording names are read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ModuleFiles {
    /// At the paths the recording names: on the machine that ran the program.
    #[default]
    AsRecorded,
    /// Under this directory (`/usr/lib/x.so` is `DIR/usr/lib/x.so`): a copy of another
    /// machine's files, or an empty directory for a profile without names.
    Under(PathBuf),
}

impl ModuleFiles {
    /// The file to read `module`'s symbols and DWARF from: its separate debug file when the
    /// module has no debug information and one is installed (under the same root), else the
    /// module's file. The system's shared libraries are read as they are: their debug files
    /// (the C library's, the C++ library's) hold megabytes of compressed DWARF that would be
    /// inflated at every recording for frames and statics that are rarely the program's.
    pub fn symbols_file(&self, module: &Path) -> PathBuf {
        let system_library = ["/lib/", "/lib64/", "/usr/lib/", "/usr/lib64/"]
            .iter()
            .any(|dir| module.starts_with(dir))
            && module.to_string_lossy().contains(".so");
        if system_library {
            return self.file(module).into_owned();
        }
        let root = self.file(Path::new(crate::debug_files::DEBUG_ROOT));
        crate::debug_files::symbols_file(&self.file(module), &root)
    }

    /// The file of `module`.
    pub fn file<'a>(&self, module: &'a Path) -> Cow<'a, Path> {
        match self {
            ModuleFiles::AsRecorded => Cow::Borrowed(module),
            ModuleFiles::Under(root) => {
                Cow::Owned(root.join(module.strip_prefix("/").unwrap_or(module)))
            }
        }
    }
}

/// Symbolises addresses given as (module path, address in the module's own address space).
/// Loaders are opened once per module and kept; a module that cannot be read yields empty
/// locations rather than an error, since a profile is still useful without names.
#[derive(Default)]
pub struct Symbolizer {
    files: ModuleFiles,
    loaders: HashMap<PathBuf, Option<addr2line::Loader>>,
    /// Definitions of each module's statics, read on the first question about the module.
    definitions: HashMap<PathBuf, HashMap<u64, Definition>>,
}

impl Symbolizer {
    pub fn new() -> Self {
        Self::default()
    }

    /// A symboliser that reads the modules' files where `files` says.
    pub fn with_files(files: ModuleFiles) -> Self {
        Symbolizer {
            files,
            ..Self::default()
        }
    }

    pub fn files(&self) -> &ModuleFiles {
        &self.files
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
            .or_insert_with(|| addr2line::Loader::new(self.files.symbols_file(module)).ok());
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

    /// Where the variable at `svma` (the address its symbol gives) is defined, when the module's
    /// debug information has it.
    pub fn definition(&mut self, module: &Path, svma: u64) -> Option<&Definition> {
        self.definitions
            .entry(module.to_path_buf())
            .or_insert_with(|| {
                static_definitions(&self.files.symbols_file(module)).unwrap_or_default()
            })
            .get(&svma)
    }
}

/// The source file and line that define a variable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Definition {
    pub file: String,
    pub line: u32,
}

/// Definitions of the variables with a fixed address in `module`, by that address: the
/// `DW_TAG_variable` entries whose location is an address, with the file and line they declare
/// (a C++ class or namespace member defined apart from its declaration has them on the
/// declaration its definition names). Empty without debug information.
pub fn static_definitions(module: &Path) -> Result<HashMap<u64, Definition>, gimli::Error> {
    let Ok(bytes) = map_file(module) else {
        return Ok(HashMap::new());
    };
    let Ok(file) = object::File::parse(&*bytes) else {
        return Ok(HashMap::new());
    };
    let endian = if file.is_little_endian() {
        gimli::RunTimeEndian::Little
    } else {
        gimli::RunTimeEndian::Big
    };
    // Compressed sections (`-gz`) are inflated; the others are borrowed from the mapping.
    let sections = gimli::DwarfSections::load(|id| -> Result<Cow<[u8]>, gimli::Error> {
        Ok(file
            .section_by_name(id.name())
            .and_then(|s| s.uncompressed_data().ok())
            .unwrap_or(Cow::Borrowed(&[])))
    })?;
    let dwarf = sections.borrow(|s| gimli::EndianSlice::new(s, endian));
    let mut found = HashMap::new();
    let mut units = dwarf.units();
    while let Some(header) = units.next()? {
        let unit = dwarf.unit(header)?;
        let mut entries = unit.entries();
        while let Some(entry) = entries.next_dfs()? {
            if entry.tag() != gimli::DW_TAG_variable {
                continue;
            }
            let Some(address) = fixed_address(&dwarf, &unit, entry) else {
                continue;
            };
            if let Some(definition) = declared_at(&dwarf, &unit, entry) {
                found.entry(address).or_insert(definition);
            }
        }
    }
    Ok(found)
}

type Slice<'a> = gimli::EndianSlice<'a, gimli::RunTimeEndian>;

/// The address of a variable whose location is one (`DW_OP_addr`, or `DW_OP_addrx` into
/// `.debug_addr`); none for locals on the stack, thread-locals and declarations.
fn fixed_address(
    dwarf: &gimli::Dwarf<Slice>,
    unit: &gimli::Unit<Slice>,
    entry: &gimli::DebuggingInformationEntry<Slice>,
) -> Option<u64> {
    let gimli::AttributeValue::Exprloc(expression) = entry.attr_value(gimli::DW_AT_location)?
    else {
        return None;
    };
    let mut operations = expression.operations(unit.encoding());
    let address = match operations.next().ok()?? {
        gimli::Operation::Address { address } => address,
        gimli::Operation::AddressIndex { index } => dwarf.address(unit, index).ok()?,
        _ => return None,
    };
    // More operations compute something from the address (a thread-local's offset, a value):
    // the variable is not at it.
    operations.next().ok()?.is_none().then_some(address)
}

/// `DW_AT_decl_file` and `DW_AT_decl_line` of `entry`; either one it lacks is that of the
/// declaration it completes (a C++ member defined outside its class states the line of the
/// definition but not the file when that is the declaration's).
fn declared_at(
    dwarf: &gimli::Dwarf<Slice>,
    unit: &gimli::Unit<Slice>,
    entry: &gimli::DebuggingInformationEntry<Slice>,
) -> Option<Definition> {
    // One step only: a declaration names no other.
    let declaration = [gimli::DW_AT_specification, gimli::DW_AT_abstract_origin]
        .into_iter()
        .find_map(|link| match entry.attr_value(link)? {
            gimli::AttributeValue::UnitRef(offset) => unit.entry(offset).ok(),
            _ => None,
        });
    let attr = |name| {
        entry
            .attr_value(name)
            .or_else(|| declaration.as_ref()?.attr_value(name))
    };
    let gimli::AttributeValue::FileIndex(file) = attr(gimli::DW_AT_decl_file)? else {
        return None;
    };
    let line = attr(gimli::DW_AT_decl_line)?.udata_value()?;
    Some(Definition {
        file: source_file(dwarf, unit, file)?,
        line: u32::try_from(line).ok()?,
    })
}

/// The path of file `index` of the unit's line table, made absolute with its directory and the
/// unit's compilation directory as far as they allow, as call sites' files are.
fn source_file(
    dwarf: &gimli::Dwarf<Slice>,
    unit: &gimli::Unit<Slice>,
    index: u64,
) -> Option<String> {
    let header = unit.line_program.as_ref()?.header();
    let entry = header.file(index)?;
    let text = |value| {
        dwarf
            .attr_string(unit, value)
            .ok()
            .map(|s| s.to_string_lossy().into_owned())
    };
    let mut path = PathBuf::new();
    if let Some(dir) = unit.comp_dir {
        path.push(dir.to_string_lossy().as_ref());
    }
    if let Some(dir) = entry.directory(header).and_then(text) {
        path.push(dir);
    }
    path.push(text(entry.path_name())?);
    Some(path.to_string_lossy().into_owned())
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
    fn module_files_under_a_directory_keep_the_recorded_path_below_it() {
        let module = Path::new("/usr/lib/libc.so.6");
        assert_eq!(ModuleFiles::AsRecorded.file(module), module);
        let under = ModuleFiles::Under(PathBuf::from("/copies"));
        assert_eq!(under.file(module), Path::new("/copies/usr/lib/libc.so.6"));
        // A relative path is taken below the directory too.
        assert_eq!(under.file(Path::new("a.out")), Path::new("/copies/a.out"));
        // Absent files give empty answers, not errors.
        let mut symbols = Symbolizer::with_files(ModuleFiles::Under(PathBuf::from("/nowhere")));
        assert_eq!(symbols.locate(module, 0x1000), SourceLocation::default());
        assert!(symbols.definition(module, 0x1000).is_none());
    }

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

    /// Compiles `source` (named `name`) with `compiler -g` into the directory, returns the
    /// executable.
    fn compile(dir: &Path, compiler: &str, name: &str, source: &str, flags: &[&str]) -> PathBuf {
        let src = dir.join(name);
        std::fs::write(&src, source).unwrap();
        let exe = dir.join(format!("{name}.out"));
        let out = std::process::Command::new(compiler)
            .args(["-g", "-O1"])
            .args(flags)
            .arg("-o")
            .arg(&exe)
            .arg(&src)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        exe
    }

    fn definition_of(exe: &Path, name: &str) -> (StaticSymbol, Definition) {
        let statics = static_objects(exe, 4096).unwrap();
        let symbol = statics
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("{name}: {statics:?}"))
            .clone();
        let definition = Symbolizer::new()
            .definition(exe, symbol.svma)
            .unwrap_or_else(|| panic!("{name} has no definition"))
            .clone();
        (symbol, definition)
    }

    #[test]
    fn c_statics_keep_their_names_and_say_where_they_are_defined() {
        let dir = tempfile::tempdir().unwrap();
        // `a`, `b`, `c`, `d` spell signed char, bool, char and double in the Itanium mangling.
        let source = [
            "#define N 100000",
            "double a[N];",
            "double b[N] = {1};",
            "static double c[N];",
            "double d[N];",
            "double *use(int i) {",
            "  static double local[N];",
            "  local[i] = c[i];",
            "  c[i] = d[i];",
            "  return i ? local : c;",
            "}",
            "int main(int n, char **v) { a[n] = b[n] + *use(n); return 0; }",
        ]
        .join("\n");
        // Clang's DWARF 5 gives addresses as indices into `.debug_addr`.
        let builds = [
            ("gcc", &[][..], "local.0"),
            ("gcc", &["-gdwarf-4"][..], "local.0"),
            ("clang", &[][..], "use.local"),
        ];
        for (compiler, flags, local) in builds {
            let label = format!("{compiler} {flags:?}");
            let exe = compile(dir.path(), compiler, "grid.c", &source, flags);
            // A function's static is `local.0` in GCC's symbol table, `use.local` in Clang's.
            for (name, line) in [("a", 2), ("b", 3), ("c", 4), ("d", 5), (local, 7)] {
                let (symbol, definition) = definition_of(&exe, name);
                assert_eq!(symbol.size, 800_000, "{label} {name}");
                assert!(
                    definition.file.starts_with('/') && definition.file.ends_with("/grid.c"),
                    "{label} {name}: {definition:?}"
                );
                assert_eq!(definition.line, line, "{label} {name}");
            }
        }
    }

    #[test]
    fn cxx_statics_are_demangled_and_defined_where_their_declaration_is() {
        let dir = tempfile::tempdir().unwrap();
        let source = [
            "namespace solver {",
            "",
            "int scratch[100000];",
            "",
            "double field[100000];",
            "struct Grid {",
            "  static double cells[100000];",
            "};",
            "}",
            "double solver::Grid::cells[100000];",
            "int main(int n, char **) {",
            "  solver::scratch[n + 1] = n;",
            "  solver::field[n] = solver::scratch[n] + solver::Grid::cells[n];",
            "  return 0;",
            "}",
        ]
        .join("\n");
        let exe = compile(dir.path(), "g++", "solver.cc", &source, &[]);
        for (name, line) in [
            ("solver::scratch", 3),
            ("solver::field", 5),
            ("solver::Grid::cells", 10),
        ] {
            let (_, definition) = definition_of(&exe, name);
            assert!(
                definition.file.ends_with("/solver.cc"),
                "{name}: {definition:?}"
            );
            assert_eq!(definition.line, line, "{name}");
        }
    }
}
