//! The seeds and earlier findings of the `event_log` and `inst_files` fuzz targets (`fuzz/seeds/`),
//! read the way the targets read them: each finding stays fixed, and the seeds still read.

#[path = "../../../fuzz/seed_inputs.rs"]
mod seeds;

use numalens_assemble::symbols::Symbolizer;
use numalens_assemble::{exit_page_nodes, exit_residency, process_view};
use numalens_inst::files::read_inst_dir;
use numalens_preload::events::parse_event_log;
use seeds::seed_inputs;

#[test]
fn event_log_inputs_read_without_panicking() {
    for path in seed_inputs("event_log") {
        let bytes = std::fs::read(&path).unwrap();
        let Ok(log) = parse_event_log(&bytes, &path) else {
            continue;
        };
        let view = process_view(&log, 4096, &mut Symbolizer::new(), &[]);
        let faulted = [(view.pid, 0), (view.pid, 1 << 30)].into();
        let _ = exit_residency(std::slice::from_ref(&view), &faulted);
        let _ = exit_page_nodes(&view, 0).count();
    }
}

/// The target's input holds three files separated by `NLFUZZ--`.
#[test]
fn inst_files_inputs_read_without_panicking() {
    for path in seed_inputs("inst_files") {
        let bytes = std::fs::read(&path).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let names = ["inst-1.pages", "inst-2.pages", "inst-1.samples"];
        for (name, part) in names.iter().zip(split(&bytes, names.len())) {
            std::fs::write(dir.path().join(name), part).unwrap();
        }
        let _ = read_inst_dir(dir.path());
    }
}

fn split(mut data: &[u8], n: usize) -> Vec<&[u8]> {
    const SEPARATOR: &[u8] = b"NLFUZZ--";
    let mut parts = Vec::new();
    while parts.len() + 1 < n {
        let Some(at) = data.windows(SEPARATOR.len()).position(|w| w == SEPARATOR) else {
            break;
        };
        parts.push(&data[..at]);
        data = &data[at + SEPARATOR.len()..];
    }
    parts.push(data);
    parts
}
