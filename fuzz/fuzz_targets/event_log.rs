//! A runtime event log (`events-*.bin`) as the recorder reads it after the program ended, or
//! after a crash left it torn: parsed, decoded, turned into the process's objects, threads and
//! sites, its exit page-node query into huge-page residency and `page_nodes` rows; and counted
//! by the status line's reader as it would while the log grows.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use numalens_assemble::symbols::Symbolizer;
use numalens_assemble::{exit_page_nodes, exit_residency, process_view};
use numalens_preload::events::parse_event_log;
use numalens_preload::events_tail::ObjectCounter;

fuzz_target!(|data: &[u8]| {
    let mut counter = ObjectCounter::default();
    let dir = numalens_fuzz::scratch();
    std::fs::write(dir.path().join("events-1.bin"), data).unwrap();
    counter.update(dir.path());

    let Ok(log) = parse_event_log(data, Path::new("events-1.bin")) else {
        return;
    };
    let _ = log.events().count();
    let view = process_view(&log, 4096, &mut Symbolizer::new(), &[]);
    let _ = view.sites.used().count();
    let views = [view];
    let faulted = [(views[0].pid, 0), (views[0].pid, 1 << 30)].into();
    let _ = exit_residency(&views, &faulted);
    let _ = exit_page_nodes(&views[0], 0).count();
});
