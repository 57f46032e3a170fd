//! The walk as one call: passages ranked by Personalized PageRank from a query's seeds,
//! with a typed explanation when asked for (as tantivy's `Weight::explain` returns an
//! `Explanation`).
//!
//! [`GraphContext::walker`] takes a method's walk parameters and the passage vectors once
//! per query and decides whether the split walk ([`super::split_ppr`]) can run; the
//! [`Walker`] then serves the method's dense step and entity products from the split
//! walk's screen (both optional: a caller that has neither gets them computed), and
//! [`Walker::rank`] adds HippoRAG 2's passage seeds, runs the split walk where it proves
//! its ranking and the full walk where it does not, and ranks the passages.

use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::linking::{FactMatch, LinkedEntity};
use super::ppr::{PprParams, PprResult, Ranked};
use super::split_ppr::{ranked_passages, PassageResponse, SplitQuery, SplitRanking};
use super::GraphContext;
use crate::corpus::PassageIdx;
use crate::error::Result;
use crate::filter::Selection;
use crate::index::{Extremes, Matrix, Screened};

/// The trace step of the walk itself (split or full), by the algorithm's name.
pub const WALK_STEP: &str = "ppr";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PassageScoring {
    /// The PPR mass of the passage node (HippoRAG 2).
    PassageNode,
    /// The summed PPR mass of the passage's entities (HippoRAG 1).
    EntitySum,
}

/// The deepest ranking the split walk is asked for; deeper ones (a method filtered the
/// general way asks for a ranking deep enough to hold k matches) go to the full walk,
/// which ranks every passage in one power iteration. A filtered `ppr` asks for k within
/// the filter ([`WalkInput::within`]) instead.
pub const SPLIT_MAX_DEPTH: usize = 128;

/// What the walk reads of a graph method's parameters.
#[derive(Debug, Clone, Copy)]
pub struct WalkParams {
    pub ppr: PprParams,
    pub scoring: PassageScoring,
    /// Weight of a passage node's seed relative to its min-max normalised dense score;
    /// 0 seeds entities only.
    pub passage_weight: f64,
}

impl WalkParams {
    /// Whether the walk runs split by linearity: asked for, and passages ranked by their
    /// own nodes (without passage seeds the push alone runs).
    fn splits(&self) -> bool {
        self.ppr.split && self.scoring == PassageScoring::PassageNode && self.passage_weight >= 0.0
    }
}

/// The query's dense scores, as far as the caller has them.
#[derive(Clone, Copy)]
pub enum Dense<'a> {
    /// Every passage's.
    All(&'a [f32]),
    /// The pass over the passage vectors' screen, and from it the lowest and the highest
    /// score over every passage, exactly: all the split walk needs; the full walk
    /// computes the scores.
    Screened(&'a Screened, f32, f32),
}

/// [`Dense`], owned.
pub enum DenseScores {
    All(Vec<f32>),
    Screened(Screened, f32, f32),
}

impl DenseScores {
    pub fn view(&self) -> Dense<'_> {
        match self {
            DenseScores::All(all) => Dense::All(all),
            DenseScores::Screened(pass, lo, hi) => Dense::Screened(pass, *lo, *hi),
        }
    }
}

/// Where the walk records its steps, with their timings: the calling method's trace.
pub trait StepLog {
    fn record(&mut self, name: &str, micros: u64, detail: Value);
}

/// Runs `f` as a named step of `log`.
fn step<T>(log: &mut dyn StepLog, name: &str, f: impl FnOnce() -> Result<(T, Value)>) -> Result<T> {
    let t = Instant::now();
    let (out, detail) = f()?;
    log.record(name, t.elapsed().as_micros() as u64, detail);
    Ok(out)
}

/// A ranked list's first few passages and scores, for a step's detail.
fn top_detail(list: &[(PassageIdx, f32)]) -> Value {
    json!(list.iter().take(10).map(|(p, s)| json!([p, s])).collect::<Vec<_>>())
}

/// One query's walk: what [`Walker::rank`] needs besides the graph and the parameters.
pub struct WalkInput<'a> {
    /// The entity seeds (node, weight), from linking; the passage seeds are added here.
    pub entity_seeds: Vec<(u32, f64)>,
    /// The query in the passage vectors' space.
    pub query: &'a [f32],
    /// What the caller has of the dense scores; `None`: taken here when needed.
    pub dense: Option<Dense<'a>>,
    /// The split walk's entity products, when the caller took them
    /// ([`Walker::entity_products`]); `None`: taken here when needed.
    pub entity_products: Option<&'a [f64]>,
    /// Passages to rank.
    pub depth: usize,
    /// Rank only the passages a metadata filter admits: the first `depth` of them in the
    /// walk's order over every passage (the walk itself still runs over the whole graph).
    pub within: Option<&'a Selection>,
    /// Whether to explain the ranking ([`WalkDetail`]); off, nothing is spent on it.
    pub explain: bool,
}

/// The walk's ranking, and its explanation when asked for.
pub struct Walked {
    /// Best first, at most `depth`, zero-mass passages left out.
    pub passages: Vec<(PassageIdx, f32)>,
    pub detail: Option<WalkDetail>,
}

/// Why a graph method ranked the passages as it did: the seeds it linked, the facts
/// nearest the question, and its walk.
#[derive(Debug, Clone)]
pub struct WalkExplanation {
    /// The method that walked.
    pub method: String,
    /// The entity seeds, heaviest first, as linking found them.
    pub linked: Vec<LinkedEntity>,
    /// The facts nearest the question, best first (empty when facts are not linked).
    pub facts: Vec<FactMatch>,
    /// `None` when no entity was linked: the method answered with dense retrieval.
    pub walk: Option<WalkDetail>,
}

/// The walk of one query.
#[derive(Debug, Clone)]
pub struct WalkDetail {
    /// Entity nodes: node `e` is an entity below it, passage `node - entities` above.
    pub entities: usize,
    /// Passage nodes seeded (every graph passage with dense scores and a positive
    /// passage weight, else 0), and the weight of a seed of normalised score 1.
    pub passage_seeds: usize,
    pub passage_weight: f64,
    /// How the ranking was found.
    pub ranking: RankedBy,
    /// Every node's mass.
    pub mass: NodeMass,
}

/// How the walk ranked the passages.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "walk", rename_all = "snake_case")]
pub enum RankedBy {
    /// The split walk: the passage seeds' half precomputed, the entity seeds pushed. Each
    /// score in `top` is within `bound` of the full walk's; `proven`: the bounds separate
    /// the ranking (it is the full walk's), else it is by the estimates (the push ran out
    /// of its budget).
    Split { proven: bool, pushes: usize, residual: f64, bound: f64, top: Vec<(PassageIdx, f64)> },
    /// The full walk by power iteration; `ranked`: it stopped once the passages' order
    /// was proven.
    Full { iterations: usize, residual: f64, ranked: bool },
}

/// Every node's PPR mass.
#[derive(Debug, Clone)]
pub struct NodeMass {
    pub scores: Vec<f64>,
    pub iterations: usize,
    pub residual: f64,
    /// Whether the masses are the ones the method's own walk computed; `false` after the
    /// split walk, which computes no node's mass but the ranked passages': the full walk
    /// from the same seeds then runs for the explanation.
    pub from_method: bool,
}

impl NodeMass {
    fn of(r: PprResult, from_method: bool) -> NodeMass {
        NodeMass { scores: r.scores, iterations: r.iterations, residual: r.residual, from_method }
    }
}

impl WalkDetail {
    /// The entities with mass, heaviest first (ties by node).
    pub fn heaviest_entities(&self) -> Vec<(usize, f64)> {
        self.heaviest(0..self.entities)
    }

    /// The passage nodes with mass, heaviest first (ties by node).
    pub fn heaviest_passages(&self) -> Vec<(usize, f64)> {
        self.heaviest(self.entities..self.mass.scores.len())
    }

    fn heaviest(&self, nodes: std::ops::Range<usize>) -> Vec<(usize, f64)> {
        let scores = &self.mass.scores;
        let mut v: Vec<(usize, f64)> = nodes.map(|i| (i, scores[i])).filter(|x| x.1 > 0.0).collect();
        v.sort_by(|a, b| crate::rank::desc(a.1, b.1).then(a.0.cmp(&b.0)));
        v
    }
}

/// One query's walk over a graph, with the split walk's precomputed half looked up once.
pub struct Walker<'a> {
    ctx: &'a GraphContext,
    passages: &'a Matrix,
    params: WalkParams,
    /// The passage seeds' walk, when the split walk is asked for and the graph has one.
    split: Option<Arc<PassageResponse>>,
}

impl GraphContext {
    /// The walk of one query over `passages` (the index's passage vectors, for the passage
    /// seeds), looking up (on first use, computing) the split walk's precomputed half.
    pub fn walker<'a>(&'a self, passages: &'a Matrix, params: WalkParams) -> Walker<'a> {
        let split = params
            .splits()
            .then(|| match self.walk_in_background.load(std::sync::atomic::Ordering::Acquire) {
                true => self.passage_response_if_ready(passages, params.ppr.damping),
                false => self.passage_response(passages, params.ppr.damping),
            })
            .flatten();
        Walker { ctx: self, passages, params, split }
    }
}

impl Walker<'_> {
    /// The split walk's response when it covers every one of these passages: then the
    /// dense step reads the passages' int8 screen instead of their vectors.
    fn response(&self) -> Option<&PassageResponse> {
        self.split.as_deref().filter(|r| r.passages() == self.passages.rows())
    }

    /// Whether [`Walker::dense_scores`] reads the split walk's screen.
    pub fn screens_dense(&self) -> bool {
        self.response().is_some()
    }

    /// The best `depth` dense passages and what the walk needs of the dense scores: from
    /// the passages' int8 screen when the split walk will run (exact; every score only if
    /// the walk falls back to the full one), else every score.
    pub fn dense_scores(&self, q: &[f32], depth: usize) -> (Vec<(PassageIdx, f32)>, DenseScores) {
        if let Some(r) = self.response() {
            if let Some((pass, Extremes { top, min: Some(lo), max: Some(hi), .. })) =
                screen_pass(r, self.passages, q, depth)
            {
                return (top, DenseScores::Screened(pass, lo, hi));
            }
        }
        let all = self.passages.dots(q);
        (crate::rank::top(&all, depth), DenseScores::All(all))
    }

    /// Whether the split walk reads entity products ([`Walker::entity_products`]): it
    /// will run, with passage seeds, in the entity form.
    pub fn takes_entity_products(&self) -> bool {
        self.params.passage_weight > 0.0 && self.response().is_some_and(|r| r.has_entity_form())
    }

    /// The split walk's entity products for `q`, which need the query alone (a caller
    /// takes them beside its other scans); `None` where [`Walker::takes_entity_products`]
    /// is false, or for a query of another dimension.
    pub fn entity_products(&self, q: &[f32]) -> Option<Vec<f64>> {
        let response = self.response().filter(|_| self.takes_entity_products())?;
        response.entity_products(&self.ctx.ppr, q)
    }

    /// HippoRAG 2's walk: the entity seeds and every passage's dense-score seed, walked,
    /// the passages ranked by their mass. The split walk where it applies and proves its
    /// ranking (or past its budget, ranks by its estimates), else the full walk.
    pub fn rank(&self, input: WalkInput<'_>, log: &mut dyn StepLog) -> Result<Walked> {
        let WalkInput { entity_seeds, query, dense, entity_products, depth, within, explain } = input;
        let p = &self.params;
        let (mut owned, mut screened) = (None, None);
        let dense = match dense {
            Some(d) => Some(d),
            None if p.passage_weight > 0.0 && self.passages.rows() > 0 => match self.dense_range(query, log)? {
                Some((pass, lo, hi)) => Some(Dense::Screened(screened.insert(pass), lo, hi)),
                None => Some(Dense::All(owned.insert(self.every_dense_score(query, log)?).as_slice())),
            },
            None => None,
        };
        // Without passage seeds the split walk reads no dense score. A deep ranking (a
        // filtered query's, past SPLIT_MAX_DEPTH) would spend the split walk's budget
        // proving an order the full walk gives outright.
        if p.splits() && depth <= SPLIT_MAX_DEPTH && (dense.is_some() || p.passage_weight == 0.0) {
            let split = SplitInput { query, dense, entity_products, entity_seeds: &entity_seeds, depth, within };
            if let Some((passages, split)) = self.split_walk(&split, log)? {
                let detail = match explain {
                    true => Some(self.explain_split(query, dense, entity_seeds, split, log)?),
                    false => None,
                };
                return Ok(Walked { passages, detail });
            }
        }
        self.full_walk(entity_seeds, query, dense, (depth, within), explain, log)
    }

    /// The lowest and highest dense score over the passages, exactly, from one pass over
    /// the passage vectors' screen (at 1,000,000 passages its 4-bit first stage, 192 MB
    /// read instead of 1.5 GB), when the split walk will run: all it needs of the dense
    /// scores, and the pass itself, whose intervals the walk reads. `None` when it will
    /// not.
    fn dense_range(&self, query: &[f32], log: &mut dyn StepLog) -> Result<Option<(Screened, f32, f32)>> {
        let Some(response) = self.response() else {
            return Ok(None);
        };
        let rows = self.passages.rows();
        step(log, "dense range", || {
            let Some((pass, found)) = screen_pass(response, self.passages, query, 1) else {
                return Ok((None, json!({"passages": rows, "reason": "the query is not finite"})));
            };
            let detail = json!({"passages": rows, "rescored": found.rescored});
            Ok((found.min.zip(found.max).map(|(lo, hi)| (pass, lo, hi)), detail))
        })
    }

    fn every_dense_score(&self, query: &[f32], log: &mut dyn StepLog) -> Result<Vec<f32>> {
        step(log, "dense scores", || {
            let d = self.passages.dots(query);
            let detail = json!({"passages": d.len()});
            Ok((d, detail))
        })
    }

    /// The walk split by linearity: the passage seeds' part from the graph's precomputed
    /// response, the entity seeds' by local push. `None` (and a step saying why) when it
    /// does not apply or cannot prove the ranking: the full walk follows.
    fn split_walk(&self, input: &SplitInput, log: &mut dyn StepLog) -> Result<Option<SplitWalked>> {
        let Some(response) = self.split.as_deref() else {
            return Ok(None);
        };
        let (dense_range, screened) = match input.dense {
            // No passage seeds.
            None => ((0.0, 0.0), None),
            Some(Dense::All(all)) if all.len() >= response.passages() => {
                let graph_passages = &all[..response.passages()];
                if graph_passages.iter().any(|s| !s.is_finite()) {
                    return Ok(None);
                }
                (crate::rank::range(graph_passages), None)
            }
            // A range over more passages than the graph's is not theirs.
            Some(Dense::Screened(pass, lo, hi)) if self.passages.rows() == response.passages() => {
                ((lo, hi), Some(pass))
            }
            _ => return Ok(None),
        };
        let p = &self.params;
        let query = SplitQuery {
            entity_seeds: input.entity_seeds,
            dense_range,
            query: input.query,
            passage_weight: p.passage_weight,
            damping: p.ppr.damping,
            vectors: self.passages,
            budget: p.ppr.split_budget,
            screened,
            entity_products: input.entity_products,
            within: input.within,
        };
        step(log, WALK_STEP, || {
            let split = ranked_passages(&self.ctx.ppr, response, &query, input.depth);
            let list: Option<Vec<(PassageIdx, f32)>> =
                split.as_ref().map(|s| s.top.iter().map(|&(p, x)| (p, x as f32)).filter(|x| x.1 > 0.0).collect());
            let detail = match (&split, &list) {
                (Some(s), Some(l)) => {
                    json!({"split": true, "proven": s.proven, "pushes": s.pushes, "residual": s.residual,
                           "bound": s.bound, "passages": l.len(), "top": top_detail(l)})
                }
                _ => {
                    json!({"split": false, "reason": "the bounds did not separate the ranking; the full walk follows"})
                }
            };
            Ok((list.zip(split), detail))
        })
    }

    /// The full walk from the entity seeds and every passage's dense score.
    fn full_walk(
        &self,
        mut seeds: Vec<(u32, f64)>,
        query: &[f32],
        dense: Option<Dense<'_>>,
        (depth, within): (usize, Option<&Selection>),
        explain: bool,
        log: &mut dyn StepLog,
    ) -> Result<Walked> {
        let p = &self.params;
        let g = self.ctx.graph();
        let (e, graph_passages) = (g.entities.len(), g.passage_entities.len());
        // The full walk seeds every passage with its score.
        let mut owned = None;
        let dense = match dense {
            Some(Dense::Screened(..)) => Some(owned.insert(self.every_dense_score(query, log)?).as_slice()),
            Some(Dense::All(all)) => Some(all),
            None => None,
        };
        let mut passage_seeds = 0;
        if let Some(dense) = dense.filter(|_| p.passage_weight > 0.0) {
            passage_seeds = step(log, "passage seeds", || {
                let n = push_passage_seeds(&mut seeds, dense, e, graph_passages, p.passage_weight);
                Ok((n, json!({"passages": n, "weight": p.passage_weight})))
            })?;
        }
        let (passages, r) = step(log, WALK_STEP, || {
            let r = match p.scoring {
                // Only the passages' order is used: stop once it is proven.
                PassageScoring::PassageNode => {
                    let ranked = Ranked { nodes: e..e + graph_passages, n: depth, within };
                    self.ctx.ppr.ranked_pagerank(&seeds, &p.ppr, &ranked)
                }
                PassageScoring::EntitySum => self.ctx.ppr.personalized_pagerank(&seeds, &p.ppr),
            };
            let mut scored: Vec<(PassageIdx, f32)> = (0..graph_passages)
                .map(|i| {
                    let s = match p.scoring {
                        PassageScoring::PassageNode => r.scores[e + i],
                        PassageScoring::EntitySum => g.passage_entities[i].iter().map(|&x| r.scores[x as usize]).sum(),
                    };
                    (i as PassageIdx, s as f32)
                })
                .filter(|x| x.1 > 0.0 && within.is_none_or(|s| s.contains(x.0 as usize)))
                .collect();
            crate::rank::sort_hits(&mut scored);
            scored.truncate(depth);
            let detail = json!({"iterations": r.iterations, "residual": r.residual, "ranked": r.ranked,
                                "passages": scored.len(), "top": top_detail(&scored)});
            Ok(((scored, r), detail))
        })?;
        let detail = explain.then(|| WalkDetail {
            entities: e,
            passage_seeds,
            passage_weight: p.passage_weight,
            ranking: RankedBy::Full { iterations: r.iterations, residual: r.residual, ranked: r.ranked },
            mass: NodeMass::of(r, true),
        });
        Ok(Walked { passages, detail })
    }

    /// The split walk's explanation: its estimates and bounds, and every node's mass
    /// from the full walk from the same seeds, which the split walk does not compute (a
    /// step of its own, after the method's).
    fn explain_split(
        &self,
        query: &[f32],
        dense: Option<Dense<'_>>,
        mut seeds: Vec<(u32, f64)>,
        split: SplitRanking,
        log: &mut dyn StepLog,
    ) -> Result<WalkDetail> {
        let p = &self.params;
        let g = self.ctx.graph();
        let (e, graph_passages) = (g.entities.len(), g.passage_entities.len());
        let mut passage_seeds = 0;
        if p.passage_weight > 0.0 && dense.is_some() {
            let all = match dense {
                Some(Dense::All(all)) => std::borrow::Cow::Borrowed(all),
                _ => std::borrow::Cow::Owned(self.passages.dots(query)),
            };
            passage_seeds = push_passage_seeds(&mut seeds, &all, e, graph_passages, p.passage_weight);
        }
        let r = step(log, "explain: full walk", || {
            let r = self.ctx.ppr.personalized_pagerank(&seeds, &p.ppr);
            let detail = json!({"iterations": r.iterations, "residual": r.residual});
            Ok((r, detail))
        })?;
        let SplitRanking { top, pushes, residual, bound, proven } = split;
        Ok(WalkDetail {
            entities: e,
            passage_seeds,
            passage_weight: p.passage_weight,
            ranking: RankedBy::Split { proven, pushes, residual, bound, top },
            mass: NodeMass::of(r, false),
        })
    }
}

/// What the split walk reads of a [`WalkInput`].
struct SplitInput<'a, 'b> {
    query: &'a [f32],
    dense: Option<Dense<'a>>,
    entity_products: Option<&'a [f64]>,
    entity_seeds: &'b [(u32, f64)],
    depth: usize,
    within: Option<&'a Selection>,
}

/// The split walk's list (as the caller gets it) and its ranking.
type SplitWalked = (Vec<(PassageIdx, f32)>, SplitRanking);

/// One int8 pass over the passage vectors' screen for `q`: every passage's interval (what
/// the split walk reads), and from it the best `n` passages and the lowest and highest
/// score, exactly. `None` for a query that is not finite.
fn screen_pass(response: &PassageResponse, passages: &Matrix, q: &[f32], n: usize) -> Option<(Screened, Extremes)> {
    let screen = response.passage_screen();
    let pass = screen.screened(q, n, true)?;
    let found = screen.extremes_of(&pass, passages, q);
    Some((pass, found))
}

/// HippoRAG 2's passage seeds: every graph passage (node `entities + p`) seeded with its
/// min–max normalised dense score times `weight`; returns how many passages were read.
pub fn push_passage_seeds(
    weights: &mut Vec<(u32, f64)>,
    dense: &[f32],
    entities: usize,
    graph_passages: usize,
    weight: f64,
) -> usize {
    let n = graph_passages.min(dense.len());
    let (lo, hi) = crate::rank::range(&dense[..n]);
    for (p, &s) in dense[..n].iter().enumerate() {
        let x = if hi > lo { ((s - lo) / (hi - lo)) as f64 } else { 1.0 };
        if x > 0.0 {
            weights.push(((entities + p) as u32, x * weight));
        }
    }
    n
}
