//! Near matches for a name the user typed that matches nothing.

use std::collections::BTreeSet;

/// Names shown when a name matches nothing.
const MAX_NEAR: usize = 5;

/// The distinct `names` closest to `wanted`, closest first: names sharing a substring with it
/// (case-insensitively) before others, then by edit distance.
pub(crate) fn near_matches<'a>(wanted: &str, names: impl Iterator<Item = &'a str>) -> Vec<String> {
    let wanted = wanted.to_lowercase();
    let distinct: BTreeSet<&str> = names.collect();
    let mut scored: Vec<(usize, &str)> = distinct
        .into_iter()
        .map(|name| {
            let lower = name.to_lowercase();
            let related = lower.contains(&wanted) || wanted.contains(&lower);
            let distance = edit_distance(&wanted, &lower);
            (if related { 0 } else { 1 + distance }, name)
        })
        .collect();
    scored.sort();
    scored
        .into_iter()
        .take(MAX_NEAR)
        .map(|(_, name)| name.to_string())
        .collect()
}

/// Levenshtein distance over characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitute = previous[j] + usize::from(ca != *cb);
            current[j + 1] = substitute.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        previous = current;
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances() {
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("same", "same"), 0);
    }

    #[test]
    fn substrings_first_then_closest() {
        let names = ["matrix_a", "vector", "matrix_b", "other", "vectors"];
        let near = near_matches("Matrix", names.into_iter());
        assert_eq!(&near[..2], ["matrix_a", "matrix_b"]);
        let near = near_matches("vectr", names.into_iter());
        assert_eq!(near[0], "vector");
    }
}
