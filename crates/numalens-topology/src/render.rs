//! Human-readable rendering of a topology for the terminal.
//!
//! Summaries rather than per-CPU dumps, so that a 384-CPU machine stays readable.

use std::collections::BTreeSet;
use std::fmt::Write;

use crate::cpulist::format_cpulist;
use crate::{LatencyUnit, Provenance, ProvenanceKind, Topology};

mod layout;
use layout::{matrix, note, number, plural};
use numalens_term::{Align, Style, section, table};

/// Longest CPU list shown in the node table before it is cut (odd numberings get long).
const MAX_CPULIST: usize = 40;

/// The topology as aligned text tables; ANSI colour only when `color` is true.
pub fn render_text(t: &Topology, color: bool) -> String {
    let s = Style { color };
    let mut out = String::new();
    header(&mut out, t, s);
    nodes(&mut out, t, s);
    cpus(&mut out, t, s);
    distances(&mut out, t, s);
    latency(&mut out, t, s);
    links(&mut out, t, s);
    routes(&mut out, t, s);
    out
}

/// A provenance kind's name; assumptions stand out so nobody mistakes them for measurements.
fn kind_label(s: Style, kind: ProvenanceKind) -> String {
    let name = kind_name(kind);
    match kind {
        ProvenanceKind::Assumed => s.paint("33", name),
        ProvenanceKind::DerivedFromSlit | ProvenanceKind::Derived => s.paint("36", name),
        _ => name.to_string(),
    }
}

fn kind_name(kind: ProvenanceKind) -> &'static str {
    match kind {
        ProvenanceKind::Measured => "measured",
        ProvenanceKind::Published => "published",
        ProvenanceKind::Assumed => "assumed",
        ProvenanceKind::DerivedFromSlit => "derived-from-slit",
        ProvenanceKind::Derived => "derived",
    }
}

fn provenance(s: Style, p: &Provenance) -> String {
    format!("{}: {}", kind_label(s, p.kind), p.source)
}

fn header(out: &mut String, t: &Topology, s: Style) {
    let _ = write!(out, "{}", s.heading(&t.name));
    if let Some(d) = &t.description {
        let _ = write!(out, " — {d}");
    }
    let _ = writeln!(out, "\n  source: {}", provenance(s, &t.source));
    if let Some(ghz) = &t.cpu_ghz {
        let _ = writeln!(
            out,
            "  clock:  {} GHz ({})",
            ghz.value,
            provenance(s, &ghz.provenance)
        );
    }
}

fn nodes(out: &mut String, t: &Topology, s: Style) {
    let rows: Vec<Vec<String>> = t
        .nodes
        .iter()
        .map(|n| {
            vec![
                n.id.to_string(),
                short_cpulist(&n.cpus),
                n.cpus.len().to_string(),
                n.memory_bytes.map_or("-".into(), |b| {
                    format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64)
                }),
                n.memory_kind.clone().unwrap_or_else(|| "-".into()),
                n.memory_bandwidth_mbps.as_ref().map_or("-".into(), |q| {
                    format!(
                        "{} MB/s ({})",
                        number(q.value),
                        kind_label(s, q.provenance.kind)
                    )
                }),
            ]
        })
        .collect();
    section(out, s, &format!("Nodes ({})", t.nodes.len()));
    let head = [
        ("node", Align::Right),
        ("CPUs", Align::Left),
        ("#CPUs", Align::Right),
        ("memory", Align::Right),
        ("kind", Align::Left),
        ("MC bandwidth", Align::Left),
    ];
    table(out, s, &head, &rows);
}

fn short_cpulist(cpus: &[u32]) -> String {
    if cpus.is_empty() {
        return "- (memory only)".into();
    }
    let text = format_cpulist(cpus);
    if text.chars().count() <= MAX_CPULIST {
        return text;
    }
    let cut: String = text.chars().take(MAX_CPULIST).collect();
    format!("{}…", &cut[..cut.rfind(',').unwrap_or(cut.len())])
}

fn cpus(out: &mut String, t: &Topology, s: Style) {
    section(out, s, "CPUs");
    if t.cpus.is_empty() {
        let _ = writeln!(
            out,
            "  {} logical CPUs; package/core layout not known",
            t.cpu_count()
        );
        return;
    }
    let packages: BTreeSet<u32> = t.cpus.iter().map(|c| c.package).collect();
    let cores: BTreeSet<(u32, u32)> = t.cpus.iter().map(|c| (c.package, c.core)).collect();
    let llcs: BTreeSet<u32> = t.cpus.iter().filter_map(|c| c.llc).collect();
    let smt = cores
        .iter()
        .map(|&(p, c)| {
            t.cpus
                .iter()
                .filter(|x| x.package == p && x.core == c)
                .count()
        })
        .max()
        .unwrap_or(1);
    let llc = if llcs.is_empty() {
        "last-level cache not known".to_string()
    } else {
        plural(llcs.len(), "last-level cache", "last-level caches")
    };
    let _ = writeln!(
        out,
        "  {}: {}, {}, {} per core, {llc}",
        plural(t.cpus.len(), "logical CPU", "logical CPUs"),
        plural(packages.len(), "package", "packages"),
        plural(cores.len(), "core", "cores"),
        plural(smt, "thread", "threads"),
    );
    let missing = t.cpu_count().saturating_sub(t.cpus.len());
    if missing > 0 {
        let _ = writeln!(
            out,
            "  {}",
            s.dim(&format!(
                "{missing} CPUs of the nodes have no layout (offline?)"
            ))
        );
    }
}

fn distances(out: &mut String, t: &Topology, s: Style) {
    let Some(d) = &t.distances else {
        section(out, s, "Distances");
        let _ = writeln!(out, "  {}", s.dim("not known"));
        return;
    };
    section(out, s, "Distances (SLIT, 10 = local)");
    let rows = d
        .values
        .iter()
        .map(|r| r.iter().map(u32::to_string).collect())
        .collect();
    matrix(out, t, s, "from\\to", rows);
    note(out, s, &provenance(s, &d.provenance));
}

fn latency(out: &mut String, t: &Topology, s: Style) {
    let Some(lat) = &t.latency else {
        section(out, s, "Latency");
        let _ = writeln!(
            out,
            "  {}",
            s.dim("not known; a SLIT-derived estimate needs a stated local latency")
        );
        return;
    };
    let unit = match lat.unit {
        LatencyUnit::Ns => "ns",
        LatencyUnit::Cycles => "cycles",
    };
    section(
        out,
        s,
        &format!("Latency ({unit}, rows = CPU node, columns = memory node)"),
    );
    let rows = lat
        .values
        .iter()
        .map(|r| r.iter().map(|&v| number(v)).collect())
        .collect();
    matrix(out, t, s, "cpu\\mem", rows);
    match &lat.entry_provenance {
        None => note(out, s, &provenance(s, &lat.provenance)),
        Some(entries) => {
            // List each distinct provenance once rather than per entry.
            let mut seen = Vec::new();
            for p in entries.iter().flatten() {
                if !seen.contains(&p) {
                    seen.push(p);
                    note(out, s, &provenance(s, p));
                }
            }
        }
    }
    if let (LatencyUnit::Cycles, Some((ns, _))) = (lat.unit, t.latency_ns()) {
        let local: Vec<String> = ns.iter().enumerate().map(|(i, r)| number(r[i])).collect();
        let distinct: BTreeSet<String> = local.into_iter().collect();
        let list: Vec<String> = distinct.into_iter().collect();
        note(out, s, &format!("local latency in ns: {}", list.join(", ")));
    }
}

fn links(out: &mut String, t: &Topology, s: Style) {
    if t.links.is_empty() {
        return;
    }
    section(out, s, &format!("Links ({})", t.links.len()));
    let rows: Vec<Vec<String>> = t
        .links
        .iter()
        .map(|l| {
            vec![
                format!("{}–{}", l.a, l.b),
                l.bandwidth_mbps
                    .as_ref()
                    .map_or("-".into(), |q| format!("{} MB/s", number(q.value))),
                l.width_bits.map_or("-".into(), |w| format!("{w}-bit")),
                kind_label(s, l.provenance.kind),
            ]
        })
        .collect();
    let head = [
        ("link", Align::Left),
        ("bandwidth", Align::Right),
        ("width", Align::Right),
        ("link map", Align::Left),
    ];
    table(out, s, &head, &rows);
    let mut seen = Vec::new();
    for p in t
        .links
        .iter()
        .flat_map(|l| {
            [
                Some(&l.provenance),
                l.bandwidth_mbps.as_ref().map(|q| &q.provenance),
            ]
        })
        .flatten()
    {
        if !seen.contains(&p) {
            seen.push(p);
            note(out, s, &provenance(s, p));
        }
    }
}

/// Multi-hop and asymmetric routes, one line per source node.
fn routes(out: &mut String, t: &Topology, s: Style) {
    if t.links.is_empty() {
        return;
    }
    let ids = t.node_ids();
    let mut lines = Vec::new();
    for &from in &ids {
        let far: Vec<String> = ids
            .iter()
            .filter_map(|&to| {
                let path = t.route(from, to)?;
                let asym = t.hops(to, from) != Some(path.len() as u32 - 1);
                (path.len() > 2 || asym).then(|| {
                    let via: Vec<String> = path.iter().map(u32::to_string).collect();
                    format!(
                        "{to} ({}{})",
                        via.join("→"),
                        if asym { ", asymmetric" } else { "" }
                    )
                })
            })
            .collect();
        if !far.is_empty() {
            lines.push(format!("{from} → {}", far.join(", ")));
        }
    }
    section(out, s, "Routes over more than one link, or asymmetric");
    if lines.is_empty() {
        let _ = writeln!(out, "  {}", s.dim("none: every pair is one link apart"));
    }
    for line in lines {
        let _ = writeln!(out, "  {line}");
    }
    for r in &t.routes {
        note(
            out,
            s,
            &format!(
                "route {}→{}: {}",
                r.from,
                r.to,
                provenance(s, &r.provenance)
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::presets;

    #[test]
    fn renders_every_preset_without_colour_codes() {
        for (name, _) in presets::list() {
            let text = render_text(&presets::preset(name).unwrap(), false);
            assert!(!text.contains('\x1b'), "{name}");
            assert!(text.contains("Distances"), "{name}");
            assert!(
                text.lines().all(|l| l.chars().count() < 200),
                "{name}: a line is too long"
            );
        }
    }

    #[test]
    fn colour_only_when_asked() {
        let t = presets::preset("machine-c").unwrap();
        assert!(render_text(&t, true).contains("\x1b[1m"));
    }

    #[test]
    fn machine_c_shows_its_asymmetric_route() {
        let text = render_text(&presets::preset("machine-c").unwrap(), false);
        assert!(text.contains("7 (3→4→7, asymmetric)"), "{text}");
        assert!(text.contains("Latency (cycles"), "{text}");
    }

    #[test]
    fn big_machines_stay_summarised() {
        let text = render_text(&presets::preset("epyc-genoa-2s-nps4").unwrap(), false);
        assert!(
            text.contains(
                "384 logical CPUs: 2 packages, 192 cores, 2 threads per core, 24 last-level caches"
            ),
            "{text}"
        );
        assert!(text.lines().count() < 60, "{text}");
    }

    #[test]
    fn long_cpulists_are_cut_at_a_comma() {
        let every_other: Vec<u32> = (0..200).step_by(2).collect();
        let text = short_cpulist(&every_other);
        assert!(
            text.ends_with('…') && text.chars().count() <= MAX_CPULIST + 1,
            "{text}"
        );
    }
}
