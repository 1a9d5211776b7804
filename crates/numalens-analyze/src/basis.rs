//! What a finding rests on (docs/FINDINGS.md, "What a finding rests on"): the data its rule
//! looked at, how much of it, and every threshold the rule passed, with the lower bound that
//! passed it when the data are samples. The sentence is what text and HTML show as "rests on".

use crate::model::{Basis, BasisData, BasisTest};

pub(crate) fn data(kind: &str, count: u64, unit: &str) -> BasisData {
    BasisData {
        kind: kind.into(),
        count,
        unit: unit.into(),
    }
}

/// `value ≥ threshold`, for a count or a ratio that is not a share of samples.
pub(crate) fn at_least(measure: &str, value: f64, threshold: f64) -> BasisTest {
    test(measure, value, "at-least", threshold)
}

/// `value < threshold`: a rule that fires when another's threshold is not reached.
pub(crate) fn below(measure: &str, value: f64, threshold: f64) -> BasisTest {
    test(measure, value, "below", threshold)
}

/// A share against a threshold; on `samples` samples its lower bound is what passed.
pub(crate) fn share_at_least(
    measure: &str,
    share: f64,
    threshold: f64,
    samples: Option<u64>,
) -> BasisTest {
    BasisTest {
        samples,
        lower_bound: samples.map(|n| crate::stats::wilson(share, n).0),
        ..at_least(measure, share, threshold)
    }
}

fn test(measure: &str, value: f64, passes: &str, threshold: f64) -> BasisTest {
    BasisTest {
        measure: measure.into(),
        value,
        passes: passes.into(),
        threshold,
        samples: None,
        lower_bound: None,
    }
}

/// The basis of a rule's tests: its data, and the confidence when a test is on samples.
pub(crate) fn basis(data: Vec<BasisData>, tests: Vec<BasisTest>) -> Basis {
    let sampled = tests.iter().any(|t| t.samples.is_some());
    Basis {
        data,
        tests,
        confidence: sampled.then_some(crate::stats::CONFIDENCE),
    }
}

/// The basis in one sentence: `1200 load/store samples; mismatched access share 62% ≥ 40%
/// (at least 58% on 1180 samples); …; lower bounds at 95% confidence`.
pub(crate) fn sentence(b: &Basis) -> String {
    let mut parts: Vec<String> = b
        .data
        .iter()
        .map(|d| format!("{} {}", d.count, data_words(&d.kind)))
        .collect();
    parts.extend(b.tests.iter().map(test_words));
    let mut text = parts.join("; ");
    if let Some(c) = b.confidence {
        text.push_str(&format!("; lower bounds at {:.0}% confidence", 100.0 * c));
    }
    text
}

fn data_words(kind: &str) -> &str {
    match kind {
        "exact-counts" => "exact counted accesses",
        "load-store-samples" => "load/store samples",
        "fault-samples" => "page-fault samples (accesses of unknown direction)",
        "first-touch-faults" => "pages placed by a first-touch fault",
        "first-access-times" => "pages with exact first-access times",
        "earliest-samples" => "pages placed by the thread of their earliest sample",
        "first-touch-faults-else-earliest-samples" => {
            "pages placed by a first-touch fault, or without one by their earliest sample"
        }
        "data-source-samples" => "samples with a measured data source beyond the caches",
        "hitm-samples" => "HITM samples",
        other => other,
    }
}

/// A percentage in whole points, or to two significant digits below one point (a threshold of
/// 0.1 % is not "0%"), in scientific notation below 0.0001 point.
fn percent(p: f64) -> String {
    if !p.is_finite() || p <= 0.0 || p >= 0.995 {
        return format!("{p:.0}%");
    }
    if p < 1e-4 {
        return format!("{p:.1e}%");
    }
    let mut decimals = (1.0 - p.log10().floor()) as usize;
    // 0.0999 rounds up to a third digit: one decimal fewer.
    if (p * 10f64.powi(decimals as i32)).round() >= 100.0 {
        decimals -= 1;
    }
    format!("{p:.decimals$}%")
}

fn test_words(t: &BasisTest) -> String {
    let share = t.measure.contains("share") || t.measure.ends_with("ratio");
    let number = |v: f64| {
        if share {
            percent(100.0 * v)
        } else if v.fract() == 0.0 {
            format!("{v:.0}")
        } else {
            format!("{v:.2}")
        }
    };
    let op = if t.passes == "below" { "<" } else { "≥" };
    let mut text = format!(
        "{} {} {op} {}",
        t.measure.replace('_', " "),
        number(t.value),
        number(t.threshold)
    );
    if let (Some(n), Some(lower)) = (t.samples, t.lower_bound) {
        text.push_str(&format!(" (at least {} on {n} samples)", number(lower)));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_below_one_point_keep_two_significant_digits() {
        let words = |v, threshold| test_words(&share_at_least("x_share", v, threshold, None));
        assert_eq!(words(0.0216, 0.001), "x share 2% ≥ 0.10%");
        assert_eq!(words(0.00026, 0.001), "x share 0.026% ≥ 0.10%");
        assert_eq!(words(0.0, 0.5), "x share 0% ≥ 50%");
        for (share, text) in [
            (0.0099999, "1%"),
            (0.00996, "1%"),
            (0.0009999, "0.10%"),
            (0.000999, "0.10%"),
            (0.00994, "0.99%"),
            (1e-9, "1.0e-7%"),
        ] {
            assert_eq!(percent(100.0 * share), text, "{share}");
        }
    }

    #[test]
    fn a_share_from_samples_says_its_samples_and_bound() {
        let b = basis(
            vec![data("load-store-samples", 1200, "samples")],
            vec![share_at_least(
                "mismatched_access_share",
                0.62,
                0.4,
                Some(1000),
            )],
        );
        assert_eq!(b.confidence, Some(crate::stats::CONFIDENCE));
        let lower = b.tests[0].lower_bound.unwrap();
        assert!(lower > 0.4 && lower < 0.62, "{lower}");
        let text = sentence(&b);
        assert!(
            text.starts_with(
                "1200 load/store samples; mismatched access share 62% ≥ 40% (at least"
            ),
            "{text}"
        );
        assert!(text.ends_with("; lower bounds at 95% confidence"), "{text}");
    }

    #[test]
    fn exact_counts_have_no_bound() {
        let b = basis(
            vec![data("exact-counts", 5000, "accesses")],
            vec![
                share_at_least("shared_access_share", 0.9, 0.5, None),
                below("page_cv", 0.1, 0.5),
            ],
        );
        assert_eq!(b.confidence, None);
        assert_eq!(
            sentence(&b),
            "5000 exact counted accesses; shared access share 90% ≥ 50%; page cv 0.10 < 0.50"
        );
    }
}
