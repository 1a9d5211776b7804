//! Where sampled accesses were served from and their measured latency, when the PMU said.

use std::fmt::Write;

use numalens_analyze::ReportModel;
use numalens_analyze::model::{DataSources, SourceCounts};

use super::text::esc;
use super::{close_section, open_section};

/// The cells after the row's name: accesses, shares of the known sources, mean latency.
fn cells(c: &SourceCounts) -> String {
    let mut row = format!("<td>{}</td>", c.known());
    for share in c.known_shares() {
        let share = share.map_or("-".into(), |s| format!("{:.0} %", s * 100.0));
        let _ = write!(row, "<td>{share}</td>");
    }
    for hitm in [c.hitm_local, c.hitm_remote] {
        let share = crate::sources::hitm_share(c, hitm).replace('%', " %");
        let _ = write!(row, "<td>{share}</td>");
    }
    let latency = c
        .mean_latency()
        .map_or("-".into(), |l| format!("{l:.0} cycles"));
    let _ = write!(row, "<td>{latency}</td>");
    row
}

const HEAD: &str = "<th>accesses</th><th>L1</th><th>L2</th><th>L3</th><th>local DRAM</th>\
                    <th>remote DRAM</th><th>remote cache</th><th>HITM local</th><th>HITM remote</th>\
                    <th>mean latency</th>";

/// The section, for profiles whose samples carry a data source (a PMU's); none otherwise.
pub(crate) fn data_sources(out: &mut String, m: &ReportModel) {
    let Some(d) = &m.data_sources else {
        return;
    };
    open_section(out, "data-sources");
    out.push_str(
        "<p>Weighted sampled accesses by where the PMU says they were served, and its measured \
         latency (cycles). Shares are of the accesses whose source is known; HITM (the line \
         was modified in another core's cache: true or false sharing) is counted under its \
         level too, and shown when the PMU gave snoop results.</p>\n",
    );
    let _ = writeln!(
        out,
        "<table class=\"data\"><thead><tr><th>object</th>{HEAD}</tr></thead><tbody>\n\
         <tr><td><b>all</b></td>{}</tr>",
        cells(&d.totals)
    );
    for o in &d.objects {
        let _ = writeln!(
            out,
            "<tr><td>{}</td>{}</tr>",
            esc(&o.name),
            cells(&o.counts)
        );
    }
    out.push_str("</tbody></table>\n");
    threads(out, d);
    node_pairs(out, d);
    close_section(out);
}

fn threads(out: &mut String, d: &DataSources) {
    let _ = writeln!(
        out,
        "<table class=\"data\"><thead><tr><th>thread</th>{HEAD}</tr></thead><tbody>"
    );
    for t in &d.threads {
        let name = t
            .logical_id
            .map_or(format!("tid {}", t.tid), |l| format!("T{l}"));
        let _ = writeln!(out, "<tr><td>{name}</td>{}</tr>", cells(&t.counts));
    }
    out.push_str("</tbody></table>\n");
}

fn node_pairs(out: &mut String, d: &DataSources) {
    if d.node_pairs.is_empty() {
        return;
    }
    let m = &d.model;
    let _ = writeln!(
        out,
        "<p>Measured latency beside the unloaded latency of the {} model ({}); {}.</p>",
        esc(&m.topology),
        esc(&m.basis),
        esc(&m.units)
    );
    out.push_str(
        "<table class=\"data\"><thead><tr><th>CPU node</th><th>memory node</th><th>samples</th>\
         <th>measured</th><th>modelled</th></tr></thead><tbody>\n",
    );
    for p in &d.node_pairs {
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            p.cpu_node,
            p.memory_node,
            p.samples,
            crate::sources::measured_latency(p),
            crate::sources::modelled_latency(p)
        );
    }
    out.push_str("</tbody></table>\n");
}
