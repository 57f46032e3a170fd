//! HippoRAG 2's walk split in two by linearity, for one query in about a millisecond
//! instead of a dozen passes over the whole graph.
//!
//! Personalized PageRank is linear in its reset vector: with `S(r)` the solution of
//! `p = (1 − d)·r + d·Pᵀp` (mass reaching a dangling node is lost),
//! - every passage node is seeded with `w · x_p`, `x_p = a·(v_p · q) + b` (min-max of the
//!   dense scores), so that half of the walk on passage nodes is
//!   `w · (a · (S V) q + b · S 1)`: `S V` (passages × dim) and `S 1` depend on the graph
//!   and the passage vectors only, and are computed once ([`PassageResponse`]);
//! - the few entity seeds are walked by local forward push (Andersen, Chung & Lang 2006),
//!   which touches only the nodes their mass reaches.
//!
//! The walk with dangling mass sent back to the seeds ([`PprGraph::personalized_pagerank`])
//! is `κ · S(r)` with `κ = 1 / (1 − d · r_D)`, `r_D` the reset mass on dangling nodes: the
//! same ranking, and the same scores once `κ` is applied.
//!
//! Both halves carry proven error bounds (the precomputation's convergence and f32
//! storage, and, until a passage's product with the query is taken exactly, the int8
//! screen's interval for it; the push's residual mass, and `ε · deg(v)` per node on an
//! undirected graph), and a ranking is returned only once the bounds separate the
//! passages asked for; else the caller runs the full walk. Tied passages are never
//! separated this way, so a tie always goes to the full walk.
//!
//! By idea: [`solve`] is the precomputation of `S V` and `S 1` on the entities, [`stored`]
//! its byte format, [`repair`] its update after an edit (by local work, or from the old
//! values), [`response`] the forms a response is kept in for queries, [`push`] the
//! forward push, [`bounds`] the error bounds and the proof of a ranking, and [`rank`] the
//! split walk of one query ([`ranked_passages`]), in named stages.

mod bounds;
mod push;
mod rank;
mod repair;
#[cfg(test)]
mod repair_tests;
mod response;
mod solve;
mod stored;
#[cfg(test)]
mod tests;

pub use rank::{ranked_passages, SplitQuery, SplitRanking};
pub use repair::{Origins, RepairStats, REPAIR_TOLERANCE};
pub use response::{Form, PassageResponse, ResponseStats};
pub use solve::Solved;

/// `Σ_c row[c] · q[c]` in f64 (the products of an f32 or f64 with an f32 are exact, or
/// rounded once, in f64).
fn dot_f64<T: Copy + Into<f64>>(row: &[T], q: &[f32]) -> f64 {
    let mut lanes = [0f64; 8];
    let (rc, qc) = (row.chunks_exact(8), q.chunks_exact(8));
    let tail: f64 = rc.remainder().iter().zip(qc.remainder()).map(|(&a, &b)| a.into() * b as f64).sum();
    for (r, v) in rc.zip(qc) {
        for ((l, &a), &b) in lanes.iter_mut().zip(r).zip(v) {
            *l += a.into() * b as f64;
        }
    }
    lanes.iter().sum::<f64>() + tail
}
