//! The local walk repair (issue 54) on a real index: a chain of one-document edits, the
//! stored walk repaired after each to several per-node tolerances (`Solved::repair_to`),
//! and at checkpoints ppr, auto and phasegraph ranked with each repaired walk against the
//! full walk (`split = false`): the same top 10 for every question, and how many rankings
//! the split walk proved (the others ran the full walk). Also what each repair cost
//! against a solve of the same graph.
//!
//! ```text
//! HOPRAG_REPAIR_INDEX=/tmp/w54/idx HOPRAG_REPAIR_EDITS=100 HOPRAG_REPAIR_CHECKS=1,10,100 \
//!     nice -n 19 cargo test -p hoprag --test walk_repair_local -- --ignored --nocapture
//! ```
//!
//! `HOPRAG_REPAIR_TOLERANCES` (default `1e-3,1e-4,1e-5`), `HOPRAG_REPAIR_QUERIES`
//! (default 100, from 2wiki-hipporag). The index is copied first; edits run with the walk
//! deferred, and the walks are repaired here, one chain per tolerance.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;

use hoprag::embed::{Embedder, EmbedderSettings, TextKind};
use hoprag::graph::ppr::{PprGraph, PprParams};
use hoprag::graph::split_ppr::{Origins, Solved, REPAIR_TOLERANCE};
use hoprag::graph::{EntityGraph, GraphContext};
use hoprag::index::{Index, VectorIndex};
use hoprag::llm::Llm;
use hoprag::progress::Silent;
use hoprag::retrieve::ordered::Ordered;
use hoprag::retrieve::registry::{self, GraphKind, Resources};
use hoprag::retrieve::{MethodSections, Query, Retriever};
use hoprag::store::edit::{EditOptions, Embedders, Request, WalkUpdate};
use hoprag::store::{self, Store};
use hoprag::{Config, Engine, Result};

/// The methods ranked, by registry name; the last is phasegraph with no push budget
/// (`split_budget = 0`: a ranking it cannot prove goes to the full walk), beside its
/// default budget, under which a push past 2^19 steps ranks by its estimates (an
/// approximation of its own, whatever the stored walk: phasegraph has no passage seeds,
/// so it reads none of the stored walk's values).
const METHODS: [&str; 4] = ["ppr", "auto", "phasegraph", "phasegraph"];
const TOP: usize = 10;

/// An engine's resources with another graph context (the same graph, another walk).
struct WithWalk<'a> {
    engine: &'a Engine,
    graph: Arc<GraphContext>,
    sections: MethodSections,
}

impl Resources for WithWalk<'_> {
    fn index(&self) -> Arc<Index> {
        self.engine.index.clone()
    }
    fn vectors(&self) -> Arc<dyn VectorIndex> {
        self.engine.vectors()
    }
    fn embedder(&self) -> Arc<dyn Embedder> {
        self.engine.embedder.clone()
    }
    fn graph(&self) -> Result<Arc<GraphContext>> {
        Ok(self.graph.clone())
    }
    fn graph_kind(&self) -> GraphKind {
        self.engine.graph_kind()
    }
    fn llm(&self, method: &str) -> Result<Arc<dyn Llm>> {
        Err(hoprag::Error::Config(format!("{method}: no LLM here")))
    }
    fn llm_concurrency(&self) -> usize {
        1
    }
    fn folder(&self) -> Option<&Path> {
        None
    }
    fn method(&self, spec: &str) -> Result<Box<dyn Retriever>> {
        (registry::lookup(spec)?.build)(&self.sections, self)
    }
    fn method_with(&self, spec: &str, sections: &MethodSections) -> Result<Box<dyn Retriever>> {
        let other = WithWalk { engine: self.engine, graph: self.graph.clone(), sections: sections.clone() };
        (registry::lookup(spec)?.build)(sections, &other)
    }
}

/// How a ranking was made: the split walk proven, split unproven, the full walk, no walk.
fn ranked_by(trace: &hoprag::retrieve::Trace) -> usize {
    for step in &trace.steps {
        match (step.detail.get("split").and_then(Value::as_bool), step.detail.get("proven").and_then(Value::as_bool)) {
            (Some(true), Some(true)) => return 0,
            (Some(true), _) => return 1,
            (Some(false), _) => return 2,
            _ => {}
        }
    }
    3
}

type Lists = Vec<Vec<Vec<u32>>>;

/// Each method's top 10 for each question, and per method how they were ranked.
fn rank(res: &dyn Resources, sections: &MethodSections, n: usize, questions: &[Query]) -> (Lists, Vec<[usize; 4]>) {
    let (mut lists, mut how) = (Vec::new(), Vec::new());
    for (i, m) in METHODS.into_iter().enumerate() {
        let mut sections = sections.clone();
        if i == 3 {
            sections.phasegraph.graph.ppr.split_budget = 0;
        }
        let r = Ordered::new((registry::lookup(m).unwrap().build)(&sections, res).unwrap(), n);
        let mut count = [0; 4];
        let mut l = Vec::new();
        for q in questions {
            let got = r.retrieve(q, TOP).unwrap();
            count[ranked_by(&got.trace)] += 1;
            l.push(got.hits.iter().map(|h| h.passage).collect());
        }
        lists.push(l);
        how.push(count);
    }
    (lists, how)
}

fn context(engine: &Engine, graph: &EntityGraph, walk: Arc<Solved>) -> Arc<GraphContext> {
    let mut g = graph.clone();
    g.walk = Some(walk);
    let mut context = GraphContext::new(Arc::new(g));
    context.embedder = engine.graph().unwrap().embedder.clone();
    Arc::new(context)
}

fn env<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn ms(xs: &[f64]) -> String {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => "-".into(),
        n => format!(
            "p50 {:.0} ms, mean {:.0} ms, max {:.0} ms",
            v[n / 2] * 1e3,
            v.iter().sum::<f64>() / n as f64 * 1e3,
            v[n - 1] * 1e3
        ),
    }
}

#[test]
#[ignore = "minutes: a chain of edits on a real index (HOPRAG_REPAIR_INDEX)"]
fn measure_the_local_repair() {
    let source = std::env::var("HOPRAG_REPAIR_INDEX").expect("HOPRAG_REPAIR_INDEX: an index with a graph and walk");
    let edits: usize = env("HOPRAG_REPAIR_EDITS", 10);
    let checks: Vec<usize> = std::env::var("HOPRAG_REPAIR_CHECKS")
        .unwrap_or_else(|_| "1,10".into())
        .split(',')
        .map(|s| s.trim().parse().unwrap())
        .collect();
    let mut tolerances: Vec<f64> = std::env::var("HOPRAG_REPAIR_TOLERANCES")
        .unwrap_or_else(|_| "1e-3,1e-4,1e-5".into())
        .split(',')
        .map(|s| s.trim().parse().unwrap())
        .collect();
    if !tolerances.contains(&REPAIR_TOLERANCE) {
        tolerances.push(REPAIR_TOLERANCE);
    }
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("idx");
    common::copy_tree(Path::new(&source), &dir);
    let store: Arc<dyn Store> = store::folder(&dir);
    let first = Arc::new(store.load().unwrap());
    let embedders = Embedders::for_manifest(&first.manifest, &EmbedderSettings::default()).unwrap();
    let questions: Vec<String> =
        std::fs::read_to_string(common::shared_data().unwrap().join("2wiki-hipporag/questions.jsonl"))
            .unwrap()
            .lines()
            .take(env("HOPRAG_REPAIR_QUERIES", 100))
            .map(|l| serde_json::from_str::<Value>(l).unwrap()["question"].as_str().unwrap().to_string())
            .collect();
    let vectors = embedders.passages.embed(&questions, TextKind::Query).unwrap();
    let questions: Vec<Query> =
        questions.iter().zip(vectors).map(|(t, v)| Query::with_embedding(t.clone(), v)).collect();
    let engine =
        Engine::with_index(store.clone(), first.clone(), embedders.passages.clone(), Config::default()).unwrap();
    let mut graph: EntityGraph = engine.graph().unwrap().graph().clone();
    let stored = graph.walk.clone().expect("the index stores its walk");
    let damping = PprParams::default().damping;
    let mut walks: Vec<Arc<Solved>> = tolerances.iter().map(|_| stored.clone()).collect();
    let mut secs: Vec<Vec<f64>> = vec![Vec::new(); tolerances.len()];
    let mut declined = vec![0usize; tolerances.len()];
    let original = first.clone();
    let mut index = first;
    let n = index.len();
    eprintln!("{n} passages, {} questions, {edits} edits, tolerances {tolerances:?}", questions.len());
    for k in 0..edits {
        // A passage of the index as it was: deleted, then put back (embedded again).
        let victim = original.passage(((k / 2 * 613 + 101) % original.len()) as u32).clone();
        let request =
            if k % 2 == 0 { Request::Delete(vec![victim.id.clone()]) } else { Request::Upsert(vec![victim.clone()]) };
        let options =
            EditOptions { walk: WalkUpdate::Defer, source: "local repair bench".into(), ..Default::default() };
        store::edit::edit(store.as_ref(), &request, &embedders, &options, &Silent).unwrap();
        let next = Arc::new(store.load().unwrap());
        let engine =
            Engine::with_index(store.clone(), next.clone(), embedders.passages.clone(), Config::default()).unwrap();
        let new_graph: EntityGraph = engine.graph().unwrap().graph().clone();
        // Origins as an edit finds them: entities by key, passages by title and text.
        let entities: Vec<Option<u32>> = new_graph.entities.iter().map(|key| graph.entity_id(key)).collect();
        let mut of_content: std::collections::HashMap<(&str, &str), Vec<u32>> = Default::default();
        for (i, p) in index.passages().as_slice().iter().enumerate().rev() {
            of_content.entry((p.title.as_str(), p.text.as_str())).or_default().push(i as u32);
        }
        let kept: Vec<Option<u32>> = next
            .passages()
            .iter()
            .map(|p| of_content.get_mut(&(p.title.as_str(), p.text.as_str())).and_then(Vec::pop))
            .collect();
        let origins = Origins { entities: &entities, passages: &kept };
        let (old_ppr, ppr) = (PprGraph::from_entity_graph(&graph), PprGraph::from_entity_graph(&new_graph));
        let e = new_graph.entities.len();
        let mut line = format!("edit {k} ({}):", if k % 2 == 0 { "delete" } else { "add" });
        for (t, &tolerance) in tolerances.iter().enumerate() {
            let start = Instant::now();
            walks[t] = match walks[t].repair_to(&old_ppr, &ppr, e, &origins, next.vectors(), tolerance) {
                Ok((solved, s)) => {
                    secs[t].push(start.elapsed().as_secs_f64());
                    line += &format!(
                        " [{tolerance:e}: {:.3}s (compare {:.3}s), {} changed, {} touched of {}, {} steps ({:.4} of a solve), \
                         L1 {:.2}x, node {:.2}x{}]",
                        s.secs,
                        s.compare_secs,
                        s.changed,
                        s.touched,
                        s.entities,
                        s.steps,
                        s.steps as f64 / s.solve_steps as f64,
                        s.bound_ratio,
                        s.node_ratio,
                        if s.refreshed { ", refreshed" } else { "" }
                    );
                    Arc::new(solved)
                }
                Err(why) => {
                    declined[t] += 1;
                    line += &format!(" [{tolerance:e}: declined: {why}]");
                    Arc::new(walks[t].solve_warm(&ppr, e, &entities, next.vectors()).unwrap())
                }
            };
        }
        eprintln!("{line}");
        if checks.contains(&(k + 1)) {
            let start = Instant::now();
            let solved = Arc::new(Solved::solve(&ppr, e, next.vectors(), damping).unwrap());
            eprintln!(
                "after {} edits: a solve of this graph {:.3}s ({} iterations)",
                k + 1,
                start.elapsed().as_secs_f64(),
                solved.iterations()
            );
            let sections = Config::default().methods;
            let mut full = sections.clone();
            full.ppr.ppr.split = false;
            full.phasegraph.graph.ppr.split = false;
            let res = |walk: &Arc<Solved>, s: &MethodSections| WithWalk {
                engine: &engine,
                graph: context(&engine, &new_graph, walk.clone()),
                sections: s.clone(),
            };
            let (want, _) = rank(&res(&solved, &full), &full, next.len(), &questions);
            let (fresh, how) = rank(&res(&solved, &sections), &sections, next.len(), &questions);
            let fresh_differ: Vec<usize> = (0..METHODS.len())
                .map(|m| (0..questions.len()).filter(|&q| fresh[m][q] != want[m][q]).count())
                .collect();
            eprintln!(
                "  solved walk: (proven, unproven, full walk, none) {how:?}, lists differing from the full walk \
                 {fresh_differ:?}"
            );
            for (t, &tolerance) in tolerances.iter().enumerate() {
                let (got, how) = rank(&res(&walks[t], &sections), &sections, next.len(), &questions);
                // phasegraph under its budget: as with the solved walk (its estimates read
                // no stored value); every other list: the full walk's.
                let phase = (0..questions.len()).filter(|&q| got[2][q] != fresh[2][q]).count();
                let differ: Vec<String> = [0, 1, 3]
                    .into_iter()
                    .flat_map(|m| {
                        let (got, want) = (&got[m], &want[m]);
                        (0..questions.len())
                            .filter(move |&q| got[q] != want[q])
                            .map(move |q| format!("{} q{q}", METHODS[m]))
                    })
                    .collect();
                eprintln!(
                    "  tolerance {tolerance:e}: (proven, unproven, full walk, none) {how:?}; lists differing from the full walk: {}; phasegraph (budget) differing from the solved walk's: {phase}",
                    differ.len()
                );
                assert_eq!(phase, 0, "phasegraph with the repaired walk, tolerance {tolerance:e}");
                assert!(differ.is_empty(), "tolerance {tolerance:e} after {} edits: {differ:?}", k + 1);
            }
        }
        graph = new_graph;
        index = next;
    }
    for (t, &tolerance) in tolerances.iter().enumerate() {
        eprintln!("tolerance {tolerance:e}: repairs {}, declined {}", ms(&secs[t]), declined[t]);
    }
}
