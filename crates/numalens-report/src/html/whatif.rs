//! The what-if section: every placement policy on the placement's machine, simulated.

use std::fmt::Write;

use numalens_analyze::ReportModel;
use numalens_place::WhatIf;
use plotters::style::RGBColor;

use super::charts::{Bars, bars};
use super::text::{esc, pct};
use super::{close_section, figure, help, open_section};

pub(crate) fn what_if(out: &mut String, m: &ReportModel) {
    open_section(out, "what-if");
    let Some(w) = &m.what_if else {
        out.push_str(
            "<p class=\"note\">No what-if: the profile has no access counts (only first touches, \
             or nothing). Record with <code>--backend inst</code> (a build with <code>numalens \
             cc</code>) to see what each placement policy would give.</p>\n",
        );
        close_section(out);
        return;
    };
    let _ = writeln!(
        out,
        "<p>Each placement policy simulated on <b>{}</b> ({} nodes) over {} windows of {:.1} ms \
         (docs/SIMULATOR.md). Speedup is first touch's modelled memory time over the policy's.</p>",
        esc(&w.topology),
        w.nodes.len(),
        w.windows,
        w.window_s * 1e3
    );
    let chart = Bars {
        labels: w.policies.iter().map(label).collect(),
        values: w
            .policies
            .iter()
            .map(|r| vec![r.speedup_vs_first_touch.unwrap_or(0.0)])
            .collect(),
        series: vec![("speedup over first touch".into(), RGBColor(60, 140, 90))],
        x_desc: "speedup (modelled memory time, first touch = 1)".into(),
        log: false,
    };
    figure(
        out,
        "Policies side by side",
        &bars(&chart),
        "one bar per policy, best first; the oracle (a limit, not a policy to deploy) last",
        &help::WHAT_IF,
    );
    table(out, w);
    if w.recommended.as_deref() == Some("first-touch") {
        let _ = writeln!(
            out,
            "<p>Best policy: <b>first-touch</b>, the default: no policy gains {:.0} % or more of \
             modelled memory time.</p>",
            numalens_place::whatif::MIN_RECOMMENDED_GAIN * 100.0
        );
    } else if let Some(best) = &w.recommended {
        let _ = writeln!(
            out,
            "<p>Best policy: <b>{}</b>. <code>numalens plan PROFILE --policy {} -o plan.json</code> \
             writes it as a plan a later run applies.</p>",
            esc(best),
            esc(best)
        );
    }
    close_section(out);
}

fn label(r: &numalens_place::PolicyResult) -> String {
    match (r.policy.as_str(), r.online) {
        ("oracle", _) => "oracle (limit)".into(),
        (p, true) => format!("{p} (online)"),
        (p, false) => p.to_string(),
    }
}

fn table(out: &mut String, w: &WhatIf) {
    out.push_str(
        "<table class=\"data\"><thead><tr><th>policy</th><th>speedup</th><th>memory time</th>\
         <th>local</th><th>imbalance</th><th>max link</th><th>latency</th><th>pages migrated</th>\
         <th>bound by</th></tr></thead><tbody>\n",
    );
    for r in &w.policies {
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{:.3} ms</td><td>{}</td><td>{}</td><td>{:.0} %</td>\
             <td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&label(r)),
            r.speedup_vs_first_touch
                .map_or("-".into(), |v| format!("{v:.2}×")),
            r.modelled_time_s * 1e3,
            pct(r.local_access_ratio),
            pct(r.imbalance),
            r.max_link_utilisation * 100.0,
            r.mean_latency_ns
                .map_or("-".into(), |v| format!("{v:.0} ns")),
            r.pages_migrated,
            esc(&r.bound_by)
        );
    }
    out.push_str("</tbody></table>\n");
}
