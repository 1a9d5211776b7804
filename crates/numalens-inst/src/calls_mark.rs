//! The mark of a program whose hooks stayed calls.
//!
//! Without gcc's plugin headers (or with clang without full LTO) the hooks are one call per
//! access, about twice as slow, and the wrapper said so once, inside a build's output where
//! nobody looks. So a link whose hooks are calls adds a tiny object holding the reason in a
//! section of its own; `record` reads it back and says it where the user looks (at record time
//! and in the report's header), with what to install.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

use numalens_preload::runtime::content_hash;
use object::{Object, ObjectSection};

/// The section holding the reasons, one NUL-terminated text per marked link.
pub const SECTION: &str = "numalens_inst_calls";

/// An object file with `why` in [`SECTION`], assembled once per compiler and reason in
/// `lib_dir`; `None` when the compiler cannot assemble it (the program then goes unmarked:
/// the mark is a courtesy, never a reason to fail a build).
pub fn marker_object(compiler: &OsStr, lib_dir: &Path, why: &str) -> Option<PathBuf> {
    // Retained first (SHF_GNU_RETAIN, binutils 2.36 and later), so that `-Wl,--gc-sections`
    // keeps it; plainly allocated with an assembler that does not know the flag.
    ["aR", "a"]
        .into_iter()
        .find_map(|flags| assembled(compiler, lib_dir, &assembly(why, flags)))
}

/// The object of `source` in `lib_dir`, assembled with `compiler` once; `None` when it cannot be.
fn assembled(compiler: &OsStr, lib_dir: &Path, source: &str) -> Option<PathBuf> {
    let mut identity = compiler.as_encoded_bytes().to_vec();
    identity.extend_from_slice(source.as_bytes());
    let id = content_hash(&identity);
    let object = lib_dir.join(format!("calls-{id}.o"));
    if object.exists() {
        return Some(object);
    }
    let stem = lib_dir.join(format!(".calls-{id}-{}", std::process::id()));
    let (file, built) = (stem.with_extension("s"), stem.with_extension("o"));
    std::fs::write(&file, source).ok()?;
    let ok = Command::new(compiler)
        .args(["-c", "-x", "assembler"])
        .arg(&file)
        .arg("-o")
        .arg(&built)
        .output()
        .is_ok_and(|o| o.status.success());
    let _ = std::fs::remove_file(&file);
    // A concurrent wrapper (`make -j`) may have renamed its own first: just as good.
    let placed = ok && std::fs::rename(&built, &object).is_ok();
    let _ = std::fs::remove_file(&built);
    placed.then_some(object)
}

/// `why` as bytes of an allocated section, so that it stays in the linked program (and in a
/// stripped one); bytes rather than a string directive, so no character needs escaping.
fn assembly(why: &str, flags: &str) -> String {
    let bytes: Vec<String> = why
        .bytes()
        .chain(std::iter::once(0))
        .map(|b| b.to_string())
        .collect();
    // The empty GNU-stack note keeps the linker from making the program's stack executable.
    format!(
        "\t.section {SECTION},\"{flags}\",@progbits\n\t.byte {}\n\t.section .note.GNU-stack,\"\",@progbits\n",
        bytes.join(",")
    )
}

/// The distinct reasons a program's links recorded for calls instead of inlined hooks.
pub fn reasons(file: &object::File<'_>) -> Vec<String> {
    let Some(data) = file.section_by_name(SECTION).and_then(|s| s.data().ok()) else {
        return Vec::new();
    };
    let mut out: Vec<String> = Vec::new();
    for text in data.split(|b| *b == 0).filter(|t| !t.is_empty()) {
        let text = String::from_utf8_lossy(text).into_owned();
        if !out.contains(&text) {
            out.push(text);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reason_survives_assembly_linking_and_reading_back() {
        let dir = tempfile::tempdir().unwrap();
        let why = "gcc's plugin headers are not installed (\"quoted\", \\ and é)";
        let object = marker_object(OsStr::new("cc"), dir.path(), why).expect("cc assembles");
        assert_eq!(
            marker_object(OsStr::new("cc"), dir.path(), why),
            Some(object.clone())
        );
        let source = dir.path().join("main.c");
        std::fs::write(&source, "int main(void) { return 0; }\n").unwrap();
        let exe = dir.path().join("main");
        let linked = Command::new("cc")
            .arg(&source)
            .arg(&object)
            .arg(&object)
            .arg("-Wl,--gc-sections")
            .arg("-o")
            .arg(&exe)
            .status()
            .unwrap();
        assert!(linked.success());
        let bytes = std::fs::read(&exe).unwrap();
        let file = object::File::parse(&*bytes).unwrap();
        // Linked twice (two marked links of one program), said once; kept by --gc-sections.
        assert_eq!(reasons(&file), vec![why.to_string()]);
    }
}
