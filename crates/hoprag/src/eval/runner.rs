//! Runs methods over a dataset and aggregates the metrics.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use indexmap::IndexMap;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::metrics::QueryMetrics;
use super::metrics::{answer_f1, exact_match};
use super::report::{
    ByK, EvalReport, Latency, LlmCost, McNemar, MethodReport, Paired, PerQuery, QaReport, QaScore, StageReport,
    TypeReport, VsBaseline,
};
use super::stats::{holm, mcnemar_exact, sign_test, sign_test_greater};
use crate::corpus::PassageIdx;
use crate::dataset::{EvalQuestion, ResolvedDataset};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::llm::{LlmStats, Meter};
use crate::progress::Progress;
use crate::retrieve::{Gold, Query, Trace};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EvalOptions {
    /// Cutoffs, e.g. 2, 5, 10, 15.
    pub ks: Vec<usize>,
    /// Method every other method is compared with (W/L/T, sign test, McNemar).
    pub baseline: Option<String>,
    /// Dataset name for the report.
    pub dataset: String,
    /// Keep every query's trace in the per-query results.
    #[serde(default)]
    pub traces: bool,
    /// Generate an answer from each method's top this-many passages with the engine's
    /// LLM and score EM and F1, for questions with reference answers.
    #[serde(default)]
    pub answer_k: Option<usize>,
    /// Put in the report's header (see [`EvalReport::simulated`]).
    #[serde(default)]
    pub simulated: Option<String>,
}

impl EvalOptions {
    pub fn new(ks: Vec<usize>, baseline: Option<String>, dataset: impl Into<String>) -> Self {
        EvalOptions { ks, baseline, dataset: dataset.into(), traces: false, answer_k: None, simulated: None }
    }
}

/// The cutoff of the paired tests (the papers compare at R@5 and LastHop@5).
const PAIRED_K: usize = 5;

/// A ranked list of passages with scores, best first.
type Ranked = Vec<(PassageIdx, f32)>;

struct Run {
    ranked: Vec<Ranked>,
    latency_ms: Vec<f64>,
    traces: Vec<Trace>,
}

/// Evaluates `methods` on the resolved questions.
pub fn evaluate(
    engine: &Engine,
    data: &ResolvedDataset,
    methods: &[String],
    options: &EvalOptions,
    progress: &dyn Progress,
) -> Result<EvalReport> {
    let texts: Vec<String> = data.questions.iter().map(|q| q.text.clone()).collect();
    let queries = engine.embed_queries(&texts, progress)?;
    evaluate_queries(engine, data, &queries, methods, options, progress)
}

/// Like [`evaluate`], with the questions' queries (and embeddings) already computed, in
/// the order of `data.questions`: tuning reuses them across settings.
pub fn evaluate_queries(
    engine: &Engine,
    data: &ResolvedDataset,
    queries: &[Query],
    methods: &[String],
    options: &EvalOptions,
    progress: &dyn Progress,
) -> Result<EvalReport> {
    let mut ks = options.ks.clone();
    ks.sort_unstable();
    ks.dedup();
    if ks.is_empty() || ks[0] == 0 {
        return Err(Error::Config("cutoffs (--k) must be positive".into()));
    }
    if queries.len() != data.questions.len() {
        return Err(Error::Other("one query per question is needed".into()));
    }
    let depth = ks.last().copied().unwrap_or(PAIRED_K).max(PAIRED_K);

    let mut names: Vec<String> = methods.to_vec();
    if let Some(b) = &options.baseline {
        if !names.contains(b) {
            names.push(b.clone());
        }
    }
    // Gold rides along for oracle analyses (methods other than oracles ignore it).
    let queries: Vec<Query> = queries
        .iter()
        .zip(&data.questions)
        .map(|(query, q)| Query {
            gold: Some(Arc::new(Gold { passages: q.gold.clone(), ordered: q.hop_ordered && q.last_hop.is_some() })),
            ..query.clone()
        })
        .collect();
    let mut runs: IndexMap<String, Run> = IndexMap::new();
    for name in &names {
        let retriever = engine.retriever(name)?;
        progress.start(&format!("retrieving: {name}"), queries.len() as u64);
        let run_one = |i: usize| -> Result<(Ranked, f64, Trace)> {
            let (query, q) = (&queries[i], &data.questions[i]);
            let t = Instant::now();
            let r = retriever
                .retrieve(query, depth)
                .map_err(|e| Error::Other(format!("{name} on question {}: {e}", q.id)))?;
            let ms = t.elapsed().as_secs_f64() * 1e3;
            progress.advance(1);
            // A passage listed twice would count twice in a run file and not in
            // recall: keep its first place.
            let mut seen = std::collections::HashSet::new();
            let ranked = r.hits.into_iter().filter(|h| seen.insert(h.passage)).map(|h| (h.passage, h.score));
            Ok((ranked.collect(), ms, r.trace))
        };
        // Methods that mostly wait on an LLM server run more queries at once than cores;
        // one on the local model runs them one at a time (a second would only queue for
        // the model, and its latency would count the wait).
        let workers = retriever.concurrency().unwrap_or_else(rayon::current_num_threads);
        let results = on_workers(queries.len(), workers, run_one);
        progress.finish();
        let mut run = Run { ranked: Vec::new(), latency_ms: Vec::new(), traces: Vec::new() };
        for (ranked, ms, trace) in results? {
            run.ranked.push(ranked);
            run.latency_ms.push(ms);
            run.traces.push(trace);
        }
        runs.insert(name.clone(), run);
    }

    let mut qa: IndexMap<String, (QaReport, Vec<Option<QaScore>>)> = IndexMap::new();
    if let Some(answer_k) = options.answer_k {
        for (name, run) in &runs {
            qa.insert(name.clone(), answers(engine, data, run, answer_k, name, progress)?);
        }
    }

    let passage_id = |i: PassageIdx| engine.index.passage(i).id.clone();
    let metrics: IndexMap<&str, Vec<QueryMetrics>> = runs
        .iter()
        .map(|(name, run)| {
            let m = data
                .questions
                .iter()
                .zip(&run.ranked)
                .map(|(q, r)| QueryMetrics::compute(q, &ranked_ids(r), &ks))
                .collect();
            (name.as_str(), m)
        })
        .collect();

    let mut report_methods = IndexMap::new();
    for (name, run) in &runs {
        let m = &metrics[name.as_str()];
        let per_query: Vec<PerQuery> = data
            .questions
            .iter()
            .zip(&run.ranked)
            .zip(m)
            .zip(&run.latency_ms)
            .zip(&run.traces)
            .enumerate()
            .map(|(i, ((((q, r), qm), &ms), trace))| PerQuery {
                id: q.id.clone(),
                qtype: q.qtype.clone(),
                gold: q.gold.iter().map(|&g| passage_id(g)).collect(),
                unmatched_gold: q.gold_total.saturating_sub(q.gold.len()),
                retrieved: r.iter().map(|&(p, _)| passage_id(p)).collect(),
                scores: r.iter().map(|&(_, s)| s).collect(),
                recall: qm.at.iter().map(|(k, x)| (k.to_string(), x.recall)).collect(),
                full: qm.at.iter().map(|(k, x)| (k.to_string(), x.full)).collect(),
                last_hop: qm.at.iter().filter_map(|(k, x)| x.last_hop.map(|l| (k.to_string(), l))).collect(),
                latency_ms: ms,
                fell_back: trace.fell_back(),
                llm: trace.llm_cost(),
                trace: options.traces.then(|| trace.clone()),
                answer: qa.get(name).and_then(|(_, scores)| scores[i].clone()),
            })
            .collect();
        let all: Vec<usize> = (0..data.questions.len()).collect();
        let agg = aggregate(m, &all, &ks);
        let mut by_type: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        for (i, q) in data.questions.iter().enumerate() {
            by_type.entry(q.qtype.clone().unwrap_or_else(|| "untyped".into())).or_default().push(i);
        }
        let by_type = by_type
            .into_iter()
            .map(|(t, idx)| {
                let a = aggregate(m, &idx, &ks);
                (t, TypeReport { n: idx.len(), recall: a.recall, full: a.full, any: a.any, last_hop: a.last_hop })
            })
            .collect();
        let vs_baseline = match &options.baseline {
            Some(b) if b != name => Some(vs_baseline(b, &data.questions, &runs[name], &runs[b], &ks)),
            _ => None,
        };
        report_methods.insert(
            name.clone(),
            MethodReport {
                recall: agg.recall,
                full: agg.full,
                any: agg.any,
                last_hop: agg.last_hop,
                last_hop_n: agg.last_hop_n,
                by_type,
                latency_ms: latency(&run.latency_ms),
                fallbacks: run.traces.iter().filter(|t| t.fell_back()).count(),
                llm: LlmCost::of(&run.traces),
                stages: stages(&run.traces),
                qa: qa.get(name).map(|(report, _)| report.clone()),
                judge_agreement: super::JudgeAgreement::of(
                    &per_query,
                    &run.traces,
                    f64::from(engine.config.methods.bridge_rag.judge_max),
                ),
                per_query,
                vs_baseline,
            },
        );
    }
    adjust_for_multiple_methods(&mut report_methods);
    Ok(EvalReport {
        dataset: options.dataset.clone(),
        n: data.questions.len(),
        ks,
        index: engine.index.location().to_string(),
        gold_matching: data.counts,
        unmatched_gold: data.unmatched.clone(),
        fallback_gold: data.fallback.clone(),
        baseline: options.baseline.clone(),
        methods: report_methods,
        flips: Vec::new(),
        simulated: options.simulated.clone(),
    })
}

/// Answers every question that has references from the method's top `k` passages, as
/// many at once as the LLM client allows. A failed call scores 0 and is counted.
fn answers(
    engine: &Engine,
    data: &ResolvedDataset,
    run: &Run,
    k: usize,
    name: &str,
    progress: &dyn Progress,
) -> Result<(QaReport, Vec<Option<QaScore>>)> {
    let llm = engine.llm().ok_or_else(|| {
        Error::Config(
            "scoring answers needs an LLM: set HOPRAG_LLM_BASE_URL and HOPRAG_LLM_MODEL (or llm.base_url and \
             llm.model)"
                .into(),
        )
    })?;
    let totals = LlmStats::new();
    progress.start(&format!("answering: {name}"), data.questions.len() as u64);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(engine.config.llm.max_concurrency.max(1))
        .build()
        .map_err(|e| Error::Other(format!("thread pool: {e}")))?;
    let scores: Vec<Option<QaScore>> = pool.install(|| {
        data.questions
            .par_iter()
            .zip(&run.ranked)
            .map(|(q, ranked)| {
                progress.advance(1);
                if q.answers.is_empty() {
                    return None;
                }
                let passages: Vec<&crate::Passage> =
                    ranked.iter().take(k).map(|&(p, _)| engine.index.passage(p)).collect();
                let meter = Meter::with_totals(llm.as_ref(), &totals);
                Some(match crate::answer::answer(&meter, &q.text, &passages, crate::answer::MAX_TOKENS) {
                    Ok(a) => QaScore {
                        em: exact_match(&a.text, &q.answers),
                        f1: answer_f1(&a.text, &q.answers),
                        answer: a.text,
                        error: None,
                    },
                    Err(e) => QaScore { answer: String::new(), em: false, f1: 0.0, error: Some(e.to_string()) },
                })
            })
            .collect()
    });
    progress.finish();
    let scored: Vec<&QaScore> = scores.iter().flatten().collect();
    let n = scored.len().max(1) as f64;
    let report = QaReport {
        k,
        answered: scored.len(),
        em: scored.iter().filter(|s| s.em).count() as f64 / n,
        f1: scored.iter().map(|s| s.f1).sum::<f64>() / n,
        failed: scored.iter().filter(|s| s.error.is_some()).count(),
        llm: totals.snapshot(),
    };
    Ok((report, scores))
}

fn ranked_ids(r: &[(PassageIdx, f32)]) -> Vec<PassageIdx> {
    r.iter().map(|&(p, _)| p).collect()
}

struct Aggregate {
    recall: ByK,
    full: ByK,
    any: ByK,
    last_hop: ByK,
    last_hop_n: usize,
}

fn aggregate(m: &[QueryMetrics], idx: &[usize], ks: &[usize]) -> Aggregate {
    let mean = |f: &dyn Fn(&QueryMetrics) -> Option<f64>| -> Option<f64> {
        let vals: Vec<f64> = idx.iter().filter_map(|&i| f(&m[i])).collect();
        (!vals.is_empty()).then(|| vals.iter().sum::<f64>() / vals.len() as f64)
    };
    let mut a = Aggregate {
        recall: ByK::new(),
        full: ByK::new(),
        any: ByK::new(),
        last_hop: ByK::new(),
        last_hop_n: idx.iter().filter(|&&i| m[i].at.first().is_some_and(|(_, x)| x.last_hop.is_some())).count(),
    };
    let b = |x: bool| if x { 1.0 } else { 0.0 };
    for &k in ks {
        let key = k.to_string();
        let at = |q: &QueryMetrics| *q.get(k).expect("metrics computed at every cutoff");
        if let Some(v) = mean(&|q| Some(at(q).recall)) {
            a.recall.insert(key.clone(), v);
            a.full.insert(key.clone(), mean(&|q| Some(b(at(q).full))).unwrap_or(0.0));
            a.any.insert(key.clone(), mean(&|q| Some(b(at(q).any))).unwrap_or(0.0));
        }
        if let Some(v) = mean(&|q| at(q).last_hop.map(b)) {
            a.last_hop.insert(key, v);
        }
    }
    a
}

/// Mean time and LLM cost per query of each named step, in the order steps first ran.
fn stages(traces: &[Trace]) -> IndexMap<String, StageReport> {
    let mut out: IndexMap<String, StageReport> = IndexMap::new();
    let n = traces.len().max(1) as f64;
    for step in traces.iter().flat_map(|t| &t.steps) {
        let s = out.entry(step.name.clone()).or_default();
        s.runs_per_query += 1.0 / n;
        s.ms_per_query += step.micros as f64 / 1e3 / n;
        if let Some(llm) = &step.llm {
            let tokens = llm.tokens();
            s.llm_calls_per_query += llm.calls as f64 / n;
            s.prompt_tokens_per_query += tokens.prompt_tokens as f64 / n;
            s.completion_tokens_per_query += tokens.completion_tokens as f64 / n;
        }
    }
    out
}

fn latency(ms: &[f64]) -> Latency {
    if ms.is_empty() {
        return Latency::default();
    }
    let mut s = ms.to_vec();
    s.sort_by(|a, b| crate::rank::asc(*a, *b));
    let pct = |p: f64| s[((p * (s.len() - 1) as f64).round() as usize).min(s.len() - 1)];
    Latency { mean: s.iter().sum::<f64>() / s.len() as f64, p50: pct(0.5), p99: pct(0.99) }
}

fn vs_baseline(baseline: &str, questions: &[EvalQuestion], method: &Run, base: &Run, ks: &[usize]) -> VsBaseline {
    let all: Vec<usize> = (0..questions.len()).collect();
    let mut by_type: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, q) in questions.iter().enumerate() {
        by_type.entry(q.qtype.clone().unwrap_or_else(|| "untyped".into())).or_default().push(i);
    }
    let all = paired(&all, questions, method, base, ks);
    VsBaseline {
        baseline: baseline.to_string(),
        k: PAIRED_K,
        sign_p_holm: all.sign_p,
        all,
        by_type: by_type.into_iter().map(|(t, idx)| (t, paired(&idx, questions, method, base, ks))).collect(),
    }
}

/// Wins, losses and ties on R@[`PAIRED_K`] with the sign test, and McNemar on LastHop@k
/// at every cutoff, over the questions `idx`.
fn paired(idx: &[usize], questions: &[EvalQuestion], method: &Run, base: &Run, ks: &[usize]) -> Paired {
    let rank =
        |run: &Run, i: usize, k: usize| super::metrics::rank_metrics(&questions[i], &ranked_ids(&run.ranked[i]), k);
    let (mut wins, mut losses, mut ties) = (0, 0, 0);
    for &i in idx {
        match rank(method, i, PAIRED_K).recall.total_cmp(&rank(base, i, PAIRED_K).recall) {
            std::cmp::Ordering::Greater => wins += 1,
            std::cmp::Ordering::Less => losses += 1,
            std::cmp::Ordering::Equal => ties += 1,
        }
    }
    let mut last_hop = BTreeMap::new();
    if idx.iter().any(|&i| questions[i].hop_ordered) {
        for &k in ks {
            let (mut only_method, mut only_baseline) = (0, 0);
            for &i in idx {
                match (rank(method, i, k).last_hop, rank(base, i, k).last_hop) {
                    (Some(true), Some(false)) => only_method += 1,
                    (Some(false), Some(true)) => only_baseline += 1,
                    _ => {}
                }
            }
            let p = mcnemar_exact(only_method, only_baseline);
            last_hop.insert(k.to_string(), McNemar { only_method, only_baseline, p, p_holm: None });
        }
    }
    Paired {
        n: idx.len(),
        wins,
        losses,
        ties,
        sign_p: sign_test(wins, losses),
        sign_p_greater: sign_test_greater(wins, losses),
        last_hop,
    }
}

/// Holm–Bonferroni over the methods compared with the baseline: the sign test, and
/// McNemar at each cutoff, each a family of one test per method.
fn adjust_for_multiple_methods(methods: &mut IndexMap<String, MethodReport>) {
    let compared: Vec<&mut VsBaseline> = methods.values_mut().filter_map(|m| m.vs_baseline.as_mut()).collect();
    let mut compared = compared;
    let sign: Vec<f64> = compared.iter().map(|v| v.all.sign_p).collect();
    for (v, p) in compared.iter_mut().zip(holm(&sign)) {
        v.sign_p_holm = p;
    }
    let ks: Vec<String> = compared.first().map(|v| v.all.last_hop.keys().cloned().collect()).unwrap_or_default();
    for k in ks {
        let ps: Vec<f64> = compared.iter().map(|v| v.all.last_hop.get(&k).map_or(1.0, |m| m.p)).collect();
        for (v, p) in compared.iter_mut().zip(holm(&ps)) {
            if let Some(m) = v.all.last_hop.get_mut(&k) {
                m.p_holm = Some(p);
            }
        }
    }
}

/// Runs `job` for every index below `n` on `workers` plain threads, each taking the next
/// index when it is free; results in index order. Not rayon's pool: a rayon worker that
/// waits on another pool (the encoder's) runs other queued questions meanwhile, nested
/// on its stack, and each of those then counts the others' time as its own latency.
fn on_workers<T: Send>(n: usize, workers: usize, job: impl Fn(usize) -> Result<T> + Sync) -> Result<Vec<T>> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut done: Vec<(usize, Result<T>)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers.clamp(1, n.max(1)))
            .map(|_| {
                s.spawn(|| {
                    let mut out = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        if i >= n {
                            break out;
                        }
                        out.push((i, job(i)));
                    }
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().expect("an eval worker panicked")).collect()
    });
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, r)| r).collect()
}
