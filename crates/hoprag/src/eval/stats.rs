//! Exact paired tests for comparing two methods on the same questions.

/// P(X >= x) for X ~ Binomial(n, 1/2), summed in log space so large n cannot underflow.
pub fn binomial_upper_tail(n: u64, x: u64) -> f64 {
    if x == 0 {
        return 1.0;
    }
    if x > n {
        return 0.0;
    }
    let ln2 = std::f64::consts::LN_2;
    let mut ln_choose = 0.0f64; // ln C(n, 0)
    let mut terms = Vec::with_capacity((n + 1) as usize);
    for i in 0..=n {
        if i > 0 {
            ln_choose += ((n - i + 1) as f64).ln() - (i as f64).ln();
        }
        if i >= x {
            terms.push(ln_choose - n as f64 * ln2);
        }
    }
    let max = terms.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let sum: f64 = terms.iter().map(|t| (t - max).exp()).sum();
    (max + sum.ln()).exp().min(1.0)
}

/// One-sided exact sign test in the method's favour: the probability of at least
/// `wins` wins among `wins + losses` non-tied pairs if neither method were better.
pub fn sign_test_greater(wins: u64, losses: u64) -> f64 {
    binomial_upper_tail(wins + losses, wins)
}

/// Two-sided exact sign test: twice the tail of the larger side, at most 1 (the test
/// to report when the direction was not fixed before looking).
pub fn sign_test(wins: u64, losses: u64) -> f64 {
    (2.0 * binomial_upper_tail(wins + losses, wins.max(losses))).min(1.0)
}

/// Holm–Bonferroni step-down adjustment of a family of p-values (several methods
/// against one baseline), in the input order: controls the family-wise error rate
/// without assuming independence.
pub fn holm(p: &[f64]) -> Vec<f64> {
    let m = p.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&a, &b| p[a].total_cmp(&p[b]).then(a.cmp(&b)));
    let mut out = vec![1.0; m];
    let mut running = 0.0f64;
    for (rank, &i) in order.iter().enumerate() {
        running = running.max(((m - rank) as f64 * p[i]).min(1.0));
        out[i] = running;
    }
    out
}

/// Exact (binomial) McNemar test, two-sided: `b` = questions only the method gets
/// right, `c` = questions only the baseline gets right.
pub fn mcnemar_exact(b: u64, c: u64) -> f64 {
    let n = b + c;
    if n == 0 {
        return 1.0;
    }
    // P(X <= min) = P(X >= n - min) by symmetry.
    (2.0 * binomial_upper_tail(n, n - b.min(c))).min(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn binomial_tail_small_cases() {
        assert!(close(binomial_upper_tail(3, 3), 0.125));
        assert!(close(binomial_upper_tail(3, 2), 0.5));
        assert!(close(binomial_upper_tail(10, 8), 56.0 / 1024.0));
        assert_eq!(binomial_upper_tail(5, 0), 1.0);
        assert_eq!(binomial_upper_tail(5, 6), 0.0);
    }

    #[test]
    fn sign_test_values() {
        // 9 wins, 1 loss: P(X >= 9 | 10) = 11/1024 one-sided, twice that two-sided (the
        // value R's binom.test(9, 10) gives: 0.02148438).
        assert!(close(sign_test_greater(9, 1), 11.0 / 1024.0));
        assert!(close(sign_test(9, 1), 22.0 / 1024.0));
        assert!(close(sign_test(1, 9), 22.0 / 1024.0), "two-sided is symmetric");
        assert!(close(sign_test_greater(1, 9), 1023.0 / 1024.0), "one-sided is not");
        assert_eq!(sign_test(5, 5), 1.0);
        assert_eq!(sign_test(0, 0), 1.0);
        // Large n does not underflow.
        let p = sign_test_greater(1500, 1500);
        assert!(p > 0.4 && p < 0.6, "{p}");
        assert_eq!(sign_test(1500, 1500), 1.0);
        let p = sign_test(1600, 1400);
        assert!(p > 0.0 && p < 1e-3, "{p}");
    }

    #[test]
    fn holm_by_hand() {
        // Sorted 0.01, 0.02, 0.04 -> 3*0.01, max(0.03, 2*0.02), max(0.04, 1*0.04).
        let adj = holm(&[0.04, 0.01, 0.02]);
        assert!(close(adj[0], 0.04) && close(adj[1], 0.03) && close(adj[2], 0.04), "{adj:?}");
        // Monotone and capped at 1.
        let adj = holm(&[0.5, 0.3]);
        assert!(close(adj[1], 0.6) && close(adj[0], 0.6), "{adj:?}");
        assert_eq!(holm(&[0.9, 0.8]), vec![1.0, 1.0]);
        assert!(holm(&[]).is_empty());
        assert_eq!(holm(&[0.2]), vec![0.2]);
    }

    #[test]
    fn mcnemar_values() {
        // b = 1, c = 9: 2 * P(X <= 1 | 10) = 2 * 11/1024.
        assert!(close(mcnemar_exact(1, 9), 22.0 / 1024.0));
        assert!(close(mcnemar_exact(9, 1), 22.0 / 1024.0));
        assert_eq!(mcnemar_exact(0, 0), 1.0);
        assert_eq!(mcnemar_exact(3, 3), 1.0);
    }
}
