//! Static objects of the program by name: the symbol's address and size from its ELF symbol
//! table, which a plan's `symbol` rules are applied to before `main`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use object::{Object, ObjectSymbol, SymbolKind};

/// The program's data symbols.
#[derive(Debug, Default)]
pub struct Symbols {
    program: PathBuf,
    data: HashMap<String, (u64, u64)>,
}

impl Symbols {
    /// Reads `program`'s symbols; an unreadable file has none (its static rules are then
    /// reported as not found).
    pub fn read(program: &Path) -> Symbols {
        let mut data = HashMap::new();
        if let Ok(bytes) = std::fs::read(program)
            && let Ok(file) = object::File::parse(&*bytes)
        {
            for s in file.symbols().chain(file.dynamic_symbols()) {
                if s.kind() == SymbolKind::Data
                    && s.size() > 0
                    && let Ok(name) = s.name()
                {
                    data.entry(name.to_string())
                        .or_insert((s.address(), s.size()));
                }
            }
        }
        Symbols {
            program: program.to_path_buf(),
            data,
        }
    }

    /// Address (relative to the load bias) and size of the static object `name`.
    pub fn find(&self, name: &str) -> Option<(u64, u64)> {
        self.data.get(name).copied()
    }

    /// Whether a plan's `module` names this program (by path or file name).
    pub fn is_program(&self, module: &str) -> bool {
        let name = |p: &Path| p.file_name().map(|n| n.to_owned());
        let module = Path::new(module);
        module == self.program || (name(module).is_some() && name(module) == name(&self.program))
    }
}
