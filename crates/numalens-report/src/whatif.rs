//! The what-if table: every policy on one machine, side by side, best first.

use std::fmt::Write;

use numalens_place::WhatIf;
use numalens_place::fixes::Prediction;
use numalens_term::{Align, Style, escape_control, section, table};

/// The table `numalens simulate` prints.
pub fn render_what_if(w: &WhatIf, color: bool) -> String {
    let s = Style { color };
    let mut out = String::new();
    section(
        &mut out,
        s,
        &format!(
            "What-if on {} ({} nodes): {} threads, {} pages, {} windows of {}",
            escape_control(&w.topology),
            w.nodes.len(),
            w.threads,
            w.pages,
            w.windows,
            seconds(w.window_s)
        ),
    );
    what_if_table(&mut out, s, w);
    if let Some(best) = &w.recommended {
        let r = w.policies.iter().find(|r| &r.policy == best);
        let speedup = r.and_then(|r| r.speedup_vs_first_touch).unwrap_or(1.0);
        if best == "first-touch" {
            let _ = writeln!(
                out,
                "\n  Best policy: {} (no policy gains {:.0} % or more of modelled memory time: \
                 keep the default).",
                s.good(best),
                numalens_place::whatif::MIN_RECOMMENDED_GAIN * 100.0
            );
        } else {
            let _ = writeln!(
                out,
                "\n  Best policy: {} ({:+.1} % modelled memory time vs first-touch).",
                s.good(best),
                (1.0 / speedup - 1.0) * 100.0
            );
        }
    }
    if let Some(o) = &w.oracle {
        let oracle = w.policies.iter().find(|r| r.policy == "oracle");
        if let Some(r) = oracle
            && o.lower_bound_s > 0.0
        {
            let _ = writeln!(
                out,
                "  Oracle: {} ({} placements tried); within {:.1} % of the lower bound {}.",
                o.method,
                o.evaluated,
                (r.modelled_time_s / o.lower_bound_s - 1.0) * 100.0,
                seconds(o.lower_bound_s)
            );
        }
    }
    notes(&mut out, s, w);
    out
}

/// "interleaving its pages over every node is predicted to cut modelled memory time by 23 %
/// on machine-b".
pub fn prediction_sentence(object: &str, p: &Prediction) -> String {
    let effect = match p.change {
        c if c <= -0.005 => format!("cut modelled memory time by {:.0} %", -c * 100.0),
        c if c >= 0.005 => format!("add {:.0} % to modelled memory time", c * 100.0),
        _ => "leave modelled memory time as it is".to_string(),
    };
    format!(
        "{} for `{}` is predicted to {effect} on {}",
        p.modelled_as,
        escape_control(object),
        escape_control(&p.machine)
    )
}

/// The what-if section of the text report: the table, shorter notes.
pub(crate) fn section_of_report(out: &mut String, s: Style, w: &WhatIf) {
    section(
        out,
        s,
        &format!(
            "What-if: every placement policy on {} (numalens simulate)",
            escape_control(&w.topology)
        ),
    );
    what_if_table(out, s, w);
    match w.recommended.as_deref() {
        Some("first-touch") => {
            let _ = writeln!(
                out,
                "  {}",
                s.dim("best: first-touch, the default (no policy gains 1 % or more)")
            );
        }
        Some(best) => {
            let _ = writeln!(
                out,
                "  {}",
                s.dim(&format!(
                    "best: {best}; `numalens plan PROFILE --policy {best} -o plan.json` writes it as a plan"
                ))
            );
        }
        None => {}
    }
}

fn what_if_table(out: &mut String, s: Style, w: &WhatIf) {
    let head = [
        ("policy", Align::Left),
        ("speedup", Align::Right),
        ("memory time", Align::Right),
        ("local", Align::Right),
        ("imbalance", Align::Right),
        ("max link", Align::Right),
        ("latency", Align::Right),
        ("migrated", Align::Right),
        ("bound by", Align::Left),
    ];
    let rows: Vec<Vec<String>> = w
        .policies
        .iter()
        .map(|r| {
            let name = if r.policy == "oracle" {
                format!("{} (limit)", r.policy)
            } else if r.online {
                format!("{} (online)", r.policy)
            } else {
                r.policy.clone()
            };
            vec![
                name,
                r.speedup_vs_first_touch
                    .map_or("-".into(), |v| format!("{v:.2}×")),
                seconds(r.modelled_time_s),
                percent(r.local_access_ratio),
                percent(r.imbalance),
                format!("{:.0} %", r.max_link_utilisation * 100.0),
                r.mean_latency_ns
                    .map_or("-".into(), |v| format!("{v:.0} ns")),
                r.pages_migrated.to_string(),
                r.bound_by.clone(),
            ]
        })
        .collect();
    table(out, s, &head, &rows);
}

fn notes(out: &mut String, s: Style, w: &WhatIf) {
    let mut lines: Vec<String> = w.notes.iter().map(|n| format!("  {}", s.dim(n))).collect();
    for r in &w.policies {
        for n in &r.notes {
            lines.push(format!("  {}: {}", r.policy, s.dim(&escape_control(n))));
        }
    }
    if !lines.is_empty() {
        let _ = writeln!(out, "\n  Notes:");
        for l in lines {
            let _ = writeln!(out, "  {l}");
        }
    }
}

fn percent(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{:.0} %", v * 100.0))
}

/// Seconds with a unit that keeps three significant digits.
fn seconds(v: f64) -> String {
    match v {
        v if v >= 1.0 => format!("{v:.2} s"),
        v if v >= 1e-3 => format!("{:.2} ms", v * 1e3),
        v if v >= 1e-6 => format!("{:.2} µs", v * 1e6),
        v => format!("{:.0} ns", v * 1e9),
    }
}
