//! The separate debug file of a stripped module, as distributions install them (`-dbgsym`,
//! `-debuginfo` packages) and as `objcopy --only-keep-debug` + `--add-gnu-debuglink` makes
//! them: found by the module's build id under `/usr/lib/debug/.build-id/`, or by the name its
//! `.gnu_debuglink` section gives, next to the module, in its `.debug/` directory, or under
//! `/usr/lib/debug/` at the module's directory. The debug file has the symbol table and DWARF
//! the module lost, at the same addresses.

use std::path::{Path, PathBuf};

use object::Object;

/// Where debug files are installed.
pub const DEBUG_ROOT: &str = "/usr/lib/debug";

/// The file to read symbols and DWARF from for `module`: the module itself when it has debug
/// information, else its debug file when one is installed under `debug_root`, else the module
/// (its own symbol tables, if any).
pub fn symbols_file(module: &Path, debug_root: &Path) -> PathBuf {
    debug_file(module, debug_root).unwrap_or_else(|| module.to_path_buf())
}

/// `module`'s separate debug file, looked up under `debug_root`, when the module has no debug
/// information of its own.
pub fn debug_file(module: &Path, debug_root: &Path) -> Option<PathBuf> {
    let bytes = crate::symbols::map_file(module).ok()?;
    let file = object::File::parse(&*bytes).ok()?;
    if file.section_by_name(".debug_info").is_some() {
        return None;
    }
    let build_id = file.build_id().ok().flatten();
    let by_id = build_id.and_then(|id| {
        let (first, rest) = id.split_first()?;
        let hex: String = rest.iter().map(|b| format!("{b:02x}")).collect();
        let path = debug_root
            .join(".build-id")
            .join(format!("{first:02x}"))
            .join(format!("{hex}.debug"));
        Some((path, Match::BuildId(id.to_vec())))
    });
    let dir = module.parent().unwrap_or(Path::new("/"));
    let by_link = file.gnu_debuglink().ok().flatten().map(|(name, crc)| {
        let name = Path::new(std::str::from_utf8(name).unwrap_or_default()).to_path_buf();
        let under_root = debug_root.join(dir.strip_prefix("/").unwrap_or(dir));
        [
            dir.join(&name),
            dir.join(".debug").join(&name),
            under_root.join(&name),
        ]
        .map(|p| (p, Match::Crc(crc)))
    });
    by_id
        .into_iter()
        .chain(by_link.into_iter().flatten())
        // A debuglink naming the module itself (an empty name) is no debug file.
        .find(|(p, m)| p.as_path() != module && is_debug_file_of(p, m))
        .map(|(p, _)| p)
}

/// How a debug file is known to be the module's: the same build id, or the CRC-32 of its bytes
/// that the module's debuglink records (a debug file left from another build is not used).
enum Match {
    BuildId(Vec<u8>),
    Crc(u32),
}

/// A file that has what a stripped module lacks, and is that module's.
fn is_debug_file_of(path: &Path, wanted: &Match) -> bool {
    let Ok(bytes) = crate::symbols::map_file(path) else {
        return false;
    };
    let Ok(f) = object::File::parse(&*bytes) else {
        return false;
    };
    let has_debug =
        f.section_by_name(".symtab").is_some() || f.section_by_name(".debug_info").is_some();
    has_debug
        && match wanted {
            Match::BuildId(id) => f.build_id().ok().flatten() == Some(id.as_slice()),
            Match::Crc(crc) => crc32fast::hash(&bytes) == *crc,
        }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn run(cmd: &mut Command) {
        let out = cmd
            .output()
            .expect("the toolchain's binutils are installed");
        assert!(
            out.status.success(),
            "{cmd:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// A program built with `-g`, its debug information moved into `prog.debug` beside it
    /// and linked from the stripped program, as packagers do.
    fn stripped_with_debuglink(dir: &Path) -> PathBuf {
        let src = dir.join("prog.c");
        std::fs::write(
            &src,
            "static char table[8192];\nint main(void) { return table[1]; }\n",
        )
        .unwrap();
        let prog = dir.join("prog");
        run(Command::new("cc")
            .args(["-g", "-O0", "-o"])
            .arg(&prog)
            .arg(&src));
        let debug = dir.join("prog.debug");
        run(Command::new("objcopy")
            .arg("--only-keep-debug")
            .arg(&prog)
            .arg(&debug));
        run(Command::new("strip")
            .args(["--strip-debug", "--strip-unneeded"])
            .arg(&prog));
        run(Command::new("objcopy")
            .arg("--add-gnu-debuglink=prog.debug")
            .arg(&prog)
            .current_dir(dir));
        prog
    }

    #[test]
    fn a_stripped_module_is_read_through_its_debuglink() {
        let dir = tempfile::tempdir().unwrap();
        let prog = stripped_with_debuglink(dir.path());
        let none = dir.path().join("no-debug-root");
        assert_eq!(
            debug_file(&prog, &none),
            Some(dir.path().join("prog.debug"))
        );
        // The statics come back with it: the stripped program alone has none.
        assert!(
            crate::symbols::static_objects(&prog, 4096)
                .unwrap()
                .is_empty()
        );
        let statics = crate::symbols::static_objects(&symbols_file(&prog, &none), 4096).unwrap();
        assert!(statics.iter().any(|s| s.name == "table"), "{statics:?}");
        // A debug file of another build (its CRC is not the one recorded) is not used.
        let debug = dir.path().join("prog.debug");
        // A byte appended: still a valid ELF file with its symbols, but not the recorded one.
        let mut bytes = std::fs::read(&debug).unwrap();
        bytes.push(0);
        std::fs::write(&debug, &bytes).unwrap();
        assert!(is_debug_file_of(
            &debug,
            &Match::Crc(crc32fast::hash(&bytes))
        ));
        assert_eq!(debug_file(&prog, &none), None);
        // Without a debug file, the module is read as it is.
        std::fs::remove_file(dir.path().join("prog.debug")).unwrap();
        assert_eq!(debug_file(&prog, &none), None);
        assert_eq!(symbols_file(&prog, &none), prog);
    }

    #[test]
    fn a_stripped_module_is_found_by_build_id_under_the_debug_root() {
        let dir = tempfile::tempdir().unwrap();
        let prog = stripped_with_debuglink(dir.path());
        let root = dir.path().join("debug");
        let bytes = std::fs::read(&prog).unwrap();
        let id = object::File::parse(&*bytes)
            .unwrap()
            .build_id()
            .unwrap()
            .expect("gcc writes a build id");
        let hex: String = id[1..].iter().map(|b| format!("{b:02x}")).collect();
        let at = root.join(".build-id").join(format!("{:02x}", id[0]));
        std::fs::create_dir_all(&at).unwrap();
        std::fs::rename(
            dir.path().join("prog.debug"),
            at.join(format!("{hex}.debug")),
        )
        .unwrap();
        assert_eq!(
            debug_file(&prog, &root),
            Some(at.join(format!("{hex}.debug")))
        );
    }
}
