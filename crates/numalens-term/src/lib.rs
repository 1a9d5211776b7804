//! Terminal text shared by numalens' renderers (the topology view, the report): ANSI styling that
//! is either on or off, section headings and aligned tables whose widths ignore the escapes.

use std::fmt::Write;

/// ANSI styling, or none (not a terminal, or `NO_COLOR`: the caller decides).
#[derive(Debug, Clone, Copy)]
pub struct Style {
    pub color: bool,
}

impl Style {
    /// `text` in the SGR style `code` (e.g. `"1"` bold, `"33"` yellow) when colour is on.
    pub fn paint(self, code: &str, text: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }
    pub fn heading(self, text: &str) -> String {
        self.paint("1", text)
    }
    pub fn dim(self, text: &str) -> String {
        self.paint("2", text)
    }
    pub fn warn(self, text: &str) -> String {
        self.paint("33", text)
    }
    pub fn good(self, text: &str) -> String {
        self.paint("32", text)
    }
}

/// A blank line, then `title` in bold.
pub fn section(out: &mut String, s: Style, title: &str) {
    let _ = writeln!(out, "\n{}", s.heading(title));
}

/// Where a column's cells go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

/// Aligned columns under a bold header, indented by two spaces; widths ignore ANSI escapes so
/// coloured cells line up too.
pub fn table(out: &mut String, s: Style, head: &[(&str, Align)], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = head.iter().map(|(h, _)| visible_len(h)).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(visible_len(cell));
        }
    }
    let line = |cells: &mut dyn Iterator<Item = &str>| {
        let padded: Vec<String> = cells
            .zip(&widths)
            .zip(head)
            .map(|((cell, &width), (_, align))| {
                let pad = " ".repeat(width - visible_len(cell));
                match align {
                    Align::Right => format!("{pad}{cell}"),
                    Align::Left => format!("{cell}{pad}"),
                }
            })
            .collect();
        format!("  {}", padded.join("  ").trim_end())
    };
    let header = line(&mut head.iter().map(|(h, _)| *h));
    let _ = writeln!(out, "{}", s.heading(&header));
    for row in rows {
        let _ = writeln!(out, "{}", line(&mut row.iter().map(String::as_str)));
    }
}

/// Characters a terminal shows: ANSI escape sequences take no width.
pub fn visible_len(text: &str) -> usize {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_with_and_without_colour() {
        for color in [false, true] {
            let s = Style { color };
            let mut out = String::new();
            let head = [("name", Align::Left), ("n", Align::Right)];
            table(
                &mut out,
                s,
                &head,
                &[
                    vec![s.warn("ab"), "1".into()],
                    vec!["abc".into(), "22".into()],
                ],
            );
            let plain: Vec<String> = out
                .lines()
                .map(|l| {
                    l.replace("\x1b[1m", "")
                        .replace("\x1b[33m", "")
                        .replace("\x1b[0m", "")
                })
                .collect();
            assert_eq!(
                plain,
                ["  name   n", "  ab     1", "  abc   22"],
                "colour {color}"
            );
        }
        assert_eq!(visible_len("\x1b[33mab\x1b[0m"), 2);
    }
}
