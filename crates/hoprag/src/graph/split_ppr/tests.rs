use super::bounds::proven_top;
use super::push::Steps;
use super::response::{Half, PassageGather};
use super::solve::EntityWalk;
use super::*;
use crate::filter::Selection;
use crate::graph::ppr::{PprGraph, PprParams, Ranked};
use crate::index::{Matrix, Screen};
use crate::rank::range;

/// Entities 0..e on a ring with chords, passages e..e+p each linked to three entities,
/// one dangling entity and one passage with no entity.
fn graph(e: u32, p: u32) -> PprGraph {
    let mut edges = Vec::new();
    for i in 0..e - 1 {
        edges.push((i, (i + 1) % (e - 1), 1.0 + (i * 37 % 11) as f32));
        edges.push((i, (i * 7 + 3) % (e - 1), 0.5 + (i * 13 % 5) as f32 / 7.0));
    }
    for j in 0..p - 1 {
        for k in 0..3 {
            edges.push((e + j, (j * 5 + k * 11) % (e - 1), 1.0));
        }
    }
    PprGraph::from_edges((e + p) as usize, &edges)
}

#[test]
fn the_passage_gather_sums_as_the_walk_does() {
    let (e, p) = (40u32, 400u32);
    let g = graph(e, p);
    let steps = Steps::new(&g);
    let walk = EntityWalk::new(&g, &steps, e as usize, 0.5).expect("contracts");
    let gather = PassageGather::new(&walk.into_passage, e as usize).expect("every passage edge weighs 1");
    let z: Vec<f64> = (0..e).map(|i| ((i * 37 % 11) as f64 - 5.0) / 7.0).collect();
    let (got, want) = (gather.gather(&z), g.gather(e as usize..(e + p) as usize, &z));
    assert_eq!(got.len(), want.len());
    for (i, (a, b)) in got.iter().zip(&want).enumerate() {
        assert!((a - b).abs() <= 1e-14 * (1.0 + b.abs()), "passage {i}: {a} vs {b}");
    }
    // The last passage has no entity: its sum is 0; the others' are not all.
    assert_eq!(got[p as usize - 1], 0.0);
    assert!(got.iter().filter(|&&x| x != 0.0).count() > p as usize / 2);
    // An entity whose passage edges weigh differently has no one probability: the
    // walk's own gather serves.
    let uneven = PprGraph::from_edges(4, &[(0, 1, 1.0), (2, 0, 1.0), (3, 0, 2.0)]);
    let steps = Steps::new(&uneven);
    let walk = EntityWalk::new(&uneven, &steps, 2, 0.5).expect("contracts");
    assert!(PassageGather::new(&walk.into_passage, 2).is_none());
}

fn vectors(p: usize, dim: usize) -> Matrix {
    let mut s = 7u64;
    let data = (0..p * dim)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) - 0.5
        })
        .collect();
    Matrix::from_flat(dim, data)
}

/// A query with HippoRAG 2's passage weight and damping, its passages scored `dense`.
fn split_query<'a>(
    entity_seeds: &'a [(u32, f64)],
    dense: &[f32],
    query: &'a [f32],
    vectors: &'a Matrix,
) -> SplitQuery<'a> {
    SplitQuery {
        entity_seeds,
        dense_range: range(dense),
        query,
        passage_weight: 0.05,
        damping: 0.5,
        vectors,
        budget: 0,
        screened: None,
        entity_products: None,
        within: None,
    }
}

#[test]
fn the_split_walk_ranks_as_the_full_walk_converged() {
    // More entities than passages (the real subsets) and fewer (the scale benchmark's
    // corpora), in both forms.
    for (e, p) in [(300u32, 200u32), (40, 400)] {
        for form in [Form::Auto, Form::Rows, Form::Entities] {
            split_equals_full(e, p, form, false);
        }
    }
    // The entity form over a screen with the 4-bit first stage (a million passages').
    split_equals_full(40, 400, Form::Entities, true);
}

#[test]
fn past_its_budget_the_push_ranks_by_its_estimates_within_their_bound() {
    let (e, p, dim) = (40u32, 400u32, 24);
    let g = graph(e, p);
    let v = vectors(p as usize, dim);
    let response = PassageResponse::compute(&g, e as usize, &v, 0.5).unwrap();
    let query: Vec<f32> = (0..dim).map(|i| ((i * 7 % 13) as f32 - 6.0) / 10.0).collect();
    let dense = v.dots(&query);
    let seeds = [(3, 1.0), (17, 0.4)];
    let proven = ranked_passages(&g, &response, &split_query(&seeds, &dense, &query, &v), 10).unwrap();
    assert!(proven.proven);
    let q = SplitQuery { budget: 1, ..split_query(&seeds, &dense, &query, &v) };
    let rough = ranked_passages(&g, &response, &q, 10).expect("ranked, unproven");
    assert!(!rough.proven && rough.top.len() == 10);
    // Every returned score is within the bound of the full walk's.
    let (lo, hi) = range(&dense);
    let mut all: Vec<(u32, f64)> = seeds.to_vec();
    all.extend(dense.iter().enumerate().map(|(i, &s)| (e + i as u32, 0.05 * ((s - lo) / (hi - lo)) as f64)));
    let full =
        g.personalized_pagerank(&all, &PprParams { tolerance: 1e-15, max_iterations: 200, ..Default::default() });
    for &(passage, score) in &rough.top {
        let truth = full.scores[e as usize + passage as usize];
        assert!((score - truth).abs() <= rough.bound + 1e-15, "{passage}: {score} vs {truth}, bound {}", rough.bound);
    }
    // A budget the proof fits in changes nothing.
    let q = SplitQuery { budget: 1 << 30, ..split_query(&seeds, &dense, &query, &v) };
    let roomy = ranked_passages(&g, &response, &q, 10).unwrap();
    assert!(roomy.proven);
    assert_eq!(roomy.top, proven.top);
    // Without passage seeds, asking for more passages than the first push reached:
    // the unreached ones fill the list at 0, each also within the bound.
    let zero = [(3, 1.0)];
    let q = SplitQuery { budget: 1, passage_weight: 0.0, ..split_query(&zero, &dense, &query, &v) };
    let rough = ranked_passages(&g, &response, &q, 300).expect("ranked, unproven");
    assert!(!rough.proven && rough.top.len() == 300, "{} passages", rough.top.len());
    let mut listed: Vec<u32> = rough.top.iter().map(|x| x.0).collect();
    listed.sort_unstable();
    listed.dedup();
    assert_eq!(listed.len(), 300, "each passage once");
    let full =
        g.personalized_pagerank(&zero, &PprParams { tolerance: 1e-15, max_iterations: 200, ..Default::default() });
    for &(passage, score) in &rough.top {
        let truth = full.scores[e as usize + passage as usize];
        assert!((score - truth).abs() <= rough.bound + 1e-15, "{passage}: {score} vs {truth}");
    }
}

#[test]
fn a_stored_solution_gives_the_same_response_as_computing_it() {
    let dim = 24;
    for (e, p) in [(300u32, 200u32), (40, 400)] {
        let g = graph(e, p);
        let v = vectors(p as usize, dim);
        let solved = Solved::solve(&g, e as usize, &v, 0.5).expect("small graph");
        let read = Solved::from_bytes(&solved.to_bytes()).expect("its own bytes");
        assert_eq!(read, solved, "round trip");
        let computed = PassageResponse::compute(&g, e as usize, &v, 0.5).unwrap();
        let stored = PassageResponse::from_solved(&g, e as usize, &v, &read, Form::Auto).unwrap();
        assert_eq!(
            (stored.constant.clone(), stored.column_error.clone()),
            (computed.constant.clone(), computed.column_error.clone())
        );
        for trial in 0..4u32 {
            let query: Vec<f32> = (0..dim).map(|i| (((i as u32 * 29 + trial * 11) % 13) as f32 - 6.0) / 10.0).collect();
            let dense = v.dots(&query);
            let seeds = [(trial * 5 % (e - 1), 1.0), ((trial * 17 + 3) % (e - 1), 0.5)];
            let q = split_query(&seeds, &dense, &query, &v);
            let (a, b) = (ranked_passages(&g, &computed, &q, 10), ranked_passages(&g, &stored, &q, 10));
            let (a, b) = (a.expect("no ties"), b.expect("no ties"));
            assert_eq!(a.top, b.top, "{e}/{p} trial {trial}: the same passages and scores");
            assert_eq!(a.bound, b.bound);
        }
    }
    // Another graph's solution, or damaged bytes, are refused.
    let g = graph(300, 200);
    let solved = Solved::solve(&g, 300, &vectors(200, 24), 0.5).unwrap();
    assert!(PassageResponse::from_solved(&graph(40, 400), 40, &vectors(400, 24), &solved, Form::Auto).is_none());
    let bytes = solved.to_bytes();
    assert!(Solved::from_bytes(&bytes[..bytes.len() - 8]).is_err());
    assert!(Solved::from_bytes(b"not a walk at all").is_err());
}

fn split_equals_full(e: u32, p: u32, form: Form, first_stage: bool) {
    let dim = 24;
    let g = graph(e, p);
    let v = vectors(p as usize, dim);
    let mut response = PassageResponse::compute_as(&g, e as usize, &v, 0.5, form).expect("small graph");
    if first_stage {
        response.passage_screen = Screen::with_first_stage(&v, true);
    }
    let rows = matches!(response.half, Half::Rows { .. });
    assert_eq!(rows, form == Form::Rows || (form == Form::Auto && p <= e), "{form:?}");
    assert!(response.stats().contraction <= 0.5 * (1.0 + 1e-6), "{:?}", response.stats());
    let mut first = None;
    for trial in 0..8u32 {
        let query: Vec<f32> = (0..dim).map(|i| (((i as u32 * 31 + trial * 17) % 13) as f32 - 6.0) / 10.0).collect();
        let dense = v.dots(&query);
        // Entity seeds, one of them the dangling entity (e - 1).
        let entity_seeds = [(trial * 3 % (e - 1), 1.0), ((trial * 41 + 5) % (e - 1), 0.4), (e - 1, 0.2)];
        // Every other query brings the caller's pass over the screen: its int8 one,
        // or one of the first stage, which the walk passes over for its own.
        let every_row = trial % 4 == 1;
        let pass = response.passage_screen.screened(&query, 1, every_row).unwrap();
        assert_eq!(pass.coarse(), first_stage && !every_row);
        let screened = (trial % 2 == 1).then_some(&pass);
        let q = SplitQuery { screened, ..split_query(&entity_seeds, &dense, &query, &v) };
        let got = ranked_passages(&g, &response, &q, 10)
            .unwrap_or_else(|| panic!("{e}/{p} {form:?} trial {trial}: no ties here"));
        // The entities' products taken beforehand (as `ppr` takes them beside its
        // scans) rank exactly as those the walk takes itself; the rows form has none.
        let products = response.entity_products(&g, &query);
        assert_eq!(products.is_some(), !rows, "{form:?}");
        let given = SplitQuery { entity_products: products.as_deref(), ..q };
        let again = ranked_passages(&g, &response, &given, 10).expect("as above");
        assert_eq!(again.top, got.top, "{e}/{p} {form:?} trial {trial}");
        // The full walk from the same seeds, run to convergence.
        let (lo, hi) = range(&dense);
        let mut seeds: Vec<(u32, f64)> = entity_seeds.to_vec();
        seeds.extend(dense.iter().enumerate().map(|(i, &s)| (e + i as u32, 0.05 * ((s - lo) / (hi - lo)) as f64)));
        let full =
            g.personalized_pagerank(&seeds, &PprParams { tolerance: 1e-15, max_iterations: 200, ..Default::default() });
        let mut want: Vec<(usize, f64)> = (0..p as usize).map(|i| (i, full.scores[e as usize + i])).collect();
        want.sort_by(|x, y| crate::rank::desc(x.1, y.1).then(x.0.cmp(&y.0)));
        let got_ids: Vec<usize> = got.top.iter().map(|x| x.0 as usize).collect();
        let want_ids: Vec<usize> = want[..10].iter().map(|x| x.0).collect();
        assert_eq!(got_ids, want_ids, "{e}/{p} {form:?} trial {trial}");
        // Scores within the proven bound, which is far below the gaps it separates.
        for (g, w) in got.top.iter().zip(&want) {
            assert!((g.1 - w.1).abs() <= got.bound + 1e-15, "trial {trial}: {} vs {} (bound {})", g.1, w.1, got.bound);
        }
        assert!(got.bound < 1e-3 * want[0].1, "trial {trial}: bound {}", got.bound);
        // And the ranked walk the method ran before agrees.
        let ranked = g.ranked_pagerank(
            &seeds,
            &PprParams::default(),
            &Ranked { nodes: e as usize..(e + p) as usize, n: 10, within: None },
        );
        let mut r: Vec<(usize, f64)> = (0..p as usize).map(|i| (i, ranked.scores[e as usize + i])).collect();
        r.sort_by(|x, y| crate::rank::desc(x.1, y.1).then(x.0.cmp(&y.0)));
        assert_eq!(r[..10].iter().map(|x| x.0).collect::<Vec<_>>(), want_ids);
        // Within a filter (a third of the passages, a different third each trial): the
        // first 10 admitted of the full walk's order, from the split walk and from the
        // ranked walk.
        let within = Selection::of(p as usize, (0..p as usize).filter(|i| (i + trial as usize).is_multiple_of(3)));
        let want_within: Vec<usize> = want.iter().map(|x| x.0).filter(|&i| within.contains(i)).take(10).collect();
        let filtered = SplitQuery { within: Some(&within), ..q };
        let got_within = ranked_passages(&g, &response, &filtered, 10).expect("no ties here either");
        assert!(got_within.proven);
        assert_eq!(got_within.top.iter().map(|x| x.0 as usize).collect::<Vec<_>>(), want_within, "trial {trial}");
        let nodes = e as usize..(e + p) as usize;
        let ranked = g.ranked_pagerank(&seeds, &PprParams::default(), &Ranked { nodes, n: 10, within: Some(&within) });
        let mut r: Vec<(usize, f64)> = within.iter().map(|i| (i, ranked.scores[e as usize + i])).collect();
        r.sort_by(|x, y| crate::rank::desc(x.1, y.1).then(x.0.cmp(&y.0)));
        assert_eq!(r[..10].iter().map(|x| x.0).collect::<Vec<_>>(), want_within);
        first.get_or_insert((q.entity_seeds.to_vec(), query.clone(), dense.clone(), got));
    }
    // The push state kept between queries starts clean: the first query again, after
    // seven others, gives what it gave.
    let (seeds, query, dense, want) = first.unwrap();
    let again = ranked_passages(&g, &response, &split_query(&seeds, &dense, &query, &v), 10).unwrap();
    assert_eq!((again.top, again.pushes, again.residual), (want.top, want.pushes, want.residual));
}

#[test]
fn ties_and_uncovered_input_go_to_the_full_walk() {
    // Entities 0 - 1, passage 2 on entity 0, passage 3 on entity 1: mirror images.
    let g = PprGraph::from_edges(4, &[(0, 1, 1.0), (2, 0, 1.0), (3, 1, 1.0)]);
    let v = Matrix::from_flat(2, vec![0.6, 0.8, 0.8, 0.6]);
    for form in [Form::Rows, Form::Entities] {
        mirrored_passages_tie(&g, &PassageResponse::compute_as(&g, 2, &v, 0.5, form).unwrap(), &v);
    }

    let (e, p, dim) = (50u32, 30u32, 8);
    let g = graph(e, p);
    let v = vectors(p as usize, dim);
    let response = PassageResponse::compute(&g, e as usize, &v, 0.5).unwrap();
    let query = vec![0.1f32; dim];
    let dense = v.dots(&query);
    let q = split_query(&[(3, 1.0)], &dense, &query, &v);
    assert!(ranked_passages(&g, &response, &q, 5).is_some());
    let q = SplitQuery { dense_range: (f32::NAN, q.dense_range.1), ..q };
    assert!(ranked_passages(&g, &response, &q, 5).is_none(), "a range that is not finite goes to the walk");
    let q = SplitQuery { dense_range: range(&dense), damping: 0.6, ..q };
    assert!(ranked_passages(&g, &response, &q, 5).is_none(), "another damping than the response's");
    let other = vectors(p as usize + 1, dim);
    let q = SplitQuery { damping: 0.5, vectors: &other, ..q };
    assert!(ranked_passages(&g, &response, &q, 5).is_none(), "other vectors than the response's");
    // A passage linked to a passage: not the graph the split covers.
    let g = PprGraph::from_edges(4, &[(0, 1, 1.0), (2, 0, 1.0), (3, 2, 1.0)]);
    assert!(PassageResponse::compute(&g, 2, &Matrix::from_flat(2, vec![0.6, 0.8, 0.8, 0.6]), 0.5).is_none());
}

fn mirrored_passages_tie(g: &PprGraph, response: &PassageResponse, v: &Matrix) {
    // Equal dense scores and mirrored entity seeds: the two passages tie.
    let query = [0.6f32, 0.6];
    let dense = v.dots(&query);
    assert_eq!(dense[0], dense[1]);
    let seeds = [(0u32, 1.0), (1, 1.0)];
    let q = split_query(&seeds, &dense, &query, v);
    assert!(ranked_passages(g, response, &q, 1).is_none(), "tied passages are not proven apart");
    // Break the tie: passage 2 (index 0) first.
    let seeds = [(0u32, 1.0), (1, 0.5)];
    let q = SplitQuery { entity_seeds: &seeds, ..q };
    assert_eq!(ranked_passages(g, response, &q, 1).unwrap().top[0].0, 0);
}

#[test]
fn without_passage_seeds_the_push_alone_ranks_as_the_full_walk() {
    // (On graph(40, 400) passages j and j + 39 have the same entities: without passage
    // seeds they tie, and go to the full walk.)
    for (e, p, form) in [(300u32, 200u32, Form::Rows), (300, 200, Form::Entities)] {
        let g = graph(e, p);
        let v = vectors(p as usize, 8);
        let response = PassageResponse::compute_as(&g, e as usize, &v, 0.5, form).unwrap();
        for trial in 0..4u32 {
            let seeds = [(trial * 7 % (e - 1), 1.0), ((trial * 13 + 2) % (e - 1), 0.3)];
            let query = vec![0.2f32; 8];
            let q = SplitQuery { passage_weight: 0.0, ..split_query(&seeds, &v.dots(&query), &query, &v) };
            let got = ranked_passages(&g, &response, &q, 10).expect("no ties here");
            let full = g.personalized_pagerank(
                &seeds,
                &PprParams { tolerance: 1e-15, max_iterations: 200, ..Default::default() },
            );
            let mut want: Vec<(usize, f64)> = (0..p as usize).map(|i| (i, full.scores[e as usize + i])).collect();
            want.sort_by(|x, y| crate::rank::desc(x.1, y.1).then(x.0.cmp(&y.0)));
            let ids: Vec<usize> = got.top.iter().map(|x| x.0 as usize).collect();
            assert_eq!(ids, want[..10].iter().map(|x| x.0).collect::<Vec<_>>(), "{e}/{p} trial {trial}");
            for (g, w) in got.top.iter().zip(&want) {
                assert!((g.1 - w.1).abs() <= got.bound + 1e-15, "{} vs {} (bound {})", g.1, w.1, got.bound);
            }
        }
    }
}

#[test]
fn proven_top_needs_every_gap_covered() {
    const ALL: [usize; 4] = [0, 1, 2, 3];
    let scores = [5.0, 4.0, 3.9, 1.0];
    assert_eq!(proven_top(&scores, &[0.01; 4], &ALL, 3, f64::NEG_INFINITY), Some(vec![0, 1, 2]));
    let loose = [0.01, 0.01, 0.01, 3.0];
    assert_eq!(proven_top(&scores, &loose, &ALL, 3, f64::NEG_INFINITY), None, "passage 3 might pass passage 2");
    assert_eq!(
        proven_top(&scores, &loose, &[0, 1, 2], 3, f64::NEG_INFINITY),
        Some(vec![0, 1, 2]),
        "3 is out of reach: not asked"
    );
    assert_eq!(
        proven_top(&scores, &[0.01; 4], &[1, 3], 1, f64::NEG_INFINITY),
        Some(vec![1]),
        "the best among those asked"
    );
    assert_eq!(proven_top(&scores, &[0.06; 4], &ALL, 2, f64::NEG_INFINITY), None, "1 and 2 overlap");
    assert_eq!(
        proven_top(&[1.0, 3.0, 2.0, 0.5], &[0.1; 4], &ALL, 4, f64::NEG_INFINITY),
        Some(vec![1, 2, 0, 3]),
        "all of them"
    );
    assert_eq!(
        proven_top(&[1.0, 2.0, 2.0, 0.5], &[0.0; 4], &ALL, 1, f64::NEG_INFINITY),
        None,
        "a tie is never proven apart"
    );
    assert_eq!(proven_top(&[1.0, 2.0, 2.0, 0.5], &[0.0; 4], &ALL, 3, f64::NEG_INFINITY), None, "nor inside the head");
    assert_eq!(proven_top(&scores, &[0.0; 4], &ALL, 0, f64::NEG_INFINITY), Some(vec![]));
    // Passages outside `among` follow the head, each below `outside`.
    assert_eq!(proven_top(&scores, &[0.01; 4], &[0, 1, 2], 3, 3.95), None, "one outside might pass passage 2");
    assert_eq!(proven_top(&scores, &[0.01; 4], &[0, 1, 2], 3, 3.5), Some(vec![0, 1, 2]));
}
