//! Bad input as a user gives it (to `record`, `report`, `topology`) and damaged profiles: each
//! gets a message that says what is wrong and what to do, with exit status 2 when the command
//! line must change; nothing of the user's is overwritten, and a report shows what it can.

mod common;
#[path = "support/synthetic.rs"]
mod synthetic;

use common::{numalens, text};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
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

/// Records a small real run (a shell reading 3 MB) into `DIR/NAME`, with extra arguments for the
/// shell after its script.
fn record_shell(dir: &Path, name: &str, extra: &[&str]) -> PathBuf {
    let profile = dir.join(name);
    let mut args = vec!["record", "-o", arg(&profile), "sh", "-c"];
    args.push("head -c 3000000 /dev/zero | wc -c >/dev/null");
    args.extend(extra);
    let out = numalens(&args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    profile
}

fn meta(profile: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(profile.join("meta.json")).unwrap()).unwrap()
}

fn truncate_to_half(file: &Path) {
    let bytes = std::fs::read(file).unwrap();
    std::fs::write(file, &bytes[..bytes.len() / 2]).unwrap();
}

/// `numalens ARGS…` as the unprivileged user `nobody` (root reads whatever it likes).
fn numalens_as_nobody(args: &[&str]) -> Output {
    Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_numalens"))
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("run setpriv (util-linux)")
}

#[test]
fn an_unreadable_profile_says_permission_denied_once_not_no_meta_json() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let mode = |path: &Path, mode| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap()
    };
    mode(dir.path(), 0o755);
    let profile = synthetic_profile(dir.path(), 2000);
    // A directory nobody may not search, then a meta.json nobody may not read.
    for (dir_mode, meta_mode) in [(0o700, 0o644), (0o711, 0o600)] {
        mode(&profile, dir_mode);
        mode(&profile.join("meta.json"), meta_mode);
        let out = numalens_as_nobody(&["report", arg(&profile)]);
        assert_eq!(out.status.code(), Some(1));
        let err = text(&out.stderr);
        assert!(!err.contains("no meta.json"), "{err}");
        assert!(err.contains(arg(&profile.join("meta.json"))), "{err}");
        assert_eq!(err.matches("Permission denied").count(), 1, "{err}");
    }
}

#[test]
fn a_damaged_side_table_costs_the_report_only_what_it_adds() {
    let dir = tempfile::tempdir().unwrap();
    let profile = record_shell(dir.path(), "s.numalens", &[]);
    assert_eq!(meta(&profile)["completeness"]["complete"], true);
    let whole: Value =
        serde_json::from_slice(&numalens(&["report", "--json", arg(&profile)]).stdout).unwrap();
    let tables = ["code_locations", "page_nodes", "sites"];
    for table in tables {
        truncate_to_half(&profile.join(format!("{table}.parquet")));
    }
    let out = numalens(&["report", arg(&profile)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report = text(&out.stdout);
    let head: Vec<&str> = report.lines().take(10).collect();
    for table in tables {
        let line = head
            .iter()
            .find(|l| l.contains(&format!("{table}.parquet")))
            .unwrap_or_else(|| panic!("{table} not in the first lines:\n{report}"));
        assert!(
            line.contains("unreadable") && line.contains("truncated"),
            "{line}"
        );
    }
    let json: Value =
        serde_json::from_slice(&numalens(&["report", "--json", arg(&profile)]).stdout).unwrap();
    let unreadable = json["profile"]["unreadable_tables"].as_array().unwrap();
    let named: Vec<&str> = unreadable
        .iter()
        .map(|t| t["table"].as_str().unwrap())
        .collect();
    assert_eq!(named.len(), 3, "{unreadable:#?}");
    assert!(tables.iter().all(|t| named.contains(t)), "{named:?}");
    // The accesses are all still there.
    assert_eq!(json["totals"]["samples"], whole["totals"]["samples"]);
    assert_eq!(
        json["objects"].as_array().unwrap().len(),
        whole["objects"].as_array().unwrap().len()
    );
}

#[test]
fn control_characters_from_the_program_reach_the_terminal_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let hostile = "\u{1b}]0;owned\u{7}\u{1b}[2J\rnext\u{202e}";
    let profile = record_shell(dir.path(), "c.numalens", &["name", hostile]);
    let out = numalens(&["report", arg(&profile)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report = text(&out.stdout);
    assert!(
        !report.contains('\u{1b}') && !report.contains('\r'),
        "{report:?}"
    );
    assert!(
        !report.contains('\u{202e}') && !report.contains('\u{7}'),
        "{report:?}"
    );
    let command = report.lines().find(|l| l.contains("command")).unwrap();
    assert!(
        command.contains(r"\x1b]0;owned\x07\x1b[2J\rnext\u{202e}"),
        "{command}"
    );
    // The JSON is the model as recorded: JSON escapes it by itself.
    let json: Value =
        serde_json::from_slice(&numalens(&["report", "--json", arg(&profile)]).stdout).unwrap();
    assert_eq!(
        json["profile"]["command"]
            .as_array()
            .unwrap()
            .last()
            .unwrap(),
        hostile
    );
}

#[test]
fn top_zero_lists_no_object_without_claiming_there_are_none() {
    let dir = tempfile::tempdir().unwrap();
    let profile = synthetic_profile(dir.path(), 2000);
    let out = numalens(&["report", "--top", "0", arg(&profile)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report = text(&out.stdout);
    assert!(!report.contains("no object has samples"), "{report}");
    assert!(report.contains("none listed (--top 0)"), "{report}");
}

#[test]
fn an_empty_preset_name_suggests_nothing() {
    let out = numalens(&["topology", "--preset", ""]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(!err.contains("did you mean"), "{err}");
    assert!(err.contains("machine-a"), "{err}");
}

#[test]
fn record_usage_errors_say_what_to_change_and_leave_no_profile() {
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("u.numalens");
    let o = arg(&profile);
    let cases: [(&[&str], &str); 4] = [
        (&["--inst-mode", "exact"], "--backend inst"),
        (&["--sample-every", "64"], "--backend inst"),
        (
            &[
                "--backend",
                "faults",
                "--inst-mode",
                "sampled",
                "--sample-every",
                "8",
            ],
            "leave them out",
        ),
        (&["--runtime", "/bin/true"], "not a numalens runtime"),
    ];
    for (options, says) in cases {
        let mut args = vec!["record", "-o", o];
        args.extend(options);
        args.push("true");
        let out = numalens(&args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{options:?}: {err}");
        assert!(err.contains(says), "{options:?}: {err}");
        assert!(!profile.exists(), "{options:?}");
    }
}

#[test]
fn record_min_object_takes_the_runtime_s_suffixes() {
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("k.numalens");
    let out = numalens(&["record", "--min-object", "1k", "-o", arg(&profile), "true"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(meta(&profile)["backend"]["settings"]["min_object"], 1024);
    let out = numalens(&[
        "record",
        "--min-object",
        "1kb",
        "-o",
        arg(&dir.path().join("x")),
        "true",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("64k"), "{}", text(&out.stderr));
}

#[test]
fn record_onto_an_existing_profile_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("e.numalens");
    std::fs::create_dir(&profile).unwrap();
    let out = numalens(&["record", "-o", arg(&profile), "true"]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("already exists") && err.contains("-o"),
        "{err}"
    );
}

#[test]
fn record_of_a_directory_says_it_is_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("d.numalens");
    let out = numalens(&["record", "-o", arg(&profile), arg(dir.path())]);
    assert_eq!(out.status.code(), Some(126));
    let err = text(&out.stderr);
    assert!(
        err.contains("is a directory") && !err.contains("executable?"),
        "{err}"
    );
    assert!(!profile.exists());
}

#[test]
fn inst_on_a_wrapper_script_names_the_real_program() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    // libtool's layout: `prog` is a shell script, the program is `.libs/prog`.
    let script = dir.path().join("prog");
    std::fs::write(
        &script,
        "#! /bin/sh\nexec \"$(dirname \"$0\")/.libs/prog\" \"$@\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::create_dir(dir.path().join(".libs")).unwrap();
    std::fs::copy("/bin/true", dir.path().join(".libs/prog")).unwrap();
    let profile = dir.path().join("i.numalens");
    let out = numalens(&[
        "record",
        "--backend",
        "inst",
        "-o",
        arg(&profile),
        arg(&script),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("is a script (#!/bin/sh)") || err.contains("is a script (#! /bin/sh)"),
        "{err}"
    );
    assert!(err.contains(arg(&dir.path().join(".libs/prog"))), "{err}");
    assert!(!err.contains("magic"), "{err}");
    assert!(!profile.exists());
}

#[test]
fn export_never_writes_into_a_profile_directory() {
    let dir = tempfile::tempdir().unwrap();
    let profile = synthetic_profile(dir.path(), 2000);
    for inside in [profile.clone(), profile.join("tables")] {
        let out = numalens(&[
            "export",
            arg(&profile),
            "--format",
            "json",
            "-o",
            arg(&inside),
        ]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
        assert!(text(&out.stderr).contains("inside the profile directory"));
        assert!(!profile.join("objects.json").exists() && !inside.join("objects.json").exists());
    }
}

#[test]
fn empty_and_out_of_range_arguments_are_usage_errors_not_panics() {
    let dir = tempfile::tempdir().unwrap();
    let profile = synthetic_profile(dir.path(), 2000);
    let cases: [(&[&str], &str); 4] = [
        (
            &["record", "--page-scan-interval", "1e300s", "true"],
            "too long",
        ),
        (
            &["record", "--ring-pages", "1099511627776", "true"],
            "262144 allowed",
        ),
        (&["record", ""], "empty name"),
        (
            &["report", "--object", "", arg(&profile)],
            "--object needs a name",
        ),
    ];
    for (args, says) in cases {
        let out = numalens(args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(says) && !err.contains("panicked"),
            "{args:?}: {err}"
        );
    }
}
