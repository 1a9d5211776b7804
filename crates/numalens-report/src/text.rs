//! The report as text for the terminal: a summary of the recording, the top objects, the threads
//! and the memory nodes.

use std::fmt::Write;

use numalens_analyze::model::*;

use crate::analysis::{self, count};
use crate::layout::{Align, Style, bytes, duration, field, plural, section, table};

/// The model as aligned text; ANSI colour only when `color` is true.
pub fn render_text(model: &ReportModel, color: bool) -> String {
    let model = &*crate::printable::printable(model);
    let s = Style { color };
    let names = ThreadNames::new(model);
    let mut out = String::new();
    summary(&mut out, s, model);
    limits(&mut out, s, model);
    analysis::findings(&mut out, s, model);
    analysis::objects_table(&mut out, s, model);
    objects(&mut out, s, model, &names);
    threads(&mut out, s, model, &names);
    nodes(&mut out, s, model);
    crate::sources::section_of_report(&mut out, s, model);
    analysis::placement(&mut out, s, model);
    if let Some(w) = &model.what_if {
        crate::whatif::section_of_report(&mut out, s, w);
    }
    analysis::communication(&mut out, s, model);
    out
}

/// How threads are named: `T3` (logical id), with the pid when the profile has several
/// processes, or `tid 1234` for threads missing from the threads table.
struct ThreadNames {
    several_processes: bool,
}

impl ThreadNames {
    fn new(model: &ReportModel) -> Self {
        let first = model.threads.first().map(|t| t.pid);
        let several_processes = model.threads.iter().any(|t| Some(t.pid) != first);
        ThreadNames { several_processes }
    }

    fn name(&self, pid: u32, tid: u32, logical: Option<u32>) -> String {
        let own = logical.map_or(format!("tid {tid}"), |l| format!("T{l}"));
        if self.several_processes {
            format!("{pid}/{own}")
        } else {
            own
        }
    }
}

fn summary(out: &mut String, s: Style, m: &ReportModel) {
    let p = &m.profile;
    let _ = writeln!(out, "{} {}", s.heading("Profile"), p.path);
    if let Some(note) = &p.lost_samples_note {
        let _ = writeln!(out, "{}", s.warn(&format!("warning: {note}")));
    }
    field(out, s, "command", &p.command.join(" "));
    field(out, s, "backend", &backend(p));
    if let Some(why) = p.backend.settings.get("hooks").and_then(|v| v.as_str()) {
        let text = format!("{why}: recording ran about twice as slow as it could; rebuild");
        field(out, s, "hooks", &s.warn(&text));
    }
    field(out, s, "host", &host(p));
    field(out, s, "run", &run(s, p));
    for t in &p.unreadable_tables {
        let text = format!("{}; this report lacks {}", t.problem, t.missing);
        field(out, s, "unreadable", &s.warn(&text));
    }
    field(out, s, "samples", &samples(s, m));
    if let Some(c) = &m.analysis.coverage {
        field(out, s, "coverage", &analysis::coverage_sentence(c));
    }
    if let Some(selection) = selection(&m.selection) {
        field(out, s, "showing", &selection);
    }
}

/// What the profile cannot tell and how to record what can, before any result.
fn limits(out: &mut String, s: Style, m: &ReportModel) {
    let Some(l) = &m.analysis.limits else { return };
    section(out, s, &s.warn("What this profile cannot tell"));
    field(out, s, "evidence", &l.evidence);
    for (i, what) in l.cannot_tell.iter().enumerate() {
        field(out, s, if i == 0 { "unknown" } else { "" }, what);
    }
    for (i, how) in l.remedies.iter().enumerate() {
        field(out, s, if i == 0 { "to see it" } else { "" }, how);
    }
}

fn backend(p: &ProfileSummary) -> String {
    let settings: Vec<String> = p
        .backend
        .settings
        .iter()
        // Said on a line of its own.
        .filter(|(k, _)| k.as_str() != "hooks")
        .map(|(k, v)| match v {
            serde_json::Value::String(text) => format!("{k}={text}"),
            other => format!("{k}={other}"),
        })
        .collect();
    if settings.is_empty() {
        p.backend.name.clone()
    } else {
        format!("{} ({})", p.backend.name, settings.join(", "))
    }
}

fn host(p: &ProfileSummary) -> String {
    let mut text = format!(
        "{}, Linux {}, {}",
        p.host.hostname, p.host.kernel, p.host.arch
    );
    if let Some(nodes) = &p.topology_nodes {
        let ids: Vec<String> = nodes.iter().map(u32::to_string).collect();
        let _ = write!(
            text,
            ", {} ({})",
            plural(nodes.len() as u64, "node", "nodes"),
            ids.join(" ")
        );
    }
    match p.numa_balancing {
        Some(0) => text.push_str(", NUMA balancing off"),
        Some(mode) => {
            let _ = write!(text, ", NUMA balancing on (mode {mode})");
        }
        None => {}
    }
    text
}

fn run(s: Style, p: &ProfileSummary) -> String {
    let c = &p.completeness;
    let exit = match c.exit {
        Some(ExitSummary {
            code: Some(code), ..
        }) => format!("exited with status {code}"),
        Some(ExitSummary {
            signal: Some(sig), ..
        }) => format!("killed by signal {sig}"),
        _ => "exit not recorded".to_string(),
    };
    let length = p
        .end_unix_ns
        .map(|end| format!(", {}", duration(end.saturating_sub(p.start_unix_ns))))
        .unwrap_or_default();
    let complete = if c.complete {
        s.good("complete")
    } else if c.reasons.is_empty() {
        s.warn("incomplete")
    } else {
        s.warn(&format!("incomplete: {}", c.reasons.join("; ")))
    };
    format!("{exit}{length}; profile {complete}")
}

fn samples(s: Style, m: &ReportModel) -> String {
    let t = &m.totals;
    let mut text = format!("{} ({})", t.samples.total, kinds(&t.samples));
    let lost = plural(m.profile.lost_samples, "lost", "lost");
    let _ = write!(
        text,
        "; {}; {} not in a known object",
        if m.profile.lost_samples > 0 {
            s.warn(&lost)
        } else {
            lost
        },
        t.unattributed.total
    );
    text
}

/// `first-touch 2048, load 10`: the non-zero kinds.
fn kinds(k: &KindCounts) -> String {
    let parts: Vec<String> = kind_columns(k)
        .into_iter()
        .map(|(label, n)| format!("{label} {n}"))
        .collect();
    if parts.is_empty() {
        "none".to_string()
    } else {
        parts.join(", ")
    }
}

/// (label, count) of each kind with samples, in a fixed order.
fn kind_columns(k: &KindCounts) -> Vec<(&'static str, u64)> {
    [
        ("first-touch", k.first_touch),
        ("load", k.load),
        ("store", k.store),
        ("hint", k.hint),
        ("fault", k.fault),
    ]
    .into_iter()
    .filter(|(_, n)| *n > 0)
    .collect()
}

fn selection(sel: &Selection) -> Option<String> {
    let mut parts = Vec::new();
    if let Some(object) = &sel.object {
        parts.push(format!("objects named `{object}` and their samples"));
    }
    if let Some(thread) = sel.thread {
        parts.push(format!("samples of thread T{thread}"));
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

fn objects(out: &mut String, s: Style, m: &ReportModel, names: &ThreadNames) {
    let title = format!(
        "Objects (top {} of {}, by accesses, then first touches, resident pages, samples)",
        m.objects.len(),
        m.totals.objects_ranked
    );
    section(out, s, &title);
    if m.objects.is_empty() {
        let why = if m.totals.objects_ranked > 0 {
            "none listed (--top 0)"
        } else {
            "no object has samples or resident pages"
        };
        let _ = writeln!(out, "  {}", s.dim(why));
        return;
    }
    let placement_recorded = m.nodes.page_runs > 0;
    // The instances of one site are one block, at the place of its first listed instance.
    let mut shown_groups: Vec<usize> = Vec::new();
    let mut rank = 0;
    for o in &m.objects {
        if let Some((g, group)) = crate::groups::of_object(m, o.id, o.pid) {
            if shown_groups.contains(&g) {
                continue;
            }
            shown_groups.push(g);
            rank += 1;
            crate::groups::details(out, s, rank, group, m);
            continue;
        }
        rank += 1;
        object_row(out, s, rank, o);
        object_details(out, s, o, names, placement_recorded);
    }
}

fn object_row(out: &mut String, s: Style, rank: usize, o: &ObjectReport) {
    let resident: u64 = o.pages.by_node.iter().map(|n| n.count).sum();
    let head = format!(
        "{rank:>3}. {} {} {}",
        s.heading(&o.name),
        s.dim(&format!("[{}]", o.kind)),
        bytes(o.size)
    );
    let _ = write!(
        out,
        "\n{head}: {} first touches, {} samples, {} resident pages",
        o.samples.first_touch, o.samples.total, resident
    );
    // Sampled backends: what the samples stand for, counted as the analysis counts accesses
    // (beside load and store samples, page faults are not accesses).
    if let Some(a) = o.access.as_ref().filter(|a| a.accesses != o.samples.total) {
        let _ = write!(out, ", {} accesses", a.accesses);
    }
    let _ = writeln!(out);
}

fn object_details(
    out: &mut String,
    s: Style,
    o: &ObjectReport,
    names: &ThreadNames,
    placement_recorded: bool,
) {
    let detail = |out: &mut String, label: &str, value: String| {
        let _ = writeln!(out, "       {}  {value}", s.dim(&format!("{label:<13}")));
    };
    let by = o
        .alloc_tid
        .map(|tid| names.name(o.pid, tid, o.alloc_thread));
    if let Some(site) = &o.site {
        let by = by.as_ref().map(|b| format!(" by {b}")).unwrap_or_default();
        detail(
            out,
            crate::site_label(&o.kind),
            format!("{}{by}", frame(&site.location)),
        );
    } else if let Some(by) = by {
        detail(out, "allocated by", by);
    }
    detail(out, "address", format!("{:#x}, pid {}", o.start, o.pid));
    if !o.first_touchers.is_empty() {
        let list: Vec<String> = o
            .first_touchers
            .iter()
            .map(|t| format!("{} {}", names.name(t.pid, t.tid, t.thread), t.count))
            .collect();
        detail(out, "first touched", list.join(", "));
    }
    if placement_recorded {
        detail(out, "pages", placement(&o.pages));
    }
    detail(out, "samples", kinds(&o.samples));
}

/// `function file:line`, or what is known of the frame.
pub(crate) fn frame(f: &Frame) -> String {
    let function = f
        .function
        .as_deref()
        .map(numalens_analyze::short_function_name);
    match (function, &f.file, f.line) {
        (Some(function), Some(file), Some(line)) => format!("{function} {file}:{line}"),
        // A static's definition outside any function.
        (None, Some(file), Some(line)) => format!("{file}:{line}"),
        (function, _, _) => format!(
            "{} ({}+{:#x})",
            function.as_deref().unwrap_or("?"),
            f.module,
            f.offset
        ),
    }
}

fn placement(p: &PagePlacement) -> String {
    let mut parts: Vec<String> = p
        .by_node
        .iter()
        .map(|n| format!("node {}: {}", n.node, n.count))
        .collect();
    for (label, n) in [
        ("untouched", p.untouched),
        ("unknown", p.unknown),
        ("not queried", p.not_queried),
    ] {
        if n > 0 {
            parts.push(format!("{label}: {n}"));
        }
    }
    if parts.is_empty() {
        "none".to_string()
    } else {
        parts.join(", ")
    }
}

fn threads(out: &mut String, s: Style, m: &ReportModel, names: &ThreadNames) {
    section(out, s, &format!("Threads ({})", m.threads.len()));
    if m.threads.is_empty() {
        let _ = writeln!(out, "  {}", s.dim("no threads"));
        return;
    }
    let kinds = kind_columns(&m.totals.samples);
    let mut head = vec![
        ("thread", Align::Left),
        ("tid", Align::Right),
        ("name", Align::Left),
        ("start routine", Align::Left),
        ("samples", Align::Right),
    ];
    head.extend(kinds.iter().map(|(label, _)| (*label, Align::Right)));
    head.push(("nodes (samples)", Align::Left));
    head.extend([
        ("accesses", Align::Right),
        ("node", Align::Right),
        ("LAR", Align::Right),
    ]);
    let rows: Vec<Vec<String>> = m
        .threads
        .iter()
        .map(|t| {
            let mut row = vec![
                names.name(t.pid, t.tid, t.logical_id),
                t.tid.to_string(),
                t.name.clone().unwrap_or_else(|| "-".into()),
                t.start_function
                    .clone()
                    .or_else(|| t.start_routine.clone())
                    .unwrap_or_else(|| "-".into()),
                t.samples.total.to_string(),
            ];
            let own = kind_columns(&t.samples);
            for (label, _) in &kinds {
                let n = own.iter().find(|(l, _)| l == label).map_or(0, |(_, n)| *n);
                row.push(n.to_string());
            }
            row.push(thread_nodes(t));
            let a = &t.access;
            row.push(count(a.accesses));
            row.push(a.node.map_or("-".into(), |n| n.to_string()));
            row.push(
                a.local_ratio
                    .map_or("-".into(), |r| format!("{:.0}%", 100.0 * r)),
            );
            row
        })
        .collect();
    table(out, s, &head, &rows);
}

fn thread_nodes(t: &ThreadReport) -> String {
    let mut parts: Vec<String> = t
        .nodes
        .iter()
        .map(|n| format!("{}:{}", n.node, n.count))
        .collect();
    if t.unknown_node > 0 {
        parts.push(format!("?:{}", t.unknown_node));
    }
    if parts.is_empty() {
        "-".to_string()
    } else {
        parts.join(" ")
    }
}

fn nodes(out: &mut String, s: Style, m: &ReportModel) {
    section(
        out,
        s,
        "Memory nodes (pages at the end of the run, samples when taken)",
    );
    let n = &m.nodes;
    if n.page_runs == 0 {
        let _ = writeln!(
            out,
            "  {}",
            s.dim("page placement was not recorded; samples only")
        );
    }
    if n.nodes.is_empty() {
        let _ = writeln!(
            out,
            "  {}",
            s.dim("no page placement or sample node recorded")
        );
    } else {
        let head = [
            ("node", Align::Right),
            ("pages", Align::Right),
            ("memory", Align::Right),
            ("samples", Align::Right),
        ];
        let rows: Vec<Vec<String>> = n
            .nodes
            .iter()
            .map(|node| {
                vec![
                    node.node.to_string(),
                    node.pages.to_string(),
                    bytes(node.bytes),
                    node.samples.to_string(),
                ]
            })
            .collect();
        table(out, s, &head, &rows);
    }
    let _ = writeln!(
        out,
        "  {}",
        s.dim(&format!(
            "untouched pages: {}; pages of unknown node: {}; samples of unknown node: {}",
            n.untouched_pages, n.unknown_pages, n.unknown_node_samples
        ))
    );
}
