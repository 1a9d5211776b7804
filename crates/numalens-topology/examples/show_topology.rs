//! Prints a preset (`show_topology NAME`), a topology file (`show_topology FILE.json`) or this
//! machine (`show_topology`) as text, or as JSON
//! with `--json`. The `numalens topology` command is the user-facing version of this.

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let json = args.iter().any(|a| a == "--json");
    let name = args.iter().find(|a| !a.starts_with("--"));
    let topology = match name {
        Some(path) if path.ends_with(".json") => {
            numalens_topology::load_json_file(std::path::Path::new(path))
        }
        Some(name) => numalens_topology::presets::preset(name),
        None => numalens_topology::host(),
    };
    match topology {
        Ok(t) if json => println!("{}", t.to_json_pretty()),
        Ok(t) => print!("{}", numalens_topology::render_text(&t, false)),
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    }
    ExitCode::SUCCESS
}
