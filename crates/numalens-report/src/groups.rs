//! The objects of one allocation site as one row of the text report, their largest instances
//! one level down: a server's dozens of buffers from one call site would otherwise fill the
//! table with identical rows.

use std::fmt::Write;

use numalens_analyze::model::*;

use crate::analysis::{advice, count, main_user_cell, object_cells, percent, thread, thread_share};
use crate::layout::{Style, bytes};

/// Instances shown under a group's row; the rest are counted.
pub(crate) const SHOWN: usize = 3;

/// First touchers named in a group's row; the rest are counted.
const TOUCHERS_SHOWN: usize = 4;

/// The rows of the accesses table: one per group with an access; a group of one object is that
/// object's own row.
pub(crate) fn table_rows(m: &ReportModel) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    for (rank, g) in m.groups.iter().enumerate() {
        if g.accesses == 0 {
            continue;
        }
        if let Some(o) = single(m, g) {
            rows.extend(object_cells(m, rank + 1, o));
            continue;
        }
        rows.push(vec![
            (rank + 1).to_string(),
            group_name(g),
            bytes(g.size),
            count(g.accesses),
            percent(g.share),
            format!("{}/{}", count(g.reads), count(g.writes)),
            g.sharing.clone().unwrap_or_else(|| "-".into()),
            if g.instances == 1 {
                thread_share(m, g.first_toucher)
            } else {
                touchers(m, g)
            },
            main_user_cell(m, g.main_user),
            g.local_ratio.map_or("-".into(), percent),
            advice(&g.advice),
        ]);
        if g.instances == 1 {
            continue;
        }
        for i in g.largest.iter().take(SHOWN) {
            rows.push(vec![
                String::new(),
                format!("  {:#x}", i.start),
                bytes(i.size),
                count(i.accesses),
                percent(i.share),
                format!("{}/{}", count(i.reads), count(i.writes)),
                String::new(),
                thread_share(m, i.first_toucher),
                String::new(),
                i.local_ratio.map_or("-".into(), percent),
                String::new(),
            ]);
        }
        let more = g.instances.saturating_sub(SHOWN as u64);
        if more > 0 {
            let mut row = vec![String::new(); 11];
            row[1] = format!("  … {more} more");
            rows.push(row);
        }
    }
    rows
}

/// The object of a group of one, when the model lists it: shown exactly as an object.
pub(crate) fn single<'m>(m: &'m ReportModel, g: &SiteGroup) -> Option<&'m ObjectReport> {
    if g.instances != 1 {
        return None;
    }
    m.objects
        .iter()
        .find(|o| o.id == g.members[0] && o.pid == g.pid)
}

/// `name (40 instances)`, or the name alone for a group of one.
pub(crate) fn group_name(g: &SiteGroup) -> String {
    if g.instances == 1 {
        g.name.clone()
    } else {
        format!("{} ({} instances)", g.name, g.instances)
    }
}

/// `T0 ×12, T1 ×11, T2 ×9, T3 ×8, +2 threads`: how many instances each thread first touched.
pub(crate) fn touchers(m: &ReportModel, g: &SiteGroup) -> String {
    if g.first_touchers.is_empty() {
        return "-".into();
    }
    let mut text = g
        .first_touchers
        .iter()
        .take(TOUCHERS_SHOWN)
        .map(|c| format!("{} ×{}", thread(m, c.thread), c.instances))
        .collect::<Vec<_>>()
        .join(", ");
    let rest = g.first_touchers.len().saturating_sub(TOUCHERS_SHOWN);
    if rest > 0 {
        let _ = write!(text, ", +{rest} threads");
    }
    text
}

/// The group holding object `id` of process `pid`, when it has several instances.
pub(crate) fn of_object(m: &ReportModel, id: u64, pid: u32) -> Option<(usize, &SiteGroup)> {
    m.groups
        .iter()
        .enumerate()
        .find(|(_, g)| g.instances > 1 && g.pid == pid && g.members.contains(&id))
}

/// The group's block in the objects section: its sums, where it was allocated, who first
/// touched its instances, and its largest instances.
pub(crate) fn details(out: &mut String, s: Style, rank: usize, g: &SiteGroup, m: &ReportModel) {
    let resident: u64 = g.pages.by_node.iter().map(|n| n.count).sum();
    let head = format!(
        "{rank:>3}. {} {} {}",
        s.heading(&group_name(g)),
        s.dim(&format!("[{}]", g.kind)),
        bytes(g.size)
    );
    let _ = write!(
        out,
        "\n{head}: {} first touches, {} samples, {} resident pages",
        g.samples.first_touch, g.samples.total, resident
    );
    if g.weight != g.samples.total {
        let _ = write!(out, ", {} accesses", g.weight);
    }
    let _ = writeln!(out);
    let detail = |out: &mut String, label: &str, value: String| {
        let _ = writeln!(out, "       {}  {value}", s.dim(&format!("{label:<13}")));
    };
    if let Some(site) = &g.site {
        detail(
            out,
            crate::site_label(&g.kind),
            crate::text::frame(&site.location),
        );
    }
    if !g.first_touchers.is_empty() {
        detail(out, "first touched", touchers(m, g));
    }
    for (n, i) in g.largest.iter().take(SHOWN).enumerate() {
        let label = if n == 0 { "instances" } else { "" };
        detail(
            out,
            label,
            format!(
                "{:#x} {}, {} accesses",
                i.start,
                bytes(i.size),
                count(i.accesses)
            ),
        );
    }
    let more = g.instances.saturating_sub(SHOWN as u64);
    if more > 0 {
        detail(out, "", format!("… {more} more"));
    }
}
