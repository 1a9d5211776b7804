//! The findings vocabulary, read from `docs/FINDINGS.md` so the manifests and the analysis
//! share one list of finding and advice ids.

const FINDINGS_MD: &str = include_str!("../../../docs/FINDINGS.md");

/// One row of the table: a finding id and the advice id that fixes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    pub finding: String,
    pub advice: String,
}

/// Every (finding, advice) pair of `docs/FINDINGS.md`, in the table's order.
pub fn patterns() -> Vec<Pattern> {
    FINDINGS_MD
        .lines()
        .filter(|line| line.starts_with("| `"))
        .filter_map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let id = |cell: &str| cell.trim_matches('`').to_string();
            Some(Pattern {
                finding: id(cells.get(1)?),
                advice: id(cells.get(3)?),
            })
        })
        .collect()
}
