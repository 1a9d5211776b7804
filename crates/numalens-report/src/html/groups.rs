//! A group of objects allocated at one site, as one row of the objects table: its sums, and
//! its instances in a `<details>` that opens in place, so that the table keeps one row per site
//! and still sorts.

use std::fmt::Write;

use numalens_analyze::model::{SiteGroup, ThreadShare};

use super::objects::short_site;
use super::text::{ThreadNames, bytes, count, esc, pct};

pub(crate) fn row(out: &mut String, rank: usize, g: &SiteGroup, names: &ThreadNames) {
    let share = |s: &Option<ThreadShare>| {
        s.map_or("–".to_string(), |s| {
            format!("{} ({})", names.get(s.thread), pct(Some(s.share)))
        })
    };
    let touchers = if g.instances == 1 {
        share(&g.first_toucher)
    } else if g.first_touchers.is_empty() {
        "–".to_string()
    } else {
        g.first_touchers
            .iter()
            .map(|c| format!("{} ×{}", names.get(c.thread), c.instances))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let name = if g.instances == 1 {
        esc(&g.name)
    } else {
        format!(
            "<details class=\"group\"><summary>{} <b>({} instances)</b></summary>{}</details>",
            esc(&g.name),
            g.instances,
            instances(g, names)
        )
    };
    let _ = writeln!(
        out,
        "<tr><td class=\"n\">{rank}</td><td>{name}{}</td><td>{}</td><td class=\"n\" data-v=\"{}\">{}</td>\
         <td class=\"n\" data-v=\"{}\">{}</td><td class=\"n\" data-v=\"{}\">{}</td>\
         <td class=\"n\" data-v=\"{}\">{}</td><td class=\"n\" data-v=\"{}\">{}</td>\
         <td class=\"nowrap\">{}</td><td>{}</td><td class=\"nowrap\">{}</td><td class=\"n\" data-v=\"{}\">{}</td><td>{}</td></tr>",
        short_site(g.site.as_ref()),
        esc(&g.kind),
        g.size,
        bytes(g.size),
        g.accesses,
        count(g.accesses),
        g.share,
        pct(Some(g.share)),
        g.reads,
        count(g.reads),
        g.writes,
        count(g.writes),
        esc(g.sharing.as_deref().unwrap_or("–")),
        esc(&touchers),
        esc(&share(&g.main_user)),
        g.local_ratio.unwrap_or(-1.0),
        pct(g.local_ratio),
        esc(&g.advice.join(", "))
    );
}

/// The instances the model describes, largest first, and how many more there are.
fn instances(g: &SiteGroup, names: &ThreadNames) -> String {
    let mut out = String::from("<ul class=\"instances\">");
    for i in &g.largest {
        let toucher = i.first_toucher.map_or(String::new(), |t| {
            format!(", first touched by {}", names.get(t.thread))
        });
        let _ = write!(
            out,
            "<li><code>{:#x}</code> {} · {} accesses ({}) · local {}{}</li>",
            i.start,
            bytes(i.size),
            count(i.accesses),
            pct(Some(i.share)),
            pct(i.local_ratio),
            esc(&toucher)
        );
    }
    let more = g.instances.saturating_sub(g.largest.len() as u64);
    if more > 0 {
        let _ = write!(out, "<li>… {more} more</li>");
    }
    out.push_str("</ul>");
    out
}
