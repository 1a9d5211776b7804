//! What a number of samples can support. Exact counts are the truth; a share measured on samples
//! is an estimate, and a rule fires on it only when the samples put the share past the rule's
//! threshold with [`CONFIDENCE`], and a pattern in the samples' times counts only when chance
//! alone would rarely draw it.

/// One-sided confidence of every test on samples: a finding from samples is wrong at most one
/// time in twenty on shares right at its threshold, and far less often further away.
pub(crate) const CONFIDENCE: f64 = 0.95;

/// The standard normal quantile of [`CONFIDENCE`] (one-sided).
const Z: f64 = 1.644_853_626_951_472_2;

/// The chance at or under which an ordering of samples is not put down to luck: 1 − confidence.
pub(crate) const ALPHA: f64 = 1.0 - CONFIDENCE;

/// Wilson score interval of a share `share` measured on `n` samples, at [`CONFIDENCE`] on each
/// side: (lower, upper). With no samples nothing is known: (0, 1). Wilson's interval rather than
/// the normal one because it stays inside [0, 1] and holds for a share of 0 or 1 measured on a
/// few samples, which is where a bare threshold goes wrong.
pub(crate) fn wilson(share: f64, n: u64) -> (f64, f64) {
    if n == 0 || !share.is_finite() {
        return (0.0, 1.0);
    }
    let p = share.clamp(0.0, 1.0);
    let n = n as f64;
    let z2 = Z * Z;
    let centre = (p + z2 / (2.0 * n)) / (1.0 + z2 / n);
    let half = Z * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / (1.0 + z2 / n);
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

/// Whether `n` samples support a share `share` of at least `threshold`: its lower bound reaches
/// it.
pub(crate) fn supports(share: f64, n: u64, threshold: f64) -> bool {
    wilson(share, n).0 >= threshold
}

/// How many samples of equal weight `n` samples of differing weights are worth (Kish's effective
/// sample size): (Σ w)² / Σ w², `weight_sum` and `weight_sq` those sums. Equal weights give `n`;
/// a first-touch fault (weight 1) beside load samples of weight 1024 adds next to nothing, as it
/// adds next to nothing to the share.
pub(crate) fn effective_samples(weight_sum: u64, weight_sq: u64) -> u64 {
    if weight_sq == 0 {
        return 0;
    }
    let sum = weight_sum as f64;
    (sum * sum / weight_sq as f64) as u64
}

/// What a finding from samples rests on: the `n` samples its share is measured on, the lower
/// bound of that share and the confidence of the bound.
pub(crate) fn evidence(share: f64, n: u64) -> Vec<(&'static str, f64)> {
    vec![
        ("samples", n as f64),
        ("share_lower_bound", wilson(share, n).0),
        ("confidence", CONFIDENCE),
    ]
}

/// ln(n!): exact sums for small n, Stirling's series beyond (its error is below 1e-10 there).
fn ln_factorial(x: f64) -> f64 {
    if x < 64.0 {
        return (2..=x as u64).map(|i| (i as f64).ln()).sum();
    }
    x * x.ln() - x + 0.5 * (2.0 * std::f64::consts::PI * x).ln() + 1.0 / (12.0 * x)
        - 1.0 / (360.0 * x * x * x)
}

/// The chance that samples of several threads, `counts[i]` of thread `i`, fall so that each
/// thread's samples come one after the other, all together, when in truth the threads' samples
/// are mixed at random in time (they used the thing at once): the number of orders that keep
/// each thread's samples together, m! · Π kᵢ!, over all orders of the samples, (Σ kᵢ)!. With one
/// sample each, threads can only come one after the other: the chance is 1, and the order says
/// nothing.
pub(crate) fn grouped_by_chance(counts: &[u64]) -> f64 {
    let counts: Vec<u64> = counts.iter().copied().filter(|k| *k > 0).collect();
    if counts.len() < 2 {
        return 1.0;
    }
    // Summed as floats: counts of a damaged profile can reach u64::MAX each.
    let all: f64 = counts.iter().map(|k| *k as f64).sum();
    let kept: f64 = counts.iter().map(|k| ln_factorial(*k as f64)).sum();
    let ln = ln_factorial(counts.len() as f64) + kept - ln_factorial(all);
    ln.exp().min(1.0)
}

/// Whether `runs` runs of one thread (maximal stretches of consecutive items of one thread) are
/// fewer than chance gives, at [`CONFIDENCE`], for items of several threads, `counts[i]` of
/// thread `i`, ordered at random: the runs test of Wald and Wolfowitz, over any number of
/// threads. Phases leave long runs (one owner, then another, perhaps again and again), threads
/// sharing at once leave runs as short as chance makes them. Each thread in one run is
/// [`grouped_by_chance`] exactly; otherwise the count of runs is held against its mean and
/// standard deviation under random order.
pub(crate) fn fewer_runs_than_chance(counts: &[u64], runs: u64) -> bool {
    let groups = counts.iter().filter(|k| **k > 0).count() as u64;
    if groups < 2 {
        return false;
    }
    if runs <= groups {
        return grouped_by_chance(counts) <= ALPHA;
    }
    let n: f64 = counts.iter().map(|k| *k as f64).sum();
    let sq: f64 = counts.iter().map(|k| (*k as f64).powi(2)).sum();
    let cube: f64 = counts.iter().map(|k| (*k as f64).powi(3)).sum();
    let mean = 1.0 + (n * n - sq) / n;
    let var = (sq * (sq + n * (n + 1.0)) - 2.0 * n * cube - n * n * n) / (n * n * (n - 1.0));
    var > 0.0 && (runs as f64 - mean) / var.sqrt() <= -Z
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_share_on_few_samples_is_not_a_share_on_many() {
        // 4 of 5 samples: 80 % measured, not enough to say more than a third.
        let (lo, hi) = wilson(0.8, 5);
        assert!(lo < 0.45 && hi > 0.95, "{lo} {hi}");
        // 8000 of 10000: the share is known to about a percent.
        let (lo, hi) = wilson(0.8, 10_000);
        assert!(lo > 0.79 && hi < 0.81, "{lo} {hi}");
        assert!(supports(0.6, 1000, 0.5));
        assert!(!supports(0.6, 20, 0.5));
        assert_eq!(wilson(0.5, 0), (0.0, 1.0));
        assert_eq!(wilson(f64::NAN, 10), (0.0, 1.0));
        // All samples one way still leaves room the other way.
        assert!(wilson(1.0, 3).0 < 0.6);
        assert!(wilson(0.0, 3).1 > 0.4);
    }

    #[test]
    fn factorials_agree_across_the_switch_to_stirling() {
        let exact: f64 = (2..=64u64).map(|i| (i as f64).ln()).sum();
        assert!((ln_factorial(64.0) - exact).abs() < 1e-9);
        assert_eq!(ln_factorial(0.0), 0.0);
        assert_eq!(ln_factorial(1.0), 0.0);
        assert!((ln_factorial(5.0) - 120f64.ln()).abs() < 1e-12);
        assert!(ln_factorial(u64::MAX as f64).is_finite());
    }

    #[test]
    fn samples_of_small_weight_are_worth_little() {
        assert_eq!(effective_samples(10 * 1024, 10 * 1024 * 1024), 10);
        // Ten load samples and ten first-touch faults: still about ten.
        let (sum, sq) = (10 * 1024 + 10, 10 * 1024 * 1024 + 10);
        assert_eq!(effective_samples(sum, sq), 10);
        assert_eq!(effective_samples(0, 0), 0);
        assert_eq!(effective_samples(u64::MAX, 1), u64::MAX);
    }

    #[test]
    fn long_runs_are_phases_and_short_ones_sharing() {
        // Two threads, 30 items each, in 20 alternating stretches of 3: phases.
        assert!(fewer_runs_than_chance(&[30, 30], 20));
        // The same items alternating one by one, or as often as chance has them: sharing.
        assert!(!fewer_runs_than_chance(&[30, 30], 60));
        assert!(!fewer_runs_than_chance(&[30, 30], 31));
        // One stretch each is the grouped order.
        assert!(fewer_runs_than_chance(&[8, 8], 2));
        assert!(!fewer_runs_than_chance(&[2, 2], 2));
        assert!(!fewer_runs_than_chance(&[9], 1));
        assert!(!fewer_runs_than_chance(&[u64::MAX, u64::MAX], u64::MAX));
    }

    #[test]
    fn grouped_orders_are_chance_only_with_few_samples() {
        // One sample each: always grouped.
        assert_eq!(grouped_by_chance(&[1, 1]), 1.0);
        // Two threads with two samples each: 2·2!·2!/4! = 1/3.
        assert!((grouped_by_chance(&[2, 2]) - 1.0 / 3.0).abs() < 1e-12);
        // Four threads with two each: 4!·2⁴/8!.
        assert!((grouped_by_chance(&[2, 2, 2, 2]) - 384.0 / 40320.0).abs() < 1e-12);
        // Eight each of two threads: a handover, not luck.
        assert!(grouped_by_chance(&[8, 8]) < ALPHA);
        assert!(grouped_by_chance(&[3, 3]) > ALPHA);
        assert_eq!(grouped_by_chance(&[5]), 1.0);
        assert_eq!(grouped_by_chance(&[5, 0]), 1.0);
        assert!(grouped_by_chance(&[u64::MAX, u64::MAX]) < 1e-100);
    }
}
