//! Calibrated fusion of two score lists (PhaseGraph, §3): normalise each list to a common
//! scale, turn the normalised scores into weights with an operator, mix them with a
//! consensus bonus. Every piece is usable on its own (BridgeRAG reuses PIT).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::corpus::PassageIdx;

/// How a list's raw scores are mapped to a common scale.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Normalization {
    /// Percentile rank (the probability integral transform, PhaseGraph Eq. 1):
    /// p_i = |{j : s_j <= s_i}| / N.
    Pit,
    /// (s - min) / (max - min); all-equal lists map to 1.
    MinMax,
    /// s / max.
    MaxRatio,
    /// Raw scores.
    None,
}

impl std::str::FromStr for Normalization {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "pit" => Ok(Normalization::Pit),
            "minmax" | "min_max" => Ok(Normalization::MinMax),
            "max" | "max_ratio" => Ok(Normalization::MaxRatio),
            "none" => Ok(Normalization::None),
            _ => Err(format!("unknown normalization {s:?}: expected pit, minmax, max or none")),
        }
    }
}

/// Maps scores with the chosen normalisation.
pub fn normalize(scores: &[f64], how: Normalization) -> Vec<f64> {
    if scores.is_empty() {
        return Vec::new();
    }
    let (min, max) = scores.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &s| (lo.min(s), hi.max(s)));
    match how {
        Normalization::Pit => pit(scores),
        Normalization::MinMax if max > min => scores.iter().map(|s| (s - min) / (max - min)).collect(),
        Normalization::MinMax => vec![1.0; scores.len()],
        Normalization::MaxRatio if max > 0.0 => scores.iter().map(|s| s / max).collect(),
        Normalization::MaxRatio => vec![1.0; scores.len()],
        Normalization::None => scores.to_vec(),
    }
}

/// Percentile ranks: the share of the list scoring at or below each score (ties share
/// the higher rank), in O(n log n).
pub fn pit(scores: &[f64]) -> Vec<f64> {
    let n = scores.len();
    let mut sorted: Vec<f64> = scores.to_vec();
    sorted.sort_by(|a, b| crate::rank::asc(*a, *b));
    scores
        .iter()
        .map(|s| {
            // A NaN is below every number, so nothing is at or below it.
            if s.is_nan() {
                return 0.0;
            }
            let at_or_below = sorted.partition_point(|x| crate::rank::asc(*x, *s).is_le());
            at_or_below as f64 / n as f64
        })
        .collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Temperature {
    /// T = mean energy / 2 (PhaseGraph Eq. 3).
    Auto,
    Fixed(f64),
}

/// Boltzmann probabilities of normalised scores: energies E = -ln(p + 1e-6) (Eq. 2),
/// P = exp(-E/T) / Z (Eq. 4).
pub fn boltzmann(normalised: &[f64], temperature: Temperature) -> Vec<f64> {
    if normalised.is_empty() {
        return Vec::new();
    }
    let energy: Vec<f64> = normalised.iter().map(|p| -(p.max(0.0) + 1e-6).ln()).collect();
    let t = match temperature {
        Temperature::Auto => energy.iter().sum::<f64>() / energy.len() as f64 / 2.0,
        Temperature::Fixed(t) => t,
    };
    // All-equal top scores have zero mean energy: fall back to uniform weights.
    if t <= 1e-12 {
        return vec![1.0 / normalised.len() as f64; normalised.len()];
    }
    let min_e = energy.iter().cloned().fold(f64::INFINITY, f64::min);
    let w: Vec<f64> = energy.iter().map(|e| (-(e - min_e) / t).exp()).collect();
    let z: f64 = w.iter().sum();
    w.into_iter().map(|x| x / z).collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Operator {
    /// α·P_v + (1−α)·P_g with Boltzmann probabilities (PhaseGraph Eq. 5).
    Boltzmann,
    /// α·p_v + (1−α)·p_g on the normalised scores.
    Linear,
    /// Reciprocal rank fusion, k = 60 (ignores scores and normalisation).
    Rrf,
}

impl std::str::FromStr for Operator {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "boltzmann" => Ok(Operator::Boltzmann),
            "linear" => Ok(Operator::Linear),
            "rrf" => Ok(Operator::Rrf),
            _ => Err(format!("unknown fusion operator {s:?}: expected boltzmann, linear or rrf")),
        }
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct FusionParams {
    pub normalization: Normalization,
    pub operator: Operator,
    pub temperature: Temperature,
    /// Weight of the first list (α).
    pub alpha: f64,
    /// Bonus for a passage present in both lists (β).
    pub beta: f64,
}

/// Fuses two ranked lists into one, best first; passages missing from a list get zero
/// from it. Ties keep the first list's order.
pub fn fuse_two(a: &[(PassageIdx, f32)], b: &[(PassageIdx, f32)], p: &FusionParams) -> Vec<(PassageIdx, f32)> {
    if p.operator == Operator::Rrf {
        return super::rrf(&[a, b], super::RRF_K);
    }
    let weights = |list: &[(PassageIdx, f32)]| -> Vec<f64> {
        let raw: Vec<f64> = list.iter().map(|x| x.1 as f64).collect();
        let n = normalize(&raw, p.normalization);
        match p.operator {
            Operator::Boltzmann => boltzmann(&n, p.temperature),
            _ => n,
        }
    };
    let (wa, wb) = (weights(a), weights(b));
    let mut fused: HashMap<PassageIdx, (f64, u8, usize)> = HashMap::new();
    for (list, w, weight, bit) in [(a, &wa, p.alpha, 1u8), (b, &wb, 1.0 - p.alpha, 2u8)] {
        for ((idx, _), &x) in list.iter().zip(w) {
            let order = fused.len();
            let e = fused.entry(*idx).or_insert((0.0, 0, order));
            e.0 += weight * x;
            e.1 |= bit;
        }
    }
    let mut out: Vec<(PassageIdx, f64, usize)> =
        fused.into_iter().map(|(i, (s, seen, o))| (i, s + if seen == 3 { p.beta } else { 0.0 }, o)).collect();
    out.sort_by(|x, y| crate::rank::desc(x.1, y.1).then(x.2.cmp(&y.2)));
    out.into_iter().map(|(i, s, _)| (i, s as f32)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pit_is_the_empirical_cdf() {
        assert_eq!(pit(&[0.3, 0.1, 0.2, 0.2]), vec![1.0, 0.25, 0.75, 0.75]);
        assert_eq!(normalize(&[2.0, 4.0], Normalization::MinMax), vec![0.0, 1.0]);
        assert_eq!(normalize(&[2.0, 4.0], Normalization::MaxRatio), vec![0.5, 1.0]);
        assert_eq!(normalize(&[3.0, 3.0], Normalization::MinMax), vec![1.0, 1.0]);
    }

    #[test]
    fn nan_scores_rank_last_in_pit_and_fusion() {
        // A NaN is no evidence: below every number in the percentile ranks...
        let p = pit(&[0.3, f64::NAN, 0.1]);
        assert_eq!(p, vec![2.0 / 3.0, 0.0, 1.0 / 3.0]);
        // ...and last in a fused list.
        let params = FusionParams {
            normalization: Normalization::None,
            operator: Operator::Linear,
            temperature: Temperature::Auto,
            alpha: 0.5,
            beta: 0.0,
        };
        let f = fuse_two(&[(7, f32::NAN), (1, 0.2)], &[(2, 0.1)], &params);
        assert_eq!(f.iter().map(|x| x.0).collect::<Vec<_>>(), vec![1, 2, 7]);
    }

    #[test]
    fn boltzmann_by_hand() {
        // p = [1, 0.5]: E = [-ln(1+1e-6), -ln(0.5+1e-6)] ~ [0, 0.693]; T = 0.1733;
        // weights ~ [1, e^-4] normalised.
        let b = boltzmann(&[1.0, 0.5], Temperature::Auto);
        let r = (-4.0f64).exp();
        assert!((b[0] - 1.0 / (1.0 + r)).abs() < 1e-3, "{b:?}");
        assert!((b.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        let flat = boltzmann(&[1.0, 1.0], Temperature::Auto);
        assert_eq!(flat, vec![0.5, 0.5]);
    }

    #[test]
    fn consensus_bonus_and_alpha() {
        let v = [(1, 0.9), (2, 0.8)];
        let g = [(3, 0.5), (2, 0.4)];
        let p = FusionParams {
            normalization: Normalization::Pit,
            operator: Operator::Linear,
            temperature: Temperature::Auto,
            alpha: 0.7,
            beta: 1.0,
        };
        let f = fuse_two(&v, &g, &p);
        // 2 is in both lists: 0.7 * 0.5 + 0.3 * 0.5 + 1 = 1.5; 1: 0.7; 3: 0.3.
        assert_eq!(f.iter().map(|x| x.0).collect::<Vec<_>>(), vec![2, 1, 3]);
        assert!((f[0].1 - 1.5).abs() < 1e-6);
        let rrf = fuse_two(&v, &g, &FusionParams { operator: Operator::Rrf, ..p });
        assert_eq!(rrf[0].0, 2);
    }
}
