//! `numalens import`: a perf.data recording as a profile.

use std::path::{Path, PathBuf};

use anyhow::Result;
use numalens_import::{ImportError, ImportOptions, Imported, import};

use crate::cli::ImportArgs;
use crate::exit::UsageError;

pub fn run(args: ImportArgs) -> Result<()> {
    let output = args.output.unwrap_or_else(|| default_output(&args.input));
    if output.exists() {
        return Err(UsageError(format!(
            "{} exists: give another name with -o, or remove it",
            output.display()
        ))
        .into());
    }
    let opts = ImportOptions {
        min_object: args.min_object,
    };
    let imported = match import(&args.input, &output, &opts) {
        Ok(i) => i,
        // The file given is not one to import: the command line must change.
        Err(
            e @ (ImportError::Open { .. }
            | ImportError::Perf(_)
            | ImportError::NotPerfData(_)
            | ImportError::Damaged(_)
            | ImportError::Header(_)
            | ImportError::NoAddresses(_)),
        ) => {
            return Err(UsageError(e.to_string()).into());
        }
        Err(e) => return Err(e.into()),
    };
    print_summary(&imported, &output);
    Ok(())
}

/// `perf.data` → `perf.numalens`, numbered when taken.
fn default_output(input: &Path) -> PathBuf {
    let stem = input
        .file_stem()
        .map_or("perf".into(), |n| n.to_string_lossy().into_owned());
    super::record::free_profile_name(&stem)
}

fn print_summary(i: &Imported, output: &Path) {
    for e in &i.events {
        let what = if e.faults {
            "page faults"
        } else {
            "memory samples"
        };
        eprintln!(
            "numalens: event {}: {} samples, {} with a data address ({what})",
            e.name, e.samples, e.with_address
        );
    }
    if i.truncated > 0 {
        eprintln!(
            "numalens: {} damaged records (cut short, or a mapping past the end of memory) were skipped",
            i.truncated
        );
    }
    let nodes = match i.nodes {
        0 => "the file does not say which NUMA nodes the machine had".to_string(),
        n => format!(
            "recorded on a machine with {n} NUMA node{}",
            if n == 1 { "" } else { "s" }
        ),
    };
    let s = &i.profile;
    eprintln!(
        "numalens: imported {} accesses and {} page faults, {} objects, {} threads; {nodes}",
        i.accesses, i.faults, s.objects, s.threads
    );
    if !s.complete {
        eprintln!(
            "numalens: the profile is marked incomplete: {}",
            s.reasons.join("; ")
        );
    }
    eprintln!("numalens: profile written to {}", output.display());
}
