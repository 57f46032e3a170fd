//! Fusion of ranked lists. Each piece works on plain `(passage, score)` lists so any two
//! rankers can be combined.

mod calibrate;
mod guard;

pub use calibrate::{boltzmann, fuse_two, normalize, pit, FusionParams, Normalization, Operator, Temperature};
pub use guard::{guard, DenseGuard};

use std::collections::HashMap;

use crate::corpus::PassageIdx;

/// Reciprocal rank fusion (Cormack et al., 2009): score(d) = sum over lists of
/// 1 / (k + rank(d)), ranks from 1. Ties are broken by the first list's order, then by
/// passage index, so the output is deterministic.
pub fn rrf(lists: &[&[(PassageIdx, f32)]], k: f32) -> Vec<(PassageIdx, f32)> {
    let mut fused: HashMap<PassageIdx, (f32, usize)> = HashMap::new();
    let mut order = 0usize;
    for list in lists {
        for (rank, &(p, _)) in list.iter().enumerate() {
            let e = fused.entry(p).or_insert_with(|| {
                order += 1;
                (0.0, order)
            });
            e.0 += 1.0 / (k + rank as f32 + 1.0);
        }
    }
    let mut out: Vec<(PassageIdx, f32, usize)> = fused.into_iter().map(|(p, (s, o))| (p, s, o)).collect();
    out.sort_by(|a, b| crate::rank::desc(a.1, b.1).then(a.2.cmp(&b.2)).then(a.0.cmp(&b.0)));
    out.into_iter().map(|(p, s, _)| (p, s)).collect()
}

/// The constant RRF papers use (and hoprag's hybrid and GEAR's Eq. 3 default to).
pub const RRF_K: f32 = 60.0;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rrf_rewards_agreement() {
        let a = [(1, 9.0), (2, 8.0), (3, 7.0)];
        let b = [(3, 0.9), (1, 0.8), (4, 0.7)];
        let fused = rrf(&[&a, &b], 60.0);
        assert_eq!(fused.iter().map(|x| x.0).collect::<Vec<_>>(), vec![1, 3, 2, 4]);
        let expected = 1.0 / 61.0 + 1.0 / 62.0;
        assert!((fused[0].1 - expected).abs() < 1e-7);
    }
}
