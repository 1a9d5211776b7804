//! Assembles a stored recording (a profile directory kept with `NUMALENS_KEEP_EVENTS=1`, or one
//! `numalens recover` would take) into a profile and prints the wall time, so two builds can be
//! timed, profiled and their profiles compared on the same recording.
//!
//! `cargo run --release -p numalens-assemble --example assemble_stored -- RECORDING OUTPUT`

use std::path::PathBuf;
use std::time::Instant;

use numalens_assemble::stored::write_stored_profile;
use numalens_assemble::symbols::ModuleFiles;

fn main() {
    let mut args = std::env::args_os().skip(1).map(PathBuf::from);
    let (Some(recording), Some(output)) = (args.next(), args.next()) else {
        eprintln!("usage: assemble_stored RECORDING OUTPUT");
        std::process::exit(2);
    };
    let started = Instant::now();
    let summary = write_stored_profile(&recording, &output, ModuleFiles::AsRecorded)
        .unwrap_or_else(|e| panic!("{e}"));
    println!(
        "{:.3} s, {} samples",
        started.elapsed().as_secs_f64(),
        summary.samples
    );
}
