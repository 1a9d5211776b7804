//! Inlined hooks (docs/INST.md "Inlined hooks"): `numalens cc` over clang inlines them by
//! link-time optimisation, over gcc a gcc plugin writes their fast path into the code. Either way
//! the instrumented code is left with no call to an access hook, the programs compute what they
//! compute natively, their exact counts are their manifests', per object and thread, and sampled
//! accesses name the program's own code. `NUMALENS_INST_INLINE=0` gives back one call per
//! access. A compiler that is not installed fails the tests, naming its package (see
//! `prerequisites`).

mod common;
mod inst_common;
mod prerequisites;

use inst_common::{PRIVATE_BLOCKS_SMALL, STENCIL_SMALL, SmallRun, code_locations, logical_threads};

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::Path;
use std::process::Command;

use numalens_format::{Object, PageStat, Profile, Sample, SampleKind, SiteFrame};
use numalens_workloads::{Workload, build, expected};

/// Whether `compiler`, and for gcc its plugin headers, are installed: a failure naming the
/// package when not, unless skipping is allowed.
fn have(compiler: &str) -> bool {
    let found = Command::new(compiler)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    let remedy = format!("install the `{compiler}` package (tests/install-deps installs it)");
    if !prerequisites::require(found, compiler, &remedy) {
        return false;
    }
    if compiler != "gcc" {
        return true;
    }
    // Without them the plugin cannot be built and gcc's builds keep their calls.
    let gcc = |arg: &str| {
        Command::new("gcc")
            .arg(arg)
            .output()
            .map(|o| common::text(&o.stdout).trim().to_string())
            .unwrap_or_default()
    };
    let headers = Path::new(&gcc("-print-file-name=plugin")).join("include/gcc-plugin.h");
    let major = gcc("-dumpversion");
    let major = major.split('.').next().unwrap_or_default();
    let remedy =
        format!("install the `gcc-{major}-plugin-dev` package (tests/install-deps installs it)");
    prerequisites::require(headers.is_file(), "gcc's plugin headers", &remedy)
}

/// The compilers whose builds inline the hooks.
const COMPILERS: [&str; 2] = ["gcc", "clang"];

/// `numalens cc` over `compiler`, with inlined hooks unless `calls`.
fn wrapper(compiler: &str, calls: bool) -> Vec<OsString> {
    let mut cmd: Vec<OsString> = vec!["env".into(), format!("NUMALENS_CC={compiler}").into()];
    cmd.push(format!("NUMALENS_INST_INLINE={}", if calls { "0" } else { "1" }).into());
    cmd.push(env!("CARGO_BIN_EXE_numalens").into());
    cmd.push("cc".into());
    cmd
}

/// The hooks a compiler's inlined build calls no more: with gcc's plugin, atomics stay calls.
fn inlined_hooks(compiler: &str) -> &'static [&'static str] {
    match compiler {
        "gcc" => &["<__tsan_read", "<__tsan_write"],
        _ => &["<__tsan_read", "<__tsan_write", "<__tsan_atomic"],
    }
}

/// Calls to the `hooks` (name prefixes such as `<__tsan_read`) in the program's code, by function.
fn hook_calls(program: &Path, hooks: &[&str]) -> BTreeMap<String, usize> {
    let out = Command::new("objdump")
        .args(["-d", "--no-show-raw-insn"])
        .arg(program)
        .output()
        .expect("objdump (binutils)");
    assert!(out.status.success(), "{}", common::text(&out.stderr));
    let mut function = String::new();
    let mut calls = BTreeMap::new();
    for line in common::text(&out.stdout).lines() {
        if let Some(name) = line.strip_suffix(">:").and_then(|l| l.split_once(" <")) {
            function = name.1.to_string();
        } else if line.contains("call") && hooks.iter().any(|h| line.contains(h)) {
            *calls.entry(function.clone()).or_insert(0) += 1;
        }
    }
    calls
}

/// Packed SSE/AVX arithmetic and moves in `program`: a vectorised loop has some.
fn packed_instructions(program: &Path) -> usize {
    let out = Command::new("objdump")
        .args(["-d", "--no-show-raw-insn"])
        .arg(program)
        .output()
        .expect("objdump (binutils)");
    common::text(&out.stdout)
        .lines()
        .filter(|l| {
            ["paddq", "paddd", "addpd", "movdqu", "movupd"]
                .iter()
                .any(|op| l.contains(op))
        })
        .count()
}

fn run(program: &Path, args: &[OsString]) -> String {
    let out = Command::new(program).args(args).output().unwrap();
    assert!(out.status.success(), "{}: {out:?}", program.display());
    common::text(&out.stdout).trim().to_string()
}

fn record(mode: &str, program: &Path, args: &[OsString], profile: &Path) -> String {
    let (profile, program) = (profile.to_str().unwrap(), program.to_str().unwrap());
    let mut argv = vec![
        "record",
        "--backend",
        "inst",
        "--inst-mode",
        mode,
        "-o",
        profile,
    ];
    argv.push(program);
    argv.extend(args.iter().map(|a| a.to_str().unwrap()));
    let out = common::numalens(&argv);
    assert!(out.status.success(), "{}", common::text(&out.stderr));
    common::text(&out.stdout).trim().to_string()
}

/// The profile's object ids for each manifest object of `w` (each allocated once, at its marker
/// line).
fn object_ids(w: &Workload, profile: &Profile) -> BTreeMap<String, u64> {
    let objects = profile.read_all::<Object>().unwrap();
    let frames = profile.read_all::<SiteFrame>().unwrap();
    let source = format!("{}.c", w.name);
    let manifest = w.manifest().unwrap();
    manifest
        .objects
        .iter()
        .map(|o| {
            let line = w.marker_line(&o.name).unwrap();
            let sites: Vec<u64> = frames
                .iter()
                .filter(|f| {
                    f.line == Some(line) && f.file.as_deref().is_some_and(|p| p.ends_with(&source))
                })
                .map(|f| f.site_key)
                .collect();
            let found: Vec<&Object> = objects
                .iter()
                .filter(|x| x.site_key.is_some_and(|k| sites.contains(&k)))
                .collect();
            assert_eq!(found.len(), 1, "{}: instances of {}", w.name, o.name);
            (o.name.clone(), found[0].object_id)
        })
        .collect()
}

/// Builds `name` natively (gcc), with inlined hooks and with calls through `compiler`; checks
/// where the hooks are and that the inlined build computes the native result and counts the
/// manifest's reads and writes per object and logical thread.
fn check_inlined(compiler: &str, name: &str, overrides: &[(&str, u64)], dir: &Path) {
    let w = numalens_workloads::find(name).unwrap();
    let manifest = w.manifest().unwrap();
    let native = build(w, &[OsString::from("gcc")], &dir.join("native")).unwrap();
    let inlined = build(w, &wrapper(compiler, false), &dir.join("inlined")).unwrap_or_else(|e| {
        panic!("{e}\n(clang without libomp-dev? tests/install-deps installs it)")
    });
    let calls = build(w, &wrapper(compiler, true), &dir.join("calls")).unwrap();

    // The opt-out build calls the hooks from the parallel regions (clang's `.omp_outlined*`,
    // gcc's `*._omp_fn.N`); the inlined build calls them nowhere, those regions included.
    let hooks = inlined_hooks(compiler);
    let called = hook_calls(&calls, hooks);
    assert!(
        called
            .keys()
            .any(|f| f.starts_with(".omp_outlined") || f.contains("._omp_fn.")),
        "{compiler}, {name}: the build with NUMALENS_INST_INLINE=0 calls no hook from its \
         parallel regions: {called:?}"
    );
    assert_eq!(
        hook_calls(&inlined, hooks),
        BTreeMap::new(),
        "{compiler}, {name}: hook calls left in the inlined build"
    );

    let args = numalens_workloads::args(&manifest, overrides).unwrap();
    let want_output = run(&native, &args);
    assert_eq!(
        run(&inlined, &args),
        want_output,
        "{compiler}, {name}: run on its own"
    );
    let profile_dir = dir.join("exact.numalens");
    assert_eq!(
        record("exact", &inlined, &args, &profile_dir),
        want_output,
        "{compiler}, {name}: recorded"
    );

    let profile = Profile::open(&profile_dir).unwrap();
    let ids = object_ids(w, &profile);
    let logical = logical_threads(&profile);
    let stats = profile.read_all::<PageStat>().unwrap();
    for o in expected(&manifest, overrides).unwrap() {
        let id = ids[&o.name];
        let mut reads = vec![0u64; o.reads.len()];
        let mut writes = vec![0u64; o.writes.len()];
        for s in stats.iter().filter(|s| s.object_id == Some(id)) {
            let t = logical[&s.tid] as usize;
            assert!(
                t < reads.len(),
                "{compiler}, {name}: unexpected thread {t} on {}",
                o.name
            );
            reads[t] += s.reads;
            writes[t] += s.writes;
        }
        let what = format!("{compiler}, {name}: accesses of {} per thread", o.name);
        assert_eq!(reads, o.reads, "{what}: reads");
        assert_eq!(writes, o.writes, "{what}: writes");
    }
}

/// Plain loads and stores (private-blocks, stencil) and atomics (hotspot's `fetch_add`).
#[test]
fn inlined_hooks_leave_no_call_and_count_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let runs: [SmallRun; 3] = [
        PRIVATE_BLOCKS_SMALL,
        STENCIL_SMALL,
        (
            "hotspot",
            &[
                ("keys", 16384),
                ("range", 16384),
                ("threads", 2),
                ("iters", 2),
            ],
        ),
    ];
    for compiler in COMPILERS.into_iter().filter(|c| have(c)) {
        for (name, overrides) in runs {
            check_inlined(
                compiler,
                name,
                overrides,
                &dir.path().join(compiler).join(name),
            );
        }
    }
}

/// An inlined hook has no return address of its own: a sample's instruction address is the one
/// the slow path returns to, which must be in the program's loop, not in the runtime. The
/// weights of loads and of stores each add up to the exact counts of the same run: on plain
/// accesses (private-blocks) and on atomic read-modify-writes (hotspot), whose reads and writes
/// are sampled together on the read countdown.
#[test]
fn inlined_hooks_sample_the_program_s_own_code() {
    let dir = tempfile::tempdir().unwrap();
    let runs: [SmallRun; 2] = [
        (
            "private-blocks",
            &[("n", 98304), ("threads", 2), ("iters", 16)],
        ),
        (
            "hotspot",
            &[
                ("keys", 65536),
                ("range", 65536),
                ("threads", 2),
                ("iters", 16),
            ],
        ),
    ];
    for compiler in COMPILERS.into_iter().filter(|c| have(c)) {
        for (name, overrides) in runs {
            check_samples(
                compiler,
                name,
                overrides,
                &dir.path().join(compiler).join(name),
            );
        }
    }
}

fn check_samples(compiler: &str, name: &str, overrides: &[(&str, u64)], dir: &Path) {
    let w = numalens_workloads::find(name).unwrap();
    let manifest = w.manifest().unwrap();
    // The default build: hooks inlined, loops vectorised.
    let program = build(w, &wrapper(compiler, false), dir).unwrap();
    assert_eq!(
        hook_calls(&program, inlined_hooks(compiler)),
        BTreeMap::new()
    );
    // clang vectorises private-blocks' loops (gcc 12 at -O2 does not): a 16-byte access counts
    // as two 8-byte words, in the sampling countdown as in the exact counts, so both must agree
    // on this build.
    assert!(
        compiler == "gcc" || name != "private-blocks" || packed_instructions(&program) > 0,
        "{compiler}: private-blocks was not vectorised; the check below would not cover 16-byte \
         accesses"
    );
    let args = numalens_workloads::args(&manifest, overrides).unwrap();
    let profile_dir = dir.join("both.numalens");
    record("both", &program, &args, &profile_dir);

    let profile = Profile::open(&profile_dir).unwrap();
    let ids = object_ids(w, &profile);
    let logical = logical_threads(&profile);
    let code = code_locations(&profile);
    let source = format!("{name}.c");
    // (object, logical thread, is a write) -> sampled weight, and exact accesses
    let mut weight: BTreeMap<(u64, u32, bool), u64> = BTreeMap::new();
    for s in profile.read_all::<Sample>().unwrap() {
        let Some(id) = s.object_id.filter(|id| ids.values().any(|x| x == id)) else {
            continue;
        };
        if !matches!(s.kind, SampleKind::Load | SampleKind::Store) {
            continue;
        }
        let at = &code[&s.ip.expect("a sampled access has its ip")];
        assert!(
            at.module.ends_with(&format!("/{name}"))
                && at.file.as_deref().is_some_and(|f| f.ends_with(&source)),
            "a sample is not in the program's code: {at:?}"
        );
        let key = (id, logical[&s.tid], s.kind == SampleKind::Store);
        *weight.entry(key).or_default() += u64::from(s.weight);
    }
    let mut exact: BTreeMap<(u64, u32, bool), u64> = BTreeMap::new();
    for s in profile.read_all::<PageStat>().unwrap() {
        if let Some(id) = s.object_id.filter(|id| ids.values().any(|x| x == id)) {
            let thread = logical[&s.tid];
            *exact.entry((id, thread, false)).or_default() += s.reads;
            *exact.entry((id, thread, true)).or_default() += s.writes;
        }
    }
    // Both objects, each read and written on both threads.
    assert_eq!(exact.len(), 8, "{exact:?}");
    for (key, want) in &exact {
        let got = weight.get(key).copied().unwrap_or(0) as f64;
        let want = *want as f64;
        // A thread's samples fall on whichever object its access at that moment is on, so an
        // object's share of them varies about as a Poisson count: standard deviation about
        // sqrt(want * 1024). Five of them still catch a countdown that counts 16-byte accesses
        // as one word (-50 % on clang's private-blocks reads, 16 % away) and read-modify-writes
        // whose writes are not sampled or sampled twice (±95 % on hotspot's key_buff1 writes,
        // 21 % away).
        let deviation = (want * 1024.0).sqrt();
        assert!(
            (got - want).abs() < 5.0 * deviation,
            "{compiler}, {name}, {key:?}: sampled weight {got}, exact {want}; {weight:?}"
        );
    }
}
