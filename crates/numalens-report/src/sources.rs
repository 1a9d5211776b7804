//! The report's section on where sampled accesses were served from, as the PMU measured it.

use std::fmt::Write;

use numalens_analyze::model::{DataSources, NodePairLatency, ReportModel, SourceCounts};

use crate::analysis::count;
use crate::layout::{Align, Style, section, table};

/// Shares of the known sources, then HITM, then the mean latency.
const HEAD: [(&str, Align); 10] = [
    ("accesses", Align::Right),
    ("L1", Align::Right),
    ("L2", Align::Right),
    ("L3", Align::Right),
    ("local DRAM", Align::Right),
    ("remote DRAM", Align::Right),
    ("remote cache", Align::Right),
    ("HITM local", Align::Right),
    ("HITM remote", Align::Right),
    ("latency", Align::Right),
];

/// A HITM count as a share of the known accesses; `-` when no sample carried a snoop result.
pub(crate) fn hitm_share(c: &SourceCounts, hitm: u64) -> String {
    let known = c.known();
    if c.snoop_samples == 0 || known == 0 {
        return "-".into();
    }
    format!("{:.0}%", 100.0 * hitm as f64 / known as f64)
}

/// The cells of [`HEAD`] for some counts.
fn cells(c: &SourceCounts) -> Vec<String> {
    let mut row = vec![count(c.known())];
    for share in c.known_shares() {
        row.push(share.map_or("-".into(), |s| format!("{:.0}%", s * 100.0)));
    }
    row.push(hitm_share(c, c.hitm_local));
    row.push(hitm_share(c, c.hitm_remote));
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
    let m = &d.model;
    let _ = writeln!(
        out,
        "\n  {}",
        s.dim(&format!(
            "measured latency, from the CPUs of a node to the memory of a node, beside the \
             unloaded latency of the {} model ({}); {}",
            m.topology, m.basis, m.units
        ))
    );
    let head = [
        ("cpu node", Align::Right),
        ("memory node", Align::Right),
        ("samples", Align::Right),
        ("measured", Align::Right),
        ("modelled", Align::Right),
    ];
    let rows: Vec<Vec<String>> = d
        .node_pairs
        .iter()
        .map(|p| {
            vec![
                p.cpu_node.to_string(),
                p.memory_node.to_string(),
                count(p.samples),
                measured_latency(p),
                modelled_latency(p),
            ]
        })
        .collect();
    table(out, s, &head, &rows);
}

/// The measured mean in cycles, and in ns when the profile has a clock.
pub(crate) fn measured_latency(p: &NodePairLatency) -> String {
    match p.measured_ns {
        Some(ns) => format!("{} cyc = {ns:.0} ns", p.mean_cycles),
        None => format!("{} cyc", p.mean_cycles),
    }
}

/// The model's latency in ns, and in cycles when the profile has a clock.
pub(crate) fn modelled_latency(p: &NodePairLatency) -> String {
    match (p.modelled_ns, p.modelled_cycles) {
        (Some(ns), Some(cyc)) => format!("{ns:.0} ns = {cyc:.0} cyc"),
        (Some(ns), None) => format!("{ns:.0} ns"),
        _ => "-".into(),
    }
}
