//! Column alignment, wrapped notes and number formatting for the text rendering.

use std::fmt::Write;

use numalens_term::{Align, Style, table, visible_len};

use crate::Topology;

/// Width at which notes wrap.
const NOTE_WIDTH: usize = 90;

pub(super) fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// A note, wrapped so that long provenance sources stay readable in a terminal.
pub(super) fn note(out: &mut String, s: Style, text: &str) {
    let mut line = String::new();
    let mut first = true;
    for word in text.split(' ') {
        if !line.is_empty() && visible_len(&line) + 1 + visible_len(word) > NOTE_WIDTH {
            let _ = writeln!(
                out,
                "  {} {line}",
                if first {
                    s.dim("note:")
                } else {
                    "     ".into()
                }
            );
            first = false;
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    let _ = writeln!(
        out,
        "  {} {line}",
        if first {
            s.dim("note:")
        } else {
            "     ".into()
        }
    );
}

/// Integers without decimals, others with one (latencies like 126.5 ns).
pub(super) fn number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

pub(super) fn matrix(
    out: &mut String,
    t: &Topology,
    s: Style,
    corner: &str,
    rows: Vec<Vec<String>>,
) {
    let mut head = vec![corner.to_string()];
    head.extend(t.node_ids().iter().map(u32::to_string));
    let rows: Vec<Vec<String>> = rows
        .into_iter()
        .zip(t.node_ids())
        .map(|(row, id)| std::iter::once(id.to_string()).chain(row).collect())
        .collect();
    let head: Vec<(&str, Align)> = head.iter().map(|h| (h.as_str(), Align::Right)).collect();
    table(out, s, &head, &rows);
}
