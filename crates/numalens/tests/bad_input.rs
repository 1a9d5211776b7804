//! Bad input as a user gives it: each gets a message that says what is wrong and what to do,
//! with exit status 2 when the command line must change, and nothing of the user's is
//! overwritten.

mod common;
#[path = "support/synthetic.rs"]
mod synthetic;

use common::{numalens, text};
use std::path::Path;
use synthetic::synthetic_profile;

fn arg(path: &Path) -> &str {
    path.to_str().unwrap()
}

#[test]
fn report_html_never_overwrites_what_is_not_an_earlier_report() {
    let dir = tempfile::tempdir().unwrap();
    let profile = synthetic_profile(dir.path(), 2000);
    let meta = profile.join("meta.json");
    let meta_before = std::fs::read(&meta).unwrap();
    let source = dir.path().join("main.c");
    std::fs::write(&source, "int main(void) { return 0; }\n").unwrap();

    for (target, kept) in [(&meta, None), (&source, Some("int main"))] {
        let out = numalens(&["report", arg(&profile), "--html", arg(target)]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
        let err = text(&out.stderr);
        assert!(err.contains(arg(target)) && err.contains("--html"), "{err}");
        assert!(out.stdout.is_empty(), "refused before any work");
        if let Some(kept) = kept {
            assert!(std::fs::read_to_string(target).unwrap().starts_with(kept));
        }
    }
    assert_eq!(std::fs::read(&meta).unwrap(), meta_before);

    // Not even a new file inside the profile directory, nor in a directory below it.
    for inside in [profile.join("report.html"), profile.join(".events/r.html")] {
        let out = numalens(&["report", arg(&profile), "--html", arg(&inside)]);
        assert_eq!(out.status.code(), Some(2));
        let err = text(&out.stderr);
        assert!(err.contains("inside the profile directory"), "{err}");
        assert!(!inside.exists());
    }
    let out = numalens(&["report", arg(&profile), "--html", arg(dir.path())]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("is a directory"));

    // A new file, then the same file again: an earlier report is replaced.
    let page = dir.path().join("r.html");
    for _ in 0..2 {
        let out = numalens(&["report", arg(&profile), "--html", arg(&page)]);
        assert!(out.status.success(), "{}", text(&out.stderr));
    }
    assert!(std::fs::read_to_string(&page).unwrap().contains("numalens"));
}
