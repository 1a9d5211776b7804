//! Text in the page: escaping, numbers, names of threads and objects.

use numalens_analyze::ReportModel;

/// `s` made safe as HTML text or as a quoted attribute value.
pub(crate) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// `s` cut to at most `max` characters, with an ellipsis when cut (chart labels have no room).
pub(crate) fn short(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let head: String = s.chars().take(max.saturating_sub(1)).collect();
    head + "…"
}

/// A count with thousands separated by thin spaces: `10 485 760`.
pub(crate) fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push('\u{202f}');
        }
        out.push(c);
    }
    out
}

/// A value with an SI suffix, for chart labels: `950`, `12.5k`, `3.4M`.
pub(crate) fn si(v: f64) -> String {
    let a = v.abs();
    let (scaled, suffix) = if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e3 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    if scaled.fract().abs() < 1e-9 || scaled.abs() >= 100.0 {
        format!("{scaled:.0}{suffix}")
    } else if scaled.abs() >= 10.0 {
        format!("{scaled:.1}{suffix}")
    } else {
        format!("{scaled:.2}{suffix}")
    }
}

/// A ratio in 0..=1 as a percentage, or a dash when unknown.
pub(crate) fn pct(r: Option<f64>) -> String {
    match r {
        Some(r) if r.is_finite() => format!("{:.1}%", r * 100.0),
        _ => "–".to_string(),
    }
}

/// Bytes with a binary unit.
pub(crate) fn bytes(n: u64) -> String {
    crate::layout::bytes(n)
}

/// Short names of the model's threads, by position: `T3`, or `pid:T3` when the profile holds
/// several processes, or the kernel tid when the thread has no logical id.
pub(crate) struct ThreadNames(Vec<String>);

impl ThreadNames {
    pub(crate) fn new(model: &ReportModel) -> Self {
        let first_pid = model.threads.first().map(|t| t.pid);
        let many = model.threads.iter().any(|t| Some(t.pid) != first_pid);
        ThreadNames(
            model
                .threads
                .iter()
                .map(|t| {
                    let name = match t.logical_id {
                        Some(id) => format!("T{id}"),
                        None => format!("tid {}", t.tid),
                    };
                    if many {
                        format!("{}:{name}", t.pid)
                    } else {
                        name
                    }
                })
                .collect(),
        )
    }

    pub(crate) fn get(&self, position: usize) -> String {
        self.0
            .get(position)
            .cloned()
            .unwrap_or_else(|| format!("#{position}"))
    }

    /// The name of a logical thread id within the threads of the first process.
    pub(crate) fn logical(id: Option<u32>) -> String {
        id.map_or_else(|| "?".to_string(), |id| format!("T{id}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_makes_names_inert() {
        assert_eq!(
            esc(r#"std::vector<int> a & "b" 'c'"#),
            "std::vector&lt;int&gt; a &amp; &quot;b&quot; &#39;c&#39;"
        );
        assert_eq!(esc("plain"), "plain");
        assert_eq!(esc("</script><script>"), "&lt;/script&gt;&lt;script&gt;");
    }

    #[test]
    fn numbers_read_well() {
        assert_eq!(count(10_485_760), "10\u{202f}485\u{202f}760");
        assert_eq!(count(999), "999");
        assert_eq!(si(950.0), "950");
        assert_eq!(si(12_500.0), "12.5k");
        assert_eq!(si(3_400_000.0), "3.40M");
        assert_eq!(si(0.5), "0.50");
        assert_eq!(pct(Some(0.325)), "32.5%");
        assert_eq!(pct(None), "–");
        assert_eq!(short("abcdef", 4), "abc…");
        assert_eq!(short("abc", 4), "abc");
    }
}
