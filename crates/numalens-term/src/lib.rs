//! Terminal text shared by numalens' renderers (the topology view, the report): ANSI styling that
//! is either on or off, section headings and aligned tables whose widths ignore the escapes.

use std::borrow::Cow;
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

/// `text` with every character that would act on a terminal instead of being shown (C0 and C1
/// controls, DEL, bidirectional overrides) written as a visible escape: `\x1b`, `\n`,
/// `\u{202e}`. Strings from a profile (a program's arguments, object and thread names, paths)
/// go through this before they are laid out, so a name cannot move the cursor, recolour or
/// hide the report.
pub fn escape_control(text: &str) -> Cow<'_, str> {
    if !text.chars().any(acts_on_terminal) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if acts_on_terminal(c) && (c as u32) < 0x80 => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if acts_on_terminal(c) => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

fn acts_on_terminal(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
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

    #[test]
    fn control_characters_are_shown_not_obeyed() {
        assert!(matches!(
            escape_control("plain ü"),
            Cow::Borrowed("plain ü")
        ));
        assert_eq!(
            escape_control("a\x1b[2Jb\nc\td\u{7f}\u{9b}e\u{202e}"),
            "a\\x1b[2Jb\\nc\\td\\x7f\\u{9b}e\\u{202e}"
        );
    }
}
