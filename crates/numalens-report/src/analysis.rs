//! The analysis part of the text report: findings, the objects table, the placement and the
//! communication summary.

use std::fmt::Write;

use numalens_analyze::FindingEntry;
use numalens_analyze::model::*;

use crate::layout::{Align, Style, bytes, section, table};

/// `T3`, or `tid 1234` for a thread missing from the threads table (by model position).
pub(crate) fn thread(m: &ReportModel, position: usize) -> String {
    m.threads.get(position).map_or("?".into(), |t| {
        t.logical_id
            .map_or(format!("tid {}", t.tid), |l| format!("T{l}"))
    })
}

pub(crate) fn percent(x: f64) -> String {
    format!("{:.0}%", 100.0 * x)
}

/// Large counts shortened: `1234`, `12.3k`, `4.5M`, `6.7G`.
pub(crate) fn count(n: u64) -> String {
    match n {
        0..10_000 => n.to_string(),
        10_000..1_000_000 => format!("{:.1}k", n as f64 / 1e3),
        1_000_000..1_000_000_000 => format!("{:.1}M", n as f64 / 1e6),
        _ => format!("{:.1}G", n as f64 / 1e9),
    }
}

pub(crate) fn findings(out: &mut String, s: Style, m: &ReportModel) {
    section(
        out,
        s,
        &format!(
            "Findings ({}{}, most costly first)",
            m.findings.len(),
            if m.finding_groups.is_empty() {
                String::new()
            } else {
                format!(" in {} entries", m.finding_entries().len())
            }
        ),
    );
    if m.findings.is_empty() {
        let why = if m.analysis.limits.is_some() {
            "none can be drawn from page faults alone (see above): this is not a clean bill"
        } else if m.analysis.accesses == 0 {
            "no accesses to analyse (the profile has no access samples or page counts)"
        } else {
            "nothing wrong found in objects with at least 1% of the accesses"
        };
        let _ = writeln!(out, "  {}", s.dim(why));
        return;
    }
    for (rank, entry) in m.finding_entries().into_iter().enumerate() {
        match entry {
            FindingEntry::Single(f) => {
                finding(out, s, &format!("{:>3}.", rank + 1), &m.findings[f])
            }
            FindingEntry::Group(g) => finding_group(out, s, rank + 1, m, &m.finding_groups[g]),
        }
    }
}

/// A group: its rule, function and lines, fix and combined cost, then each member one level down.
fn finding_group(out: &mut String, s: Style, rank: usize, m: &ReportModel, g: &FindingGroup) {
    let _ = writeln!(out, "\n{:>3}. {}", rank, s.warn(&g.summary));
    let line = |out: &mut String, label: &str, text: &str| {
        let _ = writeln!(out, "       {}  {text}", s.dim(&format!("{label:<9}")));
    };
    line(out, "fix", &format!("{} ({})", g.fix, g.advice));
    line(out, "why", &g.why);
    line(out, "cost", &cost_sentence(&g.cost, false));
    line(
        out,
        "instances",
        &format!("{}, most costly first:", g.members.len()),
    );
    for (i, &f) in g.members.iter().enumerate() {
        member(out, s, &format!("{}.{}", rank, i + 1), &m.findings[f]);
    }
}

/// One member of a group: its object, site, evidence, what it rests on and its own cost.
fn member(out: &mut String, s: Style, rank: &str, f: &Finding) {
    let _ = writeln!(
        out,
        "       {rank:>5} {} {}",
        s.heading(&f.object.name),
        s.dim(&format!("[{}]", f.object.kind))
    );
    let line = |out: &mut String, label: &str, text: &str| {
        let _ = writeln!(
            out,
            "             {}  {text}",
            s.dim(&format!("{label:<9}"))
        );
    };
    if let Some(site) = &f.object.site {
        line(out, "site", site);
    }
    line(out, "evidence", &f.summary);
    if let Some(basis) = &f.rests_on {
        line(out, "rests on", basis);
    }
    line(out, "cost", &cost_sentence(&f.cost, f.is_measured()));
    if let Some(p) = &f.predicted {
        let sentence = crate::whatif::prediction_sentence(&f.object.name, p);
        line(out, "predicted", &sentence);
    }
}

fn cost_sentence(c: &Cost, measured: bool) -> String {
    format!(
        "{} accesses ({} of all{}), {} remote {}",
        count(c.accesses),
        percent(c.share),
        if measured { " with a known source" } else { "" },
        count(c.remote),
        if measured {
            "as the PMU measured"
        } else {
            "under the placement"
        }
    )
}

fn finding(out: &mut String, s: Style, rank: &str, f: &Finding) {
    let _ = writeln!(
        out,
        "\n{rank} {} {} {}",
        s.warn(&f.id),
        s.heading(&f.object.name),
        s.dim(&format!("[{}]", f.object.kind))
    );
    let line = |out: &mut String, label: &str, text: &str| {
        let _ = writeln!(out, "       {}  {text}", s.dim(&format!("{label:<9}")));
    };
    if let Some(site) = &f.object.site {
        let label = if f.object.kind == "static" {
            "defined"
        } else {
            "site"
        };
        line(out, label, site);
    }
    line(out, "evidence", &f.summary);
    line(out, "fix", &format!("{} ({})", f.fix, f.advice));
    line(out, "why", &f.why);
    if let Some(basis) = &f.rests_on {
        line(out, "rests on", basis);
    }
    line(out, "cost", &cost_sentence(&f.cost, f.is_measured()));
    if let Some(p) = &f.predicted {
        line(
            out,
            "predicted",
            &crate::whatif::prediction_sentence(&f.object.name, p),
        );
    }
}

pub(crate) fn objects_table(out: &mut String, s: Style, m: &ReportModel) {
    let rows: Vec<Vec<String>> = if m.groups.is_empty() {
        // A model written before objects were grouped.
        m.objects
            .iter()
            .enumerate()
            .filter_map(|(rank, o)| object_cells(m, rank + 1, o))
            .collect()
    } else {
        crate::groups::table_rows(m)
    };
    if rows.is_empty() {
        return;
    }
    let (title, counted) = if m.analysis.limits.is_some() {
        (
            "Object page faults (first toucher with its share; use and sharing unknown: see above)",
            "faults",
        )
    } else {
        (
            "Object accesses (reads/writes; first toucher and main user with their share)",
            "accesses",
        )
    };
    section(out, s, title);
    let head = [
        ("#", Align::Right),
        ("object", Align::Left),
        ("size", Align::Right),
        (counted, Align::Right),
        ("share", Align::Right),
        ("R/W", Align::Right),
        ("sharing", Align::Left),
        ("first toucher", Align::Left),
        ("main user", Align::Left),
        ("LAR", Align::Right),
        ("advice", Align::Left),
    ];
    table(out, s, &head, &rows);
}

/// An object's row of the accesses table; none without an access.
pub(crate) fn object_cells(m: &ReportModel, rank: usize, o: &ObjectReport) -> Option<Vec<String>> {
    let a = o.access.as_ref()?;
    Some(vec![
        rank.to_string(),
        o.name.clone(),
        bytes(o.size),
        count(a.accesses),
        percent(a.share),
        format!("{}/{}", count(a.reads), count(a.writes)),
        a.sharing.clone(),
        thread_share(m, a.first_toucher),
        main_user_cell(m, a.main_user),
        a.local_ratio.map_or("-".into(), percent),
        advice(&a.advice),
    ])
}

/// How much of the run exact counts cover, in one sentence.
pub(crate) fn coverage_sentence(c: &Coverage) -> String {
    if c.uncounted_pages == 0 {
        return format!(
            "counted accesses on every one of the {} pages the program first touched",
            count(c.touched_pages)
        );
    }
    let counted = c.touched_pages.saturating_sub(c.uncounted_pages);
    let listed: Vec<String> = c
        .uncounted
        .iter()
        .map(|o| format!("{} {}", o.name, count(o.pages)))
        .collect();
    let rest = c.uncounted_pages - c.uncounted.iter().map(|o| o.pages).sum::<u64>();
    let more = if rest > 0 {
        format!(", {} more", count(rest))
    } else {
        String::new()
    };
    format!(
        "counted accesses on {:.1}% of the {} pages the program first touched; none on {} ({}{more}): \
         accesses the compiler did not instrument (stack arrays it kept local, code built without \
         `numalens cc`) are not in the counts",
        100.0 * counted as f64 / c.touched_pages as f64,
        count(c.touched_pages),
        count(c.uncounted_pages),
        listed.join(", ")
    )
}

/// The main user's cell: `unknown` where the profile cannot tell one (page faults alone).
pub(crate) fn main_user_cell(m: &ReportModel, t: Option<ThreadShare>) -> String {
    if m.analysis.limits.is_some() {
        numalens_analyze::UNKNOWN.into()
    } else {
        thread_share(m, t)
    }
}

/// `T1 75%`, or `-`.
pub(crate) fn thread_share(m: &ReportModel, t: Option<ThreadShare>) -> String {
    t.map_or("-".into(), |t| {
        format!("{} {}", thread(m, t.thread), percent(t.share))
    })
}

pub(crate) fn advice(ids: &[String]) -> String {
    if ids.is_empty() {
        "-".into()
    } else {
        ids.join(", ")
    }
}

pub(crate) fn placement(out: &mut String, s: Style, m: &ReportModel) {
    let p = &m.placement;
    if p.nodes.is_empty() {
        return;
    }
    section(out, s, &format!("Placement ({} on {})", p.mode, p.topology));
    if m.analysis.limits.is_some() {
        let _ = writeln!(
            out,
            "  {}",
            s.dim("counts are page faults: under first touch each is local by construction")
        );
    }
    let _ = writeln!(out, "  {}", s.dim(&p.reason));
    let _ = writeln!(out, "  {}", s.dim(&format!("threads: {}", p.thread_rule)));
    let _ = writeln!(out, "  {}", s.dim(&format!("pages: {}", p.page_rule)));
    let lar = p.local_ratio.map_or("-".into(), percent);
    let imbalance = p.imbalance.map_or("-".into(), |x| format!("{x:.2}"));
    let _ = writeln!(
        out,
        "  local access ratio {lar} ({} local, {} remote, {} of unknown node); load imbalance (stddev/mean) {imbalance}",
        count(p.local),
        count(p.remote),
        count(p.unknown)
    );
    let mut head = vec![
        ("node", Align::Right),
        ("threads", Align::Right),
        ("pages", Align::Right),
    ];
    head.push(("served", Align::Right));
    let labels: Vec<String> = p.nodes.iter().map(|n| format!("to {n}")).collect();
    head.extend(labels.iter().map(|l| (l.as_str(), Align::Right)));
    let rows: Vec<Vec<String>> = p
        .load
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let mut row = vec![
                l.node.to_string(),
                l.threads.to_string(),
                l.pages.to_string(),
                count(l.accesses),
            ];
            row.extend(p.traffic[i].iter().map(|n| count(*n)));
            row
        })
        .collect();
    table(out, s, &head, &rows);
}

pub(crate) fn communication(out: &mut String, s: Style, m: &ReportModel) {
    let c = &m.communication;
    let mut pairs: Vec<(u64, usize, usize)> = Vec::new();
    for (i, row) in c.values.iter().enumerate() {
        for (j, n) in row.iter().enumerate().skip(i + 1) {
            if *n > 0 {
                pairs.push((*n, i, j));
            }
        }
    }
    if pairs.is_empty() {
        return;
    }
    pairs.sort_by(|a, b| b.cmp(a));
    let name = |cell: usize| thread(m, cell * c.threads_per_cell);
    let list: Vec<String> = pairs
        .iter()
        .take(8)
        .map(|(n, i, j)| format!("{}-{} {}", name(*i), name(*j), count(*n)))
        .collect();
    section(
        out,
        s,
        &format!(
            "Communication (threads sharing {} blocks, most first)",
            bytes(c.block_size)
        ),
    );
    let _ = writeln!(out, "  {}", list.join(", "));
}
