//! The objects: overview charts and the sortable table, then each of the most accessed objects
//! in detail with TABARNAC's views.

use std::fmt::Write;

use numalens_analyze::ReportModel;
use numalens_analyze::model::{ObjectAccess, ObjectReport, SiteReport};
use plotters::style::RGBColor;

use super::charts::{Bars, bars};
use super::text::{ThreadNames, bytes, count, esc, pct, short};
use super::{close_section, figure, help, limits, open_section};

/// The id of an object's detail block in the page.
pub(crate) fn anchor(id: u64, pid: u32) -> String {
    format!("object-{pid}-{id}")
}

pub(crate) fn overview(out: &mut String, m: &ReportModel) {
    open_section(out, "objects");
    let accessed: Vec<(&ObjectReport, &ObjectAccess)> = m
        .objects
        .iter()
        .filter_map(|o| o.access.as_ref().map(|a| (o, a)))
        .take(limits::BAR_OBJECTS)
        .collect();
    if !accessed.is_empty() {
        let page = m.profile.page_size.max(1) as f64;
        let labels: Vec<String> = accessed.iter().map(|(o, _)| short(&o.name, 40)).collect();
        let sizes = Bars {
            labels: labels.clone(),
            values: accessed
                .iter()
                .map(|(o, _)| vec![o.size as f64 / page])
                .collect(),
            series: vec![("size in pages".into(), RGBColor(90, 110, 160))],
            x_desc: "pages (logarithmic)".into(),
            log: true,
        };
        let rw = Bars {
            labels,
            values: accessed
                .iter()
                .map(|(_, a)| vec![a.reads as f64, a.writes as f64, a.unknown_direction as f64])
                .collect(),
            series: vec![
                ("reads".into(), RGBColor(70, 130, 180)),
                ("writes".into(), RGBColor(200, 100, 0)),
                ("unknown direction".into(), RGBColor(170, 170, 170)),
            ],
            x_desc: "accesses".into(),
            log: false,
        };
        let note = format!("the {} most accessed objects", accessed.len());
        figure(
            out,
            "Size of each object",
            &bars(&sizes),
            &note,
            &help::SIZES,
        );
        figure(
            out,
            "Reads and writes per object",
            &bars(&rw),
            &note,
            &help::READ_WRITE,
        );
    }
    table(out, m);
    close_section(out);
}

const COLUMNS: [(&str, &str); 13] = [
    ("#", "n"),
    ("object", "s"),
    ("kind", "s"),
    ("size", "n"),
    ("accesses", "n"),
    ("share", "n"),
    ("reads", "n"),
    ("writes", "n"),
    ("sharing", "s"),
    ("first toucher", "s"),
    ("main user", "s"),
    ("local", "n"),
    ("advice", "s"),
];

fn table(out: &mut String, m: &ReportModel) {
    let names = ThreadNames::new(m);
    let _ = write!(
        out,
        "<p>{} objects with an access or a resident page; the table lists {}. Click a column \
         heading to sort.</p>\n<div class=\"scroll\"><table class=\"data sortable\"><thead><tr>",
        count(m.totals.objects_ranked),
        count(m.objects.len().min(limits::OBJECT_ROWS) as u64)
    );
    for (name, kind) in COLUMNS {
        let _ = write!(out, "<th data-type=\"{kind}\">{name}</th>");
    }
    out.push_str("</tr></thead><tbody>\n");
    if m.groups.is_empty() {
        // A model written before objects were grouped.
        for (rank, o) in m.objects.iter().take(limits::OBJECT_ROWS).enumerate() {
            row(out, rank + 1, o, rank, &names);
        }
    } else {
        for (rank, g) in m.groups.iter().take(limits::OBJECT_ROWS).enumerate() {
            match crate::groups::single(m, g) {
                Some(o) => {
                    let listed = m.objects.iter().position(|x| std::ptr::eq(x, o));
                    row(out, rank + 1, o, listed.unwrap_or(usize::MAX), &names);
                }
                None => super::groups::row(out, rank + 1, g, &names),
            }
        }
    }
    out.push_str("</tbody></table></div>\n");
}

/// `listed`: the object's position in the model's objects, which decides whether it has a
/// detail block to link to.
fn row(out: &mut String, rank: usize, o: &ObjectReport, listed: usize, names: &ThreadNames) {
    let detailed = listed < limits::DETAILED_OBJECTS && o.access.is_some();
    let name = if detailed {
        format!("<a href=\"#{}\">{}</a>", anchor(o.id, o.pid), esc(&o.name))
    } else {
        esc(&o.name)
    };
    let site = short_site(o.site.as_ref());
    let _ = write!(
        out,
        "<tr><td class=\"n\">{rank}</td><td>{name}{site}</td><td>{}</td><td class=\"n\" data-v=\"{}\">{}</td>",
        esc(&o.kind),
        o.size,
        bytes(o.size)
    );
    match &o.access {
        Some(a) => {
            let share = |s: &Option<numalens_analyze::model::ThreadShare>| {
                s.map_or("–".to_string(), |s| {
                    format!("{} ({})", names.get(s.thread), pct(Some(s.share)))
                })
            };
            let _ = write!(
                out,
                "<td class=\"n\" data-v=\"{}\">{}</td><td class=\"n\" data-v=\"{}\">{}</td>\
                 <td class=\"n\" data-v=\"{}\">{}</td><td class=\"n\" data-v=\"{}\">{}</td>\
                 <td class=\"nowrap\">{}</td><td class=\"nowrap\">{}</td><td class=\"nowrap\">{}</td><td class=\"n\" data-v=\"{}\">{}</td><td>{}</td>",
                a.accesses,
                count(a.accesses),
                a.share,
                pct(Some(a.share)),
                a.reads,
                count(a.reads),
                a.writes,
                count(a.writes),
                esc(&a.sharing),
                esc(&share(&a.first_toucher)),
                esc(&share(&a.main_user)),
                a.local_ratio.unwrap_or(-1.0),
                pct(a.local_ratio),
                esc(&a.advice.join(", "))
            );
        }
        None => out.push_str(
            "<td class=\"n\" data-v=\"0\">0</td><td class=\"n\" data-v=\"0\">–</td>\
             <td class=\"n\" data-v=\"0\">0</td><td class=\"n\" data-v=\"0\">0</td><td>–</td>\
             <td>–</td><td>–</td><td class=\"n\" data-v=\"-1\">–</td><td></td>",
        ),
    }
    out.push_str("</tr>\n");
}

/// The allocation site under an object's name: `function file:line` with the file's base name
/// (the whole path in the tooltip).
pub(crate) fn short_site(site: Option<&SiteReport>) -> String {
    let Some(full) = site_text(site) else {
        return String::new();
    };
    let f = site.map(|s| &s.location);
    let file = f
        .and_then(|f| f.file.as_deref())
        .map(|p| p.rsplit('/').next().unwrap_or(p));
    let line = f.and_then(|f| f.line);
    let function = f
        .and_then(|f| f.function.as_deref())
        .map(numalens_analyze::short_function_name);
    let brief = match (function, file) {
        (Some(func), Some(file)) => match line {
            Some(line) => format!("{func} {file}:{line}"),
            None => format!("{func} {file}"),
        },
        // A static's definition outside any function.
        (None, Some(file)) => match line {
            Some(line) => format!("{file}:{line}"),
            None => file.to_string(),
        },
        _ => full.clone(),
    };
    format!(
        "<span class=\"site\" title=\"{}\">{}</span>",
        esc(&full),
        esc(&brief)
    )
}

/// `function file:line` of an allocation site, as far as it is known; `file:line` of a static's
/// definition outside any function.
pub(crate) fn site_text(site: Option<&SiteReport>) -> Option<String> {
    let f = &site?.location;
    let mut s = match (&f.function, &f.file) {
        (Some(function), _) => format!("{function} "),
        (None, Some(_)) => String::new(),
        (None, None) => format!("{}+{:#x}", f.module, f.offset),
    };
    if let Some(file) = &f.file {
        s.push_str(file);
        if let Some(line) = f.line {
            let _ = write!(s, ":{line}");
        }
    }
    Some(s.trim_end().to_string())
}

pub(crate) fn details(out: &mut String, m: &ReportModel) {
    open_section(out, "object-details");
    let names = ThreadNames::new(m);
    let detailed: Vec<(&ObjectReport, &ObjectAccess)> = m
        .objects
        .iter()
        .take(limits::DETAILED_OBJECTS)
        .filter_map(|o| o.access.as_ref().map(|a| (o, a)))
        .collect();
    if detailed.is_empty() {
        out.push_str("<p class=\"note\">No object has a recorded access.</p>\n");
    } else {
        let _ = writeln!(
            out,
            "<p>The {} most accessed objects, each with TABARNAC's distribution and first-touch \
             views. Click an object to open or close it.</p>",
            detailed.len()
        );
    }
    for (i, (o, a)) in detailed.into_iter().enumerate() {
        let _ = writeln!(
            out,
            "<details class=\"object\" id=\"{}\"{}><summary><b>{}</b> <span class=\"kind\">{}</span> \
             {} · {} accesses ({}) · {}</summary>",
            anchor(o.id, o.pid),
            if i == 0 { " open" } else { "" },
            esc(&o.name),
            esc(&o.kind),
            bytes(o.size),
            count(a.accesses),
            pct(Some(a.share)),
            esc(&a.sharing)
        );
        object_facts(out, o, a, &names);
        super::matrices::object_views(out, m, o, a, &names);
        out.push_str("</details>\n");
    }
    close_section(out);
}

/// Users named in an object's facts, most accesses first.
const USERS_LISTED: usize = 12;

fn object_facts(out: &mut String, o: &ObjectReport, a: &ObjectAccess, names: &ThreadNames) {
    out.push_str("<table class=\"facts\">");
    let frames = o.site.as_ref().map_or(String::new(), |s| {
        let list: Vec<String> = s
            .frames
            .iter()
            .map(|f| {
                let func = f
                    .function
                    .clone()
                    .unwrap_or_else(|| format!("{:#x}", f.offset));
                let at = match (&f.file, f.line) {
                    (Some(file), Some(line)) => format!(" {file}:{line}"),
                    (Some(file), None) => format!(" {file}"),
                    _ => format!(" ({})", f.module),
                };
                format!("<li><code>{}{}</code></li>", esc(&func), esc(&at))
            })
            .collect();
        format!("<ol class=\"frames\">{}</ol>", list.join(""))
    });
    let site = site_text(o.site.as_ref())
        .map_or("unknown".into(), |s| format!("<code>{}</code>", esc(&s)));
    if o.kind == "static" {
        // One line of the source, no call stack, no thread: the loader made it.
        super::summary::fact(out, crate::site_label(&o.kind), &site);
    } else {
        super::summary::fact(out, crate::site_label(&o.kind), &format!("{site}{frames}"));
        let by = ThreadNames::logical(o.alloc_thread);
        super::summary::fact(out, "allocated by", &esc(&by));
    }
    super::summary::fact(
        out,
        "address",
        &format!(
            "{:#x}, {} ({} pages with accesses), pid {}",
            o.start,
            bytes(o.size),
            count(a.pages),
            o.pid
        ),
    );
    let rw = format!(
        "{} reads, {} writes, {} of unknown direction",
        count(a.reads),
        count(a.writes),
        count(a.unknown_direction)
    );
    super::summary::fact(out, "accesses", &rw);
    let classes: Vec<String> = a
        .classes
        .iter()
        .map(|c| {
            format!(
                "{} {} pages ({} accesses)",
                esc(&c.class),
                count(c.pages),
                count(c.accesses)
            )
        })
        .collect();
    super::summary::fact(
        out,
        "sharing",
        &format!("<b>{}</b>; {}", esc(&a.sharing), classes.join(", ")),
    );
    let share = |s: Option<numalens_analyze::model::ThreadShare>, what: &str| {
        s.map_or("–".to_string(), |s| {
            format!(
                "{} ({} {what}, {})",
                names.get(s.thread),
                count(s.count),
                pct(Some(s.share))
            )
        })
    };
    super::summary::fact(out, "first toucher", &esc(&share(a.first_toucher, "pages")));
    if a.sharing == numalens_analyze::UNKNOWN {
        // Page faults alone: who uses the pages, hence any mismatch, is not known.
        super::summary::fact(out, "main user", "unknown (page faults alone)");
    } else {
        super::summary::fact(out, "main user", &esc(&share(a.main_user, "accesses")));
        let mismatch = format!(
            "{} pages used mostly by another thread than their first toucher ({} accesses)",
            count(a.mismatched_pages),
            count(a.mismatched_accesses)
        );
        super::summary::fact(out, "first-touch mismatch", &mismatch);
    }
    let local = format!(
        "{} ({} remote accesses)",
        pct(a.local_ratio),
        count(a.remote)
    );
    super::summary::fact(out, "local access ratio", &local);
    let advice = if a.advice.is_empty() {
        "none".to_string()
    } else {
        esc(&a.advice.join(", "))
    };
    super::summary::fact(out, "advice", &advice);
    let users: Vec<String> = a
        .users
        .iter()
        .take(USERS_LISTED)
        .map(|u| format!("{} {}", names.get(u.thread), count(u.accesses)))
        .collect();
    let more = match a.users.len() - users.len() {
        0 => String::new(),
        n => format!(" and {n} more"),
    };
    super::summary::fact(out, "users", &format!("{}{more}", esc(&users.join(", "))));
    out.push_str("</table>\n");
}
