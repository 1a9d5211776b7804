//! The report's section on where sampled accesses were served from, as the PMU measured it.

use std::fmt::Write;

use numalens_analyze::model::{DataSources, ReportModel, SourceCounts};

use crate::analysis::count;
use crate::layout::{Align, Style, section, table};

/// Shares of the known sources, then remote, then the mean latency.
const HEAD: [(&str, Align); 8] = [
    ("accesses", Align::Right),
    ("L1", Align::Right),
    ("L2", Align::Right),
    ("L3", Align::Right),
    ("local DRAM", Align::Right),
    ("remote DRAM", Align::Right),
    ("remote cache", Align::Right),
    ("latency", Align::Right),
];

/// The cells of [`HEAD`] for some counts.
fn cells(c: &SourceCounts) -> Vec<String> {
    let mut row = vec![count(c.known())];
    for share in c.known_shares() {
        row.push(share.map_or("-".into(), |s| format!("{:.0}%", s * 100.0)));
    }
    row.push(
        c.mean_latency()
            .map_or("-".into(), |l| format!("{l:.0} cyc")),
    );
    row
}

/// The section, when the profile's samples carry data sources.
pub(crate) fn section_of_report(out: &mut String, s: Style, m: &ReportModel) {
    let Some(d) = &m.data_sources else {
        return;
    };
    section(
        out,
        s,
        "Where accesses were served (PMU data source, weighted samples)",
    );
    let mut head = vec![("", Align::Left)];
    head.extend(HEAD);
    let mut rows = vec![[vec!["all".to_string()], cells(&d.totals)].concat()];
    rows.extend(
        d.objects
            .iter()
            .map(|o| [vec![o.name.clone()], cells(&o.counts)].concat()),
    );
    table(out, s, &head, &rows);
    threads(out, s, d);
    node_pairs(out, s, d);
    if d.totals.unknown > 0 {
        let _ = writeln!(
            out,
            "  {}",
            s.dim(&format!(
                "{} accesses of unknown source (the PMU did not say: stores on some machines, \
                 misses without a level) are left out of the shares",
                count(d.totals.unknown)
            ))
        );
    }
}

fn threads(out: &mut String, s: Style, d: &DataSources) {
    if d.threads.len() < 2 {
        return;
    }
    let mut head = vec![("thread", Align::Left)];
    head.extend(HEAD);
    let rows: Vec<Vec<String>> = d
        .threads
        .iter()
        .map(|t| {
            let name = t
                .logical_id
                .map_or(format!("tid {}", t.tid), |l| format!("T{l}"));
            [vec![name], cells(&t.counts)].concat()
        })
        .collect();
    let _ = writeln!(out);
    table(out, s, &head, &rows);
}

fn node_pairs(out: &mut String, s: Style, d: &DataSources) {
    if d.node_pairs.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\n  {}",
        s.dim("measured latency, from the CPUs of a node to the memory of a node")
    );
    let head = [
        ("cpu node", Align::Right),
        ("memory node", Align::Right),
        ("samples", Align::Right),
        ("mean latency", Align::Right),
    ];
    let rows: Vec<Vec<String>> = d
        .node_pairs
        .iter()
        .map(|p| {
            vec![
                p.cpu_node.to_string(),
                p.memory_node.to_string(),
                count(p.samples),
                format!("{} cyc", p.mean_cycles),
            ]
        })
        .collect();
    table(out, s, &head, &rows);
}
