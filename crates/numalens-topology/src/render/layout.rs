//! Column alignment, wrapped notes and number formatting for the text rendering.

use std::fmt::Write;

use super::Style;
use crate::Topology;

/// Width at which notes wrap.
const NOTE_WIDTH: usize = 90;

pub(super) fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

pub(super) fn section(out: &mut String, s: Style, title: &str) {
    let _ = writeln!(out, "\n{}", s.heading(title));
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
    let rows = rows
        .into_iter()
        .zip(t.node_ids())
        .map(|(row, id)| std::iter::once(id.to_string()).chain(row).collect())
        .collect();
    let head: Vec<&str> = head.iter().map(String::as_str).collect();
    let right = vec![true; head.len()];
    table(out, s, &head, rows, &right);
}

/// Aligned columns; widths ignore ANSI escapes so coloured cells line up too.
pub(super) fn table(
    out: &mut String,
    s: Style,
    head: &[&str],
    rows: Vec<Vec<String>>,
    right: &[bool],
) {
    let mut widths: Vec<usize> = head.iter().map(|h| visible_len(h)).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(visible_len(cell));
        }
    }
    let line = |cells: Vec<String>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .zip(right)
            .map(|((c, &w), &r)| {
                let pad = " ".repeat(w - visible_len(c));
                if r {
                    format!("{pad}{c}")
                } else {
                    format!("{c}{pad}")
                }
            })
            .collect();
        format!("  {}", padded.join("  ").trim_end())
    };
    let _ = writeln!(
        out,
        "{}",
        s.heading(&line(head.iter().map(|h| h.to_string()).collect()))
    );
    for row in rows {
        let _ = writeln!(out, "{}", line(row));
    }
}

fn visible_len(text: &str) -> usize {
    let mut len = 0;
    let mut in_escape = false;
    for c in text.chars() {
        match (in_escape, c) {
            (false, '\x1b') => in_escape = true,
            (true, 'm') => in_escape = false,
            (true, _) => {}
            (false, _) => len += 1,
        }
    }
    len
}
