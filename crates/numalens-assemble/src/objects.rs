//! Objects and threads of one process, from its runtime event log.

use std::collections::HashMap;
use std::path::Path;

use numalens_format::ObjectKind;
use numalens_preload::events::{Event, EventLog, TimedEvent};

use crate::attribute::ObjectSpec;
use crate::sites::{LoadedModule, SiteTable, definition_site};
use crate::symbols::{Symbolizer, static_objects};

/// A thread as the runtime saw it.
#[derive(Debug, Clone)]
pub struct RuntimeThread {
    pub tid: u32,
    pub logical_id: u32,
    pub start_routine: u64,
    pub parent_tid: Option<u32>,
    pub start_ns: u64,
    pub exit_ns: Option<u64>,
}

/// What one process's log tells.
pub struct ProcessView {
    pub pid: u32,
    pub objects: Vec<ObjectSpec>,
    pub threads: Vec<RuntimeThread>,
    pub sites: SiteTable,
    pub modules: Vec<LoadedModule>,
    pub page_nodes: Vec<(u64, Event)>,
    /// Rules of a plan the runtime applied (`PLACE` records).
    pub places: Vec<(u64, Event)>,
    pub ended_cleanly: bool,
    pub signal: Option<i32>,
    pub small_allocs: (u64, u64),
}

/// The modules a log lists.
pub fn logged_modules(log: &EventLog) -> Vec<LoadedModule> {
    log.events()
        .filter_map(|e| match e.event {
            Event::Module {
                load_bias,
                low,
                high,
                build_id,
                path,
                ..
            } => Some(LoadedModule {
                path,
                build_id,
                load_bias,
                low,
                high,
            }),
            _ => None,
        })
        .collect()
}

/// Adds to `modules` those of `more` that overlap none of them.
fn add_modules(modules: &mut Vec<LoadedModule>, more: &[LoadedModule]) {
    for m in more {
        if !modules.iter().any(|o| o.low < m.high && m.low < o.high) {
            modules.push(m.clone());
        }
    }
}

/// The modules each log's sites are named with: its own, and for a fork child (its parent's
/// image: the same exec count) its parent's too, which a child of a fork no handler saw never
/// lists (listing them could hang it). The parent is the latest log of its pid started before
/// the child, resolved first (logs in start order), so chains of such forks inherit through.
pub fn modules_per_log(logs: &[EventLog]) -> Vec<Vec<LoadedModule>> {
    let mut order: Vec<usize> = (0..logs.len()).collect();
    order.sort_by_key(|&i| logs[i].header.start_ns);
    let mut resolved: Vec<Vec<LoadedModule>> = vec![Vec::new(); logs.len()];
    let mut by_pid: HashMap<u32, Vec<(u64, usize)>> = HashMap::new();
    for i in order {
        let header = &logs[i].header;
        let mut modules = logged_modules(&logs[i]);
        let parent = by_pid.get(&header.ppid).and_then(|started| {
            started
                .iter()
                .filter(|(start, _)| *start <= header.start_ns)
                .max_by_key(|(start, _)| *start)
                .map(|(_, j)| *j)
        });
        if let Some(j) = parent
            && logs[j].header.exec_count == header.exec_count
        {
            let inherited = resolved[j].clone();
            add_modules(&mut modules, &inherited);
        }
        resolved[i] = modules;
        by_pid
            .entry(header.pid)
            .or_default()
            .push((header.start_ns, i));
    }
    resolved
}

/// Reads one process's events in time order into objects, threads and sites; `parent_modules`
/// (what `modules_per_log` gives) complete the modules the log lists.
pub fn process_view(
    log: &EventLog,
    min_object: u64,
    symbols: &mut Symbolizer,
    parent_modules: &[LoadedModule],
) -> ProcessView {
    let pid = log.header.pid;
    let mut events: Vec<TimedEvent> = log.events().collect();
    events.sort_by_key(|e| e.time_ns);
    let mut view = ProcessView {
        pid,
        objects: Vec::new(),
        threads: Vec::new(),
        sites: SiteTable::default(),
        modules: Vec::new(),
        page_nodes: Vec::new(),
        places: Vec::new(),
        ended_cleanly: log.has_end() || ends_by_exec_or_daemon(&events),
        signal: None,
        small_allocs: (0, 0),
    };
    for e in &events {
        if let Event::Site { site_id, frames } = &e.event {
            view.sites.add_raw(*site_id, frames.clone());
        }
    }
    view.modules = logged_modules(log);
    add_modules(&mut view.modules, parent_modules);
    let mut live: HashMap<u64, usize> = HashMap::new();
    let mut stacks: HashMap<i64, Vec<usize>> = HashMap::new();
    for e in events {
        apply(&mut view, &mut live, &mut stacks, e, symbols);
    }
    add_statics(&mut view, min_object, symbols);
    let renamed = crate::sites::name_wrapped_sites(&mut view.sites);
    for o in &mut view.objects {
        if let Some(name) = o.site_key.and_then(|k| renamed.get(&k)) {
            o.name = name.clone();
        }
    }
    view
}

/// An image replaced by exec ends with its EXEC record (and the counters flushed with it, and
/// the flush marks other sampling threads wrote before the exec ended them); the new image
/// writes its own log.
fn ends_by_exec_or_daemon(events: &[TimedEvent]) -> bool {
    let last = events
        .iter()
        .rev()
        .find(|e| !matches!(e.event, Event::SmallAllocs { .. } | Event::FlushMark));
    matches!(
        last.map(|e| &e.event),
        Some(Event::Exec { .. } | Event::Daemon)
    )
}

fn apply(
    view: &mut ProcessView,
    live: &mut HashMap<u64, usize>,
    per_thread: &mut HashMap<i64, Vec<usize>>,
    e: TimedEvent,
    symbols: &mut Symbolizer,
) {
    let (tid, t) = (e.tid, e.time_ns);
    match e.event {
        Event::Alloc {
            address,
            size,
            site_id,
            ..
        } => {
            free_at(view, live, address, t);
            let id = push(
                view,
                ObjectKind::Heap,
                address,
                size,
                t,
                tid,
                site_id,
                symbols,
            );
            live.insert(address, id);
        }
        Event::Realloc {
            address,
            size,
            old_address,
            site_id,
        } => {
            if old_address != 0 {
                free_at(view, live, old_address, t);
            }
            if address != 0 && size != 0 {
                let id = push(
                    view,
                    ObjectKind::Heap,
                    address,
                    size,
                    t,
                    tid,
                    site_id,
                    symbols,
                );
                live.insert(address, id);
            }
        }
        Event::Free { address } => free_at(view, live, address, t),
        Event::Mmap {
            address,
            length,
            site_id,
            fd,
            ..
        } => {
            let kind = if fd >= 0 {
                ObjectKind::File
            } else {
                ObjectKind::Mmap
            };
            free_range(view, live, address, length, t);
            let id = push(view, kind, address, length, t, tid, site_id, symbols);
            live.insert(address, id);
        }
        Event::Munmap { address, length } => free_range(view, live, address, length, t),
        Event::Mremap {
            address,
            length,
            old_address,
            old_length,
        } => {
            let (site, kind) = live
                .get(&old_address)
                .map(|&i| (view.objects[i].site_key, view.objects[i].kind))
                .unwrap_or((None, ObjectKind::Mmap));
            free_range(view, live, old_address, old_length, t);
            let name = live_name(view, site);
            let id = push_named(view, kind, name, address, length, t, Some(tid), site);
            live.insert(address, id);
        }
        Event::ThreadStart {
            logical_id,
            start_routine,
            parent_tid,
            ..
        } => {
            // The thread's stack comes in the STACK record that follows.
            view.threads.push(RuntimeThread {
                tid,
                logical_id: logical_id.max(0) as u32,
                start_routine,
                parent_tid: (parent_tid != 0).then_some(parent_tid),
                start_ns: t,
                exit_ns: None,
            });
        }
        Event::Stack {
            low,
            size,
            logical_id,
        } => {
            let name = format!("stack[T{logical_id}]");
            let id = push_named(view, ObjectKind::Stack, name, low, size, t, Some(tid), None);
            per_thread.entry(logical_id).or_default().push(id);
        }
        Event::Tls {
            address,
            size,
            module_id,
            logical_id,
        } => {
            let name = format!("tls[T{logical_id}] module {module_id}");
            let id = push_named(
                view,
                ObjectKind::Tls,
                name,
                address,
                size,
                t,
                Some(tid),
                None,
            );
            per_thread.entry(logical_id).or_default().push(id);
        }
        Event::ThreadExit { logical_id } => {
            if let Some(thread) = view
                .threads
                .iter_mut()
                .rev()
                .find(|th| th.logical_id as i64 == logical_id)
            {
                thread.exit_ns = Some(t);
            }
            for id in per_thread.remove(&logical_id).unwrap_or_default() {
                view.objects[id].free_ns.get_or_insert(t);
            }
        }
        Event::PageNodes { .. } => view.page_nodes.push((t, e.event)),
        Event::Place { .. } => view.places.push((t, e.event)),
        Event::SmallAllocs { count, bytes } => {
            // Only a damaged log counts past u64; the sums stop there.
            view.small_allocs.0 = view.small_allocs.0.saturating_add(count);
            view.small_allocs.1 = view.small_allocs.1.saturating_add(bytes);
        }
        Event::Signal { signal, .. } => view.signal = Some(signal),
        _ => {}
    }
}

#[allow(clippy::too_many_arguments)]
fn push(
    view: &mut ProcessView,
    kind: ObjectKind,
    start: u64,
    size: u64,
    t: u64,
    tid: u32,
    site_id: u64,
    symbols: &mut Symbolizer,
) -> usize {
    let site = (site_id != 0)
        .then(|| {
            view.sites
                .get(site_id, &view.modules, symbols)
                .map(|s| (s.key, s.name.clone()))
        })
        .flatten();
    let name = match &site {
        Some((_, name)) => name.clone(),
        None => format!("{} {:#x}", kind_word(kind), start),
    };
    push_named(
        view,
        kind,
        name,
        start,
        size,
        t,
        Some(tid),
        site.map(|s| s.0),
    )
}

#[allow(clippy::too_many_arguments)]
fn push_named(
    view: &mut ProcessView,
    kind: ObjectKind,
    name: String,
    start: u64,
    size: u64,
    t: u64,
    tid: Option<u32>,
    site_key: Option<u64>,
) -> usize {
    view.objects.push(ObjectSpec {
        pid: view.pid,
        kind,
        name,
        start,
        size,
        alloc_ns: t,
        free_ns: None,
        alloc_tid: tid,
        site_key,
        tracked: true,
    });
    view.objects.len() - 1
}

fn live_name(view: &ProcessView, site: Option<u64>) -> String {
    let named = site
        .and_then(|key| view.sites.used().find(|s| s.key == key))
        .map(|s| s.name.clone());
    named.unwrap_or_else(|| "mremap".into())
}

fn kind_word(kind: ObjectKind) -> &'static str {
    match kind {
        ObjectKind::File => "file mapping",
        ObjectKind::Mmap => "mapping",
        _ => "heap block",
    }
}

fn free_at(view: &mut ProcessView, live: &mut HashMap<u64, usize>, address: u64, t: u64) {
    if let Some(id) = live.remove(&address) {
        view.objects[id].free_ns = Some(t);
    }
}

fn free_range(
    view: &mut ProcessView,
    live: &mut HashMap<u64, usize>,
    start: u64,
    length: u64,
    t: u64,
) {
    let end = start.saturating_add(length);
    let gone: Vec<u64> = live
        .iter()
        .filter(|(a, id)| {
            **a >= start
                && **a < end
                && matches!(view.objects[**id].kind, ObjectKind::Mmap | ObjectKind::File)
        })
        .map(|(a, _)| *a)
        .collect();
    for address in gone {
        free_at(view, live, address, t);
    }
}

/// Static data objects of every loaded module, with the file and line that define them when the
/// module's debug information has them.
fn add_statics(view: &mut ProcessView, min_object: u64, symbols: &mut Symbolizer) {
    for module in view.modules.clone() {
        let path = Path::new(&module.path);
        let Ok(statics) = static_objects(&symbols.files().symbols_file(path), min_object) else {
            continue;
        };
        for s in statics {
            let start = module.load_bias.wrapping_add(s.svma);
            let site = symbols
                .definition(path, s.svma)
                .map(|d| definition_site(&module, s.svma, &s.name, d.file.clone(), d.line));
            let site_key = site.as_ref().map(|site| site.key);
            if let Some(site) = site {
                view.sites.add_definition(site);
            }
            push_named(
                view,
                ObjectKind::Static,
                s.name,
                start,
                s.size,
                0,
                None,
                site_key,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(tid: u32, event: Event) -> TimedEvent {
        TimedEvent {
            tid,
            time_ns: 1,
            event,
        }
    }

    #[test]
    fn an_exec_ends_its_image_past_the_marks_written_after_it() {
        let exec = || {
            at(
                1,
                Event::Exec {
                    exec_count: 1,
                    path: "/bin/true".into(),
                },
            )
        };
        let free = at(1, Event::Free { address: 0x1000 });
        assert!(ends_by_exec_or_daemon(&[
            free.clone(),
            exec(),
            at(2, Event::FlushMark)
        ]));
        assert!(!ends_by_exec_or_daemon(&[
            exec(),
            free,
            at(2, Event::FlushMark)
        ]));
    }
}
