//! Binary logistic regression with L2 regularisation, fitted by Newton's method on
//! standardised features.
//!
//! Hand-written on purpose: the models have five features and a few hundred examples,
//! must serialise to a small JSON file that other tools can read, and the crates that
//! offer logistic regression bring a linear-algebra stack for what is a 6×6 solve.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogisticRegression {
    /// Feature means and standard deviations the weights apply to (z = (x − mean) / std).
    pub mean: Vec<f64>,
    pub std: Vec<f64>,
    pub weights: Vec<f64>,
    pub intercept: f64,
}

/// Inverse regularisation strength, as scikit-learn's `C` (its default, 1.0).
pub const DEFAULT_C: f64 = 1.0;

impl LogisticRegression {
    /// Fits P(y = 1 | x). Fails when the labels are all equal: such a set cannot tell
    /// the classes apart, and a constant model would pass for a trained one.
    pub fn fit(x: &[Vec<f64>], y: &[bool], c: f64) -> Result<LogisticRegression> {
        let n = x.len();
        if n == 0 {
            return Err(Error::Config("no labelled training examples".into()));
        }
        if n != y.len() {
            return Err(Error::Config(format!("logistic regression: {n} examples for {} labels", y.len())));
        }
        let positives = y.iter().filter(|&&v| v).count();
        if positives == 0 || positives == n {
            let class = if positives == 0 { "negative" } else { "positive" };
            return Err(Error::Config(format!(
                "all {n} training labels are {class}: there is nothing to learn from; \
                 train on more (or more varied) questions"
            )));
        }
        let d = x[0].len();
        if let Some(bad) = x.iter().position(|r| r.len() != d || r.iter().any(|v| !v.is_finite())) {
            return Err(Error::Config(format!("logistic regression: example {bad} has a bad feature vector")));
        }
        let mean: Vec<f64> = (0..d).map(|j| x.iter().map(|r| r[j]).sum::<f64>() / n as f64).collect();
        let std: Vec<f64> = (0..d)
            .map(|j| {
                let v = x.iter().map(|r| (r[j] - mean[j]).powi(2)).sum::<f64>() / n as f64;
                // A constant feature keeps weight 0 under the penalty; 1 avoids dividing by 0.
                if v > 1e-24 {
                    v.sqrt()
                } else {
                    1.0
                }
            })
            .collect();
        // Design rows [1, z_1 .. z_d]; the intercept is not penalised.
        let z: Vec<Vec<f64>> =
            x.iter().map(|r| std::iter::once(1.0).chain((0..d).map(|j| (r[j] - mean[j]) / std[j])).collect()).collect();
        let mut beta = vec![0.0; d + 1];
        for _ in 0..100 {
            let mut grad = vec![0.0; d + 1];
            let mut hess = vec![vec![0.0; d + 1]; d + 1];
            for (row, &label) in z.iter().zip(y) {
                let p = sigmoid(dot(&beta, row));
                let w = (p * (1.0 - p)).max(1e-12);
                let err = p - f64::from(u8::from(label));
                for a in 0..=d {
                    grad[a] += c * err * row[a];
                    for b in 0..=d {
                        hess[a][b] += c * w * row[a] * row[b];
                    }
                }
            }
            for a in 1..=d {
                grad[a] += beta[a];
                hess[a][a] += 1.0;
            }
            let step = solve(hess, grad).ok_or_else(|| Error::Other("logistic regression: singular system".into()))?;
            let mut change: f64 = 0.0;
            for (b, s) in beta.iter_mut().zip(&step) {
                *b -= s;
                change = change.max(s.abs());
            }
            if change < 1e-10 {
                break;
            }
        }
        Ok(LogisticRegression { mean, std, intercept: beta[0], weights: beta[1..].to_vec() })
    }

    /// P(y = 1 | x).
    pub fn predict(&self, x: &[f64]) -> f64 {
        let z: f64 = x
            .iter()
            .zip(&self.weights)
            .enumerate()
            .map(|(j, (v, w))| w * (v - self.mean[j]) / self.std[j])
            .sum::<f64>()
            + self.intercept;
        sigmoid(z)
    }

    /// Checks a model read from a file against the features it will be given.
    pub fn check(&self, features: usize, what: &str) -> Result<()> {
        let lens = [self.mean.len(), self.std.len(), self.weights.len()];
        if lens.iter().any(|&l| l != features) {
            return Err(Error::Config(format!(
                "{what}: expected {features} features, the model has {lens:?} (mean, std, weights)"
            )));
        }
        if self.std.iter().any(|&s| s <= 0.0) || !self.weights.iter().chain([&self.intercept]).all(|w| w.is_finite()) {
            return Err(Error::Config(format!("{what}: the model has non-finite weights or a non-positive scale")));
        }
        Ok(())
    }
}

fn sigmoid(z: f64) -> f64 {
    1.0 / (1.0 + (-z).exp())
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Solves A x = b by Gaussian elimination with partial pivoting.
fn solve(mut a: Vec<Vec<f64>>, mut b: Vec<f64>) -> Option<Vec<f64>> {
    let n = b.len();
    for col in 0..n {
        let pivot = (col..n).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))?;
        if a[pivot][col].abs() < 1e-300 {
            return None;
        }
        a.swap(col, pivot);
        b.swap(col, pivot);
        let (upper, lower) = a.split_at_mut(col + 1);
        let pivot_row = &upper[col];
        for (offset, r) in lower.iter_mut().enumerate() {
            let f = r[col] / pivot_row[col];
            for (x, p) in r[col..].iter_mut().zip(&pivot_row[col..]) {
                *x -= f * p;
            }
            b[col + 1 + offset] -= f * b[col];
        }
    }
    let mut x = vec![0.0; n];
    for row in (0..n).rev() {
        let s: f64 = (row + 1..n).map(|k| a[row][k] * x[k]).sum();
        x[row] = (b[row] - s) / a[row][row];
    }
    Some(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn separates_a_one_feature_threshold_and_is_symmetric() {
        let x: Vec<Vec<f64>> = (0..20).map(|i| vec![i as f64]).collect();
        let y: Vec<bool> = (0..20).map(|i| i >= 10).collect();
        let m = LogisticRegression::fit(&x, &y, DEFAULT_C).unwrap();
        assert!(m.weights[0] > 0.0);
        // The data are symmetric about 9.5: the boundary must sit there.
        assert!((m.predict(&[9.5]) - 0.5).abs() < 1e-9, "{}", m.predict(&[9.5]));
        assert!(m.predict(&[0.0]) < 0.2 && m.predict(&[19.0]) > 0.8);
        let accuracy = x.iter().zip(&y).filter(|(v, &l)| (m.predict(v) > 0.5) == l).count();
        assert_eq!(accuracy, 20);
    }

    #[test]
    fn gradient_is_zero_at_the_fit() {
        // Overlapping classes, two features, one constant: check the optimality condition
        // of the penalised objective directly.
        let x = vec![vec![0.0, 3.0], vec![1.0, 3.0], vec![2.0, 3.0], vec![1.5, 3.0], vec![3.0, 3.0], vec![0.5, 3.0]];
        let y = vec![false, true, false, true, true, false];
        let m = LogisticRegression::fit(&x, &y, 2.0).unwrap();
        assert_eq!(m.weights[1], 0.0, "a constant feature gets no weight");
        let mut g = [0.0; 2];
        for (r, &l) in x.iter().zip(&y) {
            let err = m.predict(r) - f64::from(u8::from(l));
            g[0] += 2.0 * err;
            g[1] += 2.0 * err * (r[0] - m.mean[0]) / m.std[0];
        }
        g[1] += m.weights[0];
        assert!(g.iter().all(|v| v.abs() < 1e-8), "{g:?}");
    }

    #[test]
    fn one_class_is_refused_with_a_message() {
        let x = vec![vec![1.0], vec![2.0]];
        let e = LogisticRegression::fit(&x, &[true, true], DEFAULT_C).unwrap_err().to_string();
        assert!(e.contains("all 2 training labels are positive"), "{e}");
    }

    #[test]
    fn check_rejects_a_model_of_the_wrong_shape() {
        let m = LogisticRegression { mean: vec![0.0], std: vec![1.0], weights: vec![1.0], intercept: 0.0 };
        assert!(m.check(1, "router").is_ok());
        assert!(m.check(5, "router").unwrap_err().to_string().contains("expected 5 features"));
    }
}
