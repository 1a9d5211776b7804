//! `numalens-vm-placement`: the table of `bench/vm-placement`. Reads the runs a guest brought
//! back (`RESULTS/<workload>/<condition>.numalens` with `.status`, `.txt` and `.cpus` beside
//! each, `linux.vmstat`, `simulate.txt`; numalens_testbed::placement::table), measures each
//! placement (numalens_testbed::placement), and prints the table of the guest and the issue's
//! targets, also written as markdown with `--markdown`.

use std::path::{Path, PathBuf};

use clap::Parser;
use numalens_testbed::placement::measure;
use numalens_testbed::placement::table::{Row, render, render_targets, targets, workload_rows};

#[derive(Parser, Debug)]
#[command(about = "Measure the placements a bench/vm-placement guest brought back")]
struct Args {
    /// The guest's results directory: one directory per workload.
    results: PathBuf,
    /// The guest's name, for the title.
    #[arg(long, default_value = "guest")]
    guest: String,
    /// Also write the table and the targets as markdown here.
    #[arg(long)]
    markdown: Option<PathBuf>,
}

/// Workloads in the order of the targets, then the rest by name.
const ORDER: &[&str] = &["master-init", "private-blocks", "stencil", "shared-hot-rw"];

fn workloads(results: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(results)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            let p = e.path();
            [
                "first-touch.status",
                "first-touch.numalens",
                "qemu-cmd.sh",
                "guest-failure.txt",
            ]
            .iter()
            .any(|f| p.join(f).exists())
        })
        .filter_map(|e| e.file_name().to_str().map(String::from))
        .collect();
    names.sort_by_key(|n| {
        (
            ORDER.iter().position(|o| o == n).unwrap_or(ORDER.len()),
            n.clone(),
        )
    });
    names
}

fn main() {
    let args = Args::parse();
    let names = workloads(&args.results);
    if names.is_empty() {
        eprintln!(
            "numalens-vm-placement: no workload runs in {}",
            args.results.display()
        );
        std::process::exit(1);
    }
    // One thread per workload: each measurement reads its profiles and simulates.
    let rows: Vec<Row> = std::thread::scope(|s| {
        let handles: Vec<_> = names
            .iter()
            .map(|w| {
                let dir = args.results.join(w);
                s.spawn(move || workload_rows(w, &dir, &measure))
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("a measurement thread panicked"))
            .collect()
    });
    let table = render(&args.guest, &rows);
    let targets = render_targets(&targets(&rows));
    print!("{table}{targets}");
    if let Some(path) = &args.markdown
        && let Err(e) = std::fs::write(path, format!("{table}{targets}"))
    {
        eprintln!(
            "numalens-vm-placement: cannot write {}: {e}",
            path.display()
        );
        std::process::exit(1);
    }
}
