//! How an HNSW graph updated in place by edits holds its recall under churn: on the
//! vectors and graph of a scale index (`hoprag bench scale --no-graph --out DIR`), cycles
//! of 10 % of the passages deleted and then re-added (a different tenth each cycle), the
//! graph updated as edits update it ([`HnswIndex::update`], no rebuild), and recall@10
//! against exact search after each cycle. The numbers behind
//! [`hoprag::index::REBUILD_AFTER`] (docs/scale.md).
//!
//! `HOPRAG_CHURN_INDEX=DIR cargo test --release -p hoprag --test hnsw_churn -- --ignored --nocapture`

use std::sync::Arc;
use std::time::Instant;

use hoprag::index::{hnsw_breadth, ExactIndex, HnswIndex, HnswParams, Matrix, Rescored, VectorIndex};
use hoprag::store;
use hoprag::PassageIdx;

/// Query-like vectors: the normalised midpoints of pseudo-random pairs of passages (near
/// the passages, none of them one).
fn queries(m: &Matrix, n: usize) -> Vec<Vec<f32>> {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % m.rows() as u64) as PassageIdx
    };
    (0..n)
        .map(|_| {
            let (a, b) = (m.row(next()), m.row(next()));
            let v: Vec<f32> = a.iter().zip(b).map(|(x, y)| x + y).collect();
            let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            v.into_iter().map(|x| x / norm).collect()
        })
        .collect()
}

/// Search breadths, as multiples of the default ([`hoprag::index::hnsw_breadth`]).
const WIDER: [f64; 4] = [1.0, 1.25, 1.5, 2.0];

/// Recall@10 against `truth` at the graph's own breadth (widened with its churn), then at
/// each breadth of [`WIDER`]; and the own breadth.
fn recall(
    graph: HnswIndex,
    m: &Arc<Matrix>,
    queries: &[Vec<f32>],
    truth: &[Vec<PassageIdx>],
    params: &HnswParams,
) -> (Vec<f64>, usize, HnswIndex) {
    let graph = Arc::new(graph);
    let searched = Rescored::wrap(graph.clone(), m.clone());
    let own = searched.search_breadth(10);
    let default = hnsw_breadth(params, m.rows()) as f64;
    let recalls = std::iter::once(own as f64 / default)
        .chain(WIDER)
        .map(|w| {
            let breadth = (default * w).round() as usize;
            let found: usize = queries
                .iter()
                .zip(truth)
                .map(|(q, t)| {
                    let hits = searched.search_with_breadth(q, 10, breadth).unwrap();
                    hits.iter().filter(|h| t.contains(&h.0)).count()
                })
                .sum();
            found as f64 / (10 * queries.len()) as f64
        })
        .collect();
    drop(searched);
    (recalls, own, Arc::into_inner(graph).expect("the only holder"))
}

fn show(r: &[f64]) -> String {
    r.iter().map(|x| format!("{x:>7.4}")).collect::<Vec<_>>().join(" ")
}

fn rows_of(m: &Matrix, rows: impl Iterator<Item = PassageIdx>) -> Matrix {
    let mut out = Matrix::new(m.dim());
    rows.for_each(|r| out.push(m.row(r)));
    out
}

#[test]
#[ignore = "needs a scale index: HOPRAG_CHURN_INDEX=DIR"]
fn recall_under_churn() {
    let dir = std::path::PathBuf::from(std::env::var("HOPRAG_CHURN_INDEX").expect("HOPRAG_CHURN_INDEX=DIR"));
    let index = store::folder(&dir).load().unwrap();
    let generation = dir.join(index.generation());
    let (dim, params) = (index.manifest.embedder.dim, index.manifest.hnsw);
    let m = index.vectors().clone();
    let n = m.rows();
    let queries = queries(&m, 1000);
    let exact = ExactIndex::new(m.clone());
    let truth: Vec<Vec<PassageIdx>> =
        queries.iter().map(|q| exact.search(q, 10).unwrap().into_iter().map(|h| h.0).collect()).collect();
    let mut graph = HnswIndex::load(&generation.join("hnsw.usearch"), dim, params).unwrap();
    let (fresh, own);
    (fresh, own, graph) = recall(graph, &m, &queries, &truth, &params);
    println!(
        "{n} passages, {} queries; recall@10 at the graph's own breadth, then {WIDER:?} x the default",
        queries.len()
    );
    println!("built from scratch:            breadth {own:>4}  {}", show(&fresh));
    println!("cycle  churn  delete s  re-add s");
    for cycle in 1..=5u32 {
        // Delete the rows j with j % 10 == cycle % 10, then add them back.
        let gone = |j: PassageIdx| j % 10 == cycle % 10;
        let left: Vec<PassageIdx> = (0..n as PassageIdx).filter(|&j| !gone(j)).collect();
        let kept: Vec<Option<PassageIdx>> = left.iter().map(|&j| Some(j)).collect();
        let t = Instant::now();
        (graph, _) = graph.update(&rows_of(&m, left.iter().copied()), &kept).unwrap();
        let delete_secs = t.elapsed().as_secs_f64();
        let mut at = 0;
        let kept: Vec<Option<PassageIdx>> = (0..n as PassageIdx)
            .map(|j| {
                (!gone(j)).then(|| {
                    at += 1;
                    at - 1
                })
            })
            .collect();
        let t = Instant::now();
        (graph, _) = graph.update(&m, &kept).unwrap();
        let add_secs = t.elapsed().as_secs_f64();
        let (r, own);
        (r, own, graph) = recall(graph, &m, &queries, &truth, &params);
        let churn = graph.slots().removed() as f64 / n as f64;
        println!("{cycle:>5}  {churn:>5.2}  {delete_secs:>8.2}  {add_secs:>8.2}  breadth {own:>4}  {}", show(&r));
    }
}
