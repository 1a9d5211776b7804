//! The first sections: the run in figures, the findings, and the machine with its placement.

use std::fmt::Write;

use numalens_analyze::model::{Evidence, Finding, FindingGroup};
use numalens_analyze::{FindingEntry, ReportModel};
use plotters::style::RGBColor;

use super::charts::{Bars, bars};
use super::text::{ThreadNames, bytes, count, esc, pct};
use super::{close_section, figure, help, limits, open_section};

pub(crate) fn summary(out: &mut String, m: &ReportModel) {
    open_section(out, "summary");
    let p = &m.profile;
    let a = &m.analysis;
    if let Some(note) = &p.lost_samples_note {
        let _ = writeln!(out, "<p class=\"warn\">{}</p>", esc(note));
    }
    cannot_tell(out, m);
    out.push_str("<div class=\"cards\">");
    card(out, "accesses", &count(a.accesses), &access_source(m));
    let faults_only = a.limits.is_some();
    if faults_only {
        card(out, "local access ratio", "unknown", "page faults alone");
        card(out, "findings", "none", "page faults alone cannot show one");
    } else {
        card(
            out,
            "local access ratio",
            &pct(m.placement.local_ratio),
            &format!("{} placement", m.placement.mode),
        );
        card(
            out,
            "findings",
            &m.findings.len().to_string(),
            "most costly first",
        );
    }
    card(
        out,
        "objects",
        &count(m.totals.objects_ranked),
        &format!("of {} in the profile", count(m.totals.objects)),
    );
    card(
        out,
        "threads",
        &count(a.active_threads),
        &format!("with accesses, of {}", count(m.totals.threads)),
    );
    out.push_str("</div>\n<table class=\"facts\">");
    fact(out, "program", &esc(&p.command.join(" ")));
    fact(out, "backend", &esc(&p.backend.name));
    if let Some(why) = p.backend.settings.get("hooks").and_then(|v| v.as_str()) {
        let text = format!("{why}: recording ran about twice as slow as it could; rebuild");
        fact(
            out,
            "hooks",
            &format!("<span class=\"warn\">{}</span>", esc(&text)),
        );
    }
    let host = format!(
        "{}, Linux {}, {}",
        p.host.hostname, p.host.kernel, p.host.arch
    );
    fact(out, "host", &esc(&host));
    fact(out, "run", &run(m));
    fact(out, "completeness", &completeness(m));
    let lost = if p.lost_samples > 0 {
        format!(
            "<span class=\"warn\">{} samples lost</span>",
            count(p.lost_samples)
        )
    } else {
        "none".to_string()
    };
    fact(out, "lost samples", &lost);
    let samples = &m.totals.samples;
    let kinds = format!(
        "{} (load {}, store {}, first-touch {}, hint {}, fault {}); {} not in a known object",
        count(samples.total),
        count(samples.load),
        count(samples.store),
        count(samples.first_touch),
        count(samples.hint),
        count(samples.fault),
        count(m.totals.unattributed.total)
    );
    fact(out, "samples", &kinds);
    if let Some(c) = &a.coverage {
        fact(
            out,
            "coverage",
            &esc(&crate::analysis::coverage_sentence(c)),
        );
    }
    fact(out, "first touch from", &esc(&a.first_touch_source));
    fact(out, "false sharing", &esc(&a.false_sharing));
    fact(
        out,
        "profile",
        &esc(&format!("{} (format {})", p.path, p.format_version)),
    );
    if let Some(sel) = selection(m) {
        fact(out, "selection", &sel);
    }
    out.push_str("</table>\n");
    close_section(out);
}

fn access_source(m: &ReportModel) -> String {
    match m.analysis.access_source.as_str() {
        "page_stats" => "exact per-thread page counts".into(),
        "samples" => "from weighted samples".into(),
        other => other.to_string(),
    }
}

fn card(out: &mut String, label: &str, value: &str, note: &str) {
    let _ = write!(
        out,
        "<div class=\"card\"><div class=\"value\">{}</div><div class=\"label\">{}</div>\
         <div class=\"note\">{}</div></div>",
        esc(value),
        esc(label),
        esc(note)
    );
}

/// A row of a facts table; `html` is already escaped.
pub(crate) fn fact(out: &mut String, label: &str, html: &str) {
    let _ = write!(out, "<tr><th>{}</th><td>{html}</td></tr>", esc(label));
}

fn run(m: &ReportModel) -> String {
    let p = &m.profile;
    let exit = match p.completeness.exit {
        Some(e) => match (e.code, e.signal) {
            (_, Some(sig)) => format!("killed by signal {sig}"),
            (Some(code), None) => format!("exited with status {code}"),
            (None, None) => "ended".to_string(),
        },
        None => "exit not recorded".to_string(),
    };
    match p.end_unix_ns {
        Some(end) => format!(
            "{exit}, {}",
            crate::layout::duration(end.saturating_sub(p.start_unix_ns))
        ),
        None => exit,
    }
}

fn completeness(m: &ReportModel) -> String {
    let c = &m.profile.completeness;
    if c.complete {
        return "complete".to_string();
    }
    let reasons: Vec<String> = c.reasons.iter().map(|r| esc(r)).collect();
    format!(
        "<span class=\"warn\">incomplete: {}</span>",
        if reasons.is_empty() {
            "no reason recorded".to_string()
        } else {
            reasons.join("; ")
        }
    )
}

fn selection(m: &ReportModel) -> Option<String> {
    let s = &m.selection;
    let mut parts = Vec::new();
    if let Some(o) = &s.object {
        parts.push(format!("objects named <code>{}</code>", esc(o)));
    }
    if let Some(t) = s.thread {
        parts.push(format!("samples of thread T{t}"));
    }
    (!parts.is_empty()).then(|| parts.join(", "))
}

/// What a profile of page faults alone cannot tell, and how to record what can: first.
fn cannot_tell(out: &mut String, m: &ReportModel) {
    let Some(l) = &m.analysis.limits else { return };
    let _ = writeln!(
        out,
        "<div class=\"limits\" id=\"limits\"><p class=\"warn\">What this profile cannot tell. \
         Its evidence is {}.</p>\n<ul>",
        esc(&l.evidence)
    );
    for what in &l.cannot_tell {
        let _ = writeln!(out, "<li>{}</li>", esc(what));
    }
    out.push_str("</ul>\n<p>To see it:</p>\n<ul>");
    for how in &l.remedies {
        let _ = writeln!(out, "<li>{}</li>", esc(how));
    }
    out.push_str("</ul></div>\n");
}

pub(crate) fn findings(out: &mut String, m: &ReportModel) {
    open_section(out, "findings");
    if m.analysis.limits.is_some() {
        out.push_str(
            "<p class=\"note\">No finding can be drawn from page faults alone (see the top of \
             this report): this is not a clean bill.</p>\n",
        );
    } else if m.findings.is_empty() {
        out.push_str(
            "<p class=\"note\">No finding: no object with enough of the accesses shows one of \
             the patterns of the findings vocabulary (thresholds in the model's \
             <code>analysis.thresholds</code>).</p>\n",
        );
    }
    let entries = m.finding_entries();
    for (i, entry) in entries.iter().take(limits::FINDINGS).enumerate() {
        match *entry {
            FindingEntry::Single(f) => finding(out, &(i + 1).to_string(), &m.findings[f]),
            FindingEntry::Group(g) => finding_group(out, i + 1, m, &m.finding_groups[g]),
        }
    }
    if entries.len() > limits::FINDINGS {
        let _ = writeln!(
            out,
            "<p class=\"note\">{} more findings are in the JSON model (<code>--json</code>).</p>",
            entries.len() - limits::FINDINGS
        );
    }
    close_section(out);
}

/// A group: one entry with the function, lines, fix and combined cost, its members below it.
fn finding_group(out: &mut String, rank: usize, m: &ReportModel, g: &FindingGroup) {
    let place = match &g.file {
        Some(file) => format!(" ({})", esc(&group_lines(file, &g.lines))),
        None => String::new(),
    };
    let _ = write!(
        out,
        "<article class=\"finding finding-group\" id=\"finding-{rank}\">\n<h3><span class=\"rank\">{rank}</span> \
         <span class=\"pattern\">{}</span> on {} objects allocated in <code title=\"{}\">{}</code>{place}</h3>\n\
         <table class=\"facts\">",
        esc(&g.id),
        g.members.len(),
        esc(&g.function),
        esc(&numalens_analyze::short_function_name(&g.function)),
    );
    fact(
        out,
        "fix",
        &format!("<b>{}</b>: {}", esc(&g.advice), esc(&g.fix)),
    );
    fact(out, "why", &esc(&g.why));
    fact(
        out,
        "cost",
        &format!(
            "{} accesses ({} of all), {} of them remote, the {} added up",
            count(g.cost.accesses),
            pct(Some(g.cost.share)),
            count(g.cost.remote),
            g.members.len()
        ),
    );
    let _ = write!(
        out,
        "</table>\n<details class=\"members\" open><summary>{} instances, most costly first</summary>\n",
        g.members.len()
    );
    for (i, &f) in g.members.iter().enumerate() {
        finding(out, &format!("{rank}.{}", i + 1), &m.findings[f]);
    }
    out.push_str("</details>\n</article>\n");
}

/// `file:166–172`, or `file:166` for one line.
fn group_lines(file: &str, lines: &[u32]) -> String {
    match (lines.first(), lines.last()) {
        (Some(a), Some(b)) if a != b => format!("{file}:{a}\u{2013}{b}"),
        (Some(a), _) => format!("{file}:{a}"),
        _ => file.to_string(),
    }
}

fn finding(out: &mut String, rank: &str, f: &Finding) {
    let _ = write!(
        out,
        "<article class=\"finding\" id=\"finding-{rank}\">\n<h3><span class=\"rank\">{rank}</span> \
         <span class=\"pattern\">{}</span> in <a href=\"#{}\">{}</a></h3>\n<p class=\"summary\">{}</p>\n\
         <table class=\"facts\">",
        esc(&f.id),
        super::objects::anchor(f.object.id, f.object.pid),
        esc(&f.object.name),
        esc(&f.summary)
    );
    let site = f.object.site.as_deref().map_or("unknown".to_string(), |s| {
        format!("<code>{}</code>", esc(s))
    });
    fact(out, crate::site_label(&f.object.kind), &site);
    fact(
        out,
        "object",
        &format!("{} (id {})", esc(&f.object.kind), f.object.id),
    );
    // A measured finding's cost is of the accesses with a known source, remote as measured.
    let (known, measured) = if f.is_measured() {
        (" with a known source", " as the PMU measured")
    } else {
        ("", "")
    };
    fact(
        out,
        "cost",
        &format!(
            "{} accesses ({} of all{known}), {} of them remote{measured}",
            count(f.cost.accesses),
            pct(Some(f.cost.share)),
            count(f.cost.remote)
        ),
    );
    let evidence: Vec<String> = f.evidence.iter().map(evidence).collect();
    fact(out, "evidence", &evidence.join(", "));
    fact(
        out,
        "fix",
        &format!("<b>{}</b>: {}", esc(&f.advice), esc(&f.fix)),
    );
    fact(out, "why", &esc(&f.why));
    if let Some(basis) = &f.rests_on {
        fact(out, "rests on", &esc(basis));
    }
    if let Some(p) = &f.predicted {
        let sentence = crate::whatif::prediction_sentence(&f.object.name, p);
        fact(out, "predicted", &esc(&sentence));
    }
    out.push_str("</table>\n</article>\n");
}

/// An evidence number: shares and ratios as percentages, counts as integers.
fn evidence(e: &Evidence) -> String {
    let k = e.key.as_str();
    let value = if k.ends_with("share") || k.ends_with("ratio") {
        pct(Some(e.value))
    } else if e.value.fract() == 0.0 && e.value.abs() < 1e15 {
        count(e.value as u64)
    } else {
        format!("{:.2}", e.value)
    };
    format!("{} <b>{}</b>", esc(&k.replace('_', " ")), esc(&value))
}

pub(crate) fn topology(out: &mut String, m: &ReportModel) {
    open_section(out, "topology");
    let pl = &m.placement;
    out.push_str("<table class=\"facts\">");
    let mode = match pl.mode.as_str() {
        "what-if" => "what-if: threads and pages placed on a machine model",
        "recorded" => "recorded: the run's own thread and page placement",
        other => other,
    };
    fact(out, "placement", &esc(mode));
    fact(out, "machine", &esc(&pl.topology));
    fact(out, "why this machine", &esc(&pl.reason));
    let nodes: Vec<String> = pl.nodes.iter().map(u32::to_string).collect();
    fact(out, "nodes", &esc(&nodes.join(", ")));
    if let Some(rec) = &m.profile.topology_nodes {
        let rec: Vec<String> = rec.iter().map(u32::to_string).collect();
        fact(out, "recorded machine's nodes", &esc(&rec.join(", ")));
    }
    fact(out, "threads placed", &esc(&pl.thread_rule));
    fact(out, "pages placed", &esc(&pl.page_rule));
    let lar = format!(
        "{} ({} local, {} remote, {} unknown)",
        pct(pl.local_ratio),
        count(pl.local),
        count(pl.remote),
        count(pl.unknown)
    );
    fact(out, "local access ratio", &lar);
    let imbalance = pl.imbalance.map_or("–".to_string(), |i| {
        format!("{i:.2} (stddev / mean of accesses per node)")
    });
    fact(out, "node imbalance", &imbalance);
    out.push_str("</table>\n");
    machine_table(out, m);
    node_table(out, m);
    if !pl.load.is_empty() {
        let b = Bars {
            labels: pl.load.iter().map(|l| format!("node {}", l.node)).collect(),
            values: pl.load.iter().map(|l| vec![l.accesses as f64]).collect(),
            series: vec![("accesses served".into(), RGBColor(200, 100, 0))],
            x_desc: "accesses served by the node's memory".into(),
            log: false,
        };
        figure(
            out,
            "Load per memory node",
            &bars(&b),
            "one bar per node",
            &help::NODE_LOAD,
        );
    }
    close_section(out);
}

/// The machine the placement is on: each node's CPUs and memory, and its SLIT distances to
/// the others, so that "remote" can be read as near or far.
fn machine_table(out: &mut String, m: &ReportModel) {
    let pl = &m.placement;
    if pl.machine_nodes.is_empty() {
        return;
    }
    out.push_str("<table class=\"data\"><thead><tr><th>node</th><th>CPUs</th><th>memory</th>");
    let distances = pl
        .distances
        .as_ref()
        .filter(|d| d.len() == pl.machine_nodes.len());
    if distances.is_some() {
        for n in &pl.machine_nodes {
            let _ = write!(out, "<th>distance to {}</th>", n.node);
        }
    }
    out.push_str("</tr></thead><tbody>");
    for (i, n) in pl.machine_nodes.iter().enumerate() {
        let cpus = if n.cpus.is_empty() {
            "none (memory only)".to_string()
        } else {
            n.cpus.clone()
        };
        let memory = n.memory_bytes.map_or("–".to_string(), bytes);
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td class=\"n\">{}</td>",
            n.node,
            esc(&cpus),
            esc(&memory)
        );
        for d in distances.and_then(|d| d.get(i)).into_iter().flatten() {
            let _ = write!(out, "<td class=\"n\">{d}</td>");
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table>\n");
    if distances.is_some() {
        out.push_str(
            "<p class=\"note\">Distances are the firmware's (ACPI SLIT) relative access costs: 10 \
             is local, 20 about twice as far.</p>\n",
        );
    }
}

fn node_table(out: &mut String, m: &ReportModel) {
    let names = ThreadNames::new(m);
    let pl = &m.placement;
    let total = pl.accesses.max(1) as f64;
    out.push_str(
        "<table class=\"data\"><thead><tr><th>node</th><th>threads on it</th><th>pages</th>\
         <th>accesses served</th><th>share</th><th>pages at exit (recorded)</th></tr></thead><tbody>",
    );
    for l in &pl.load {
        let threads: Vec<String> = pl
            .thread_nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| **n == Some(l.node))
            .map(|(t, _)| names.get(t))
            .take(24)
            .collect();
        let more = if l.threads as usize > threads.len() {
            " …"
        } else {
            ""
        };
        let recorded = m
            .nodes
            .nodes
            .iter()
            .find(|n| n.node == l.node)
            .map_or("–".to_string(), |n| {
                format!("{} ({})", count(n.pages), bytes(n.bytes))
            });
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}{more}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
             <td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
            l.node,
            esc(&threads.join(" ")),
            count(l.pages),
            count(l.accesses),
            pct(Some(l.accesses as f64 / total)),
            recorded
        );
    }
    out.push_str("</tbody></table>\n");
}
