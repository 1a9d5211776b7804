//! Styling, aligned columns and number formatting for the terminal.

use std::fmt::Write;

pub(crate) use numalens_term::{Align, Style, section, table};

/// A `label  value` line of a summary block.
pub(crate) fn field(out: &mut String, s: Style, label: &str, value: &str) {
    let _ = writeln!(out, "  {}  {value}", s.dim(&format!("{label:<10}")));
}

/// Bytes with a binary unit: `512 B`, `4.0 KiB`, `8.0 MiB`.
pub(crate) fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// A duration in the unit that keeps it short.
pub(crate) fn duration(ns: u64) -> String {
    let s = ns as f64 / 1e9;
    if s >= 1.0 {
        format!("{s:.2} s")
    } else {
        format!("{:.1} ms", s * 1e3)
    }
}

/// `n one` or `n many`.
pub(crate) fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_durations() {
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(8 << 20), "8.0 MiB");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(duration(53_800_000), "53.8 ms");
        assert_eq!(duration(2_500_000_000), "2.50 s");
    }

    #[test]
    fn coloured_cells_line_up() {
        let mut out = String::new();
        let s = Style { color: true };
        let rows = vec![
            vec![s.warn("ab"), "1".into()],
            vec!["abc".into(), "22".into()],
        ];
        table(
            &mut out,
            Style { color: false },
            &[("x", Align::Left), ("n", Align::Right)],
            &rows,
        );
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "  x     n");
        assert_eq!(lines[1], "  \u{1b}[33mab\u{1b}[0m    1");
        assert_eq!(lines[2], "  abc  22");
    }
}
