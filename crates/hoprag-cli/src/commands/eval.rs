use std::path::{Path, PathBuf};

use clap::Args;
use hoprag::dataset::{load_dataset, resolve_gold};
use hoprag::eval::protocol::{hop1_correct, HOP1_DEPTH};
use hoprag::eval::{evaluate_queries, flips, write_qrels, write_runs, EvalOptions, EvalReport};
use hoprag::Engine;

use super::{Context, SplitHalf};
use hoprag_bench::output::{pct, table};

#[derive(Args)]
pub struct EvalArgs {
    /// The index: a folder, or a PostgreSQL URL `postgres://USER@HOST:PORT/DB?schema=NAME`
    /// (`--store` is the same flag).
    #[arg(long, alias = "store", env = "HOPRAG_STORE", value_name = "DIR|URL")]
    index: PathBuf,
    #[command(flatten)]
    namespace: super::NamespaceArg,
    /// Override a method parameter, e.g. `phasegraph.fusion.alpha=0.5` (repeatable).
    #[arg(long = "set", value_name = "PATH=VALUE")]
    settings: Vec<String>,
    /// Questions with gold: HippoRAG MuSiQue, raw HotpotQA, raw 2WikiMultiHopQA, or JSONL.
    #[arg(long, value_name = "FILE")]
    dataset: PathBuf,
    /// Methods to evaluate (repeat the flag or separate with commas); a method's own
    /// parameters go in brackets, e.g. `regime_router[router=oracle,alpha=0.5]`.
    #[arg(long = "method", default_values_t = ["bm25,dense,hybrid".to_string()])]
    methods: Vec<String>,
    /// RegimeRouter model file (default: the index's router.json, else the built-in model).
    #[arg(long, value_name = "MODEL.json")]
    router: Option<PathBuf>,
    /// RegimeRouter's protocol: only questions whose hop-1 gold passage is in the dense
    /// top-5, scored on their hop-2 gold passage alone (LastHop@k = R@k on hop 2).
    #[arg(long)]
    hop1_correct: bool,
    /// Ask the LLM for BridgeRAG's judge only: its SVO and entity stages take their
    /// LLM-free fallback, as under `--set llm.simulated_judge=P`, so the model judges the
    /// pools of that curve and its judge agreement places it on it (docs/bridgerag.md).
    #[arg(long)]
    judge_only: bool,
    /// Cutoffs.
    #[arg(long, value_delimiter = ',', default_values_t = [2usize, 5, 10, 15])]
    k: Vec<usize>,
    /// Method the others are compared with: W/L/T on R@5 with the exact sign test
    /// (two-sided, and one-sided for "better"), McNemar on LastHop@k at every k, overall
    /// and per question type, Holm–Bonferroni-adjusted over the methods.
    #[arg(long)]
    baseline: Option<String>,
    /// Keep only questions of these types (the file's `type`; MuSiQue's hop count such
    /// as `2hop`), e.g. `compositional,inference,bridge` for RegimeRouter's bridge-type
    /// questions; applied before `--split` and `--limit`.
    #[arg(long, value_delimiter = ',', value_name = "TYPE,..")]
    types: Vec<String>,
    /// Evaluate only the first N questions.
    #[arg(long)]
    limit: Option<usize>,
    /// Evaluate one half of `hoprag tune`'s split (by MD5 of the question id): `tune` to
    /// choose settings on, `test` to report them on.
    #[arg(long, value_enum)]
    split: Option<SplitHalf>,
    /// Share of questions in the tune half (as `hoprag tune --tune-share`).
    #[arg(long, default_value_t = 0.5, requires = "split")]
    tune_share: f64,
    /// Write the full report as JSON to OUT (`-` or no value: stdout instead of tables).
    #[arg(long, value_name = "OUT", num_args = 0..=1, default_missing_value = "-")]
    pub json: Option<PathBuf>,
    /// Write TREC runs into DIR: `METHOD.trec` per method (run tag = file stem) and
    /// `qrels.txt`, with unmatched gold passages as placeholders that count as missed.
    #[arg(long, value_name = "DIR")]
    run: Option<PathBuf>,
    /// Keep every query's trace in the JSON report.
    #[arg(long)]
    traces: bool,
    /// Print the time and LLM cost of every step of each method.
    #[arg(long)]
    stages: bool,
    /// Top-1 flips from one method to another, per question type: flip rate and the share
    /// of flips that raise R@5 (BridgeRAG's Exp. H: `bridge_rag_b,bridge_rag`). Both are
    /// evaluated if not already in --method.
    #[arg(long, value_name = "FROM,TO")]
    flips: Option<String>,
    /// Also answer each question with the LLM from every method's top K passages (5,
    /// as the papers' QA tables) and score exact match and F1 against the dataset's
    /// answers.
    #[arg(long, value_name = "K", num_args = 0..=1, default_missing_value = "5")]
    answers: Option<usize>,
    /// Write the gold passages as a TREC qrels file (also written by --run).
    #[arg(long, value_name = "OUT.qrels")]
    qrels: Option<PathBuf>,
    /// Print a short table instead of the full report: each method's R@k and, with
    /// --baseline, its R@5 against the baseline's (difference, questions won/lost/tied,
    /// sign test), with a legend. The full report (Full@k, LastHop, per question type,
    /// Holm-adjusted tests) is the default; --json and --run are unchanged.
    #[arg(long, conflicts_with_all = ["stages", "flips", "answers"])]
    brief: bool,
}

impl EvalArgs {
    pub fn json_to_stdout(&self) -> bool {
        self.json.as_deref() == Some(Path::new("-"))
    }
}

pub fn run(ctx: &Context, args: EvalArgs) -> anyhow::Result<()> {
    let store = super::open_store(&args.index, &args.namespace, hoprag::store::Open::Existing)?;
    // The simulated judge needs this evaluation's gold, so it is taken out of the
    // settings here (the configuration check refuses it everywhere else) and built below.
    let (settings, simulated_judge) = take_simulated_judge(&args.settings)?;
    let mut config = ctx.config_for(store.as_ref(), &settings)?;
    if let Some(router) = &args.router {
        config.methods.regime_router.model = Some(router.clone());
    }
    let mut engine = Engine::open(store, config)?;
    let (format, mut questions) = load_dataset(&args.dataset)?;
    retain_types(ctx, &mut questions, &args.types);
    if let Some(half) = args.split {
        half.retain(ctx, &mut questions, args.tune_share);
    }
    if let Some(n) = args.limit {
        questions.truncate(n);
    }
    let resolved = resolve_gold(&questions, engine.index.passages());
    let c = &resolved.counts;
    let gold_note = if args.brief {
        format!(
            "{}: {} questions, {} gold passages ({} not in the index)",
            args.dataset.display(),
            resolved.questions.len(),
            c.gold,
            c.unmatched
        )
    } else {
        format!(
            "{}: {} questions ({format:?}); {} gold passages: {} by id, {} by title + text, {} by title (no text \
             given), fallbacks: {} by text alone, {} by title alone; {} not matched (missed), {} duplicates; last hop \
             defined for {} questions, in the index for {}",
            args.dataset.display(),
            resolved.questions.len(),
            c.gold,
            c.by_id,
            c.by_title_and_text,
            c.by_title_without_text,
            c.by_text_only,
            c.by_title_only,
            c.unmatched,
            c.duplicate,
            c.hop_ordered_questions,
            c.last_hop_matched,
        )
    };
    ctx.note(gold_note);
    let issues: Vec<_> = resolved.unmatched.iter().chain(&resolved.fallback).collect();
    for issue in issues.iter().take(10) {
        ctx.note(format!("  question {}: gold {}: {}", issue.question_id, issue.gold, issue.problem));
    }
    if issues.len() > 10 {
        ctx.note(format!("  ... and {} more (--json lists them all)", issues.len() - 10));
    }
    let judge = simulated_judge.map(|p| hoprag::eval::simulated_judge(&engine, &resolved, p)).transpose()?;
    let mut stand_in = judge.as_ref().map(|j| j.header());
    if let Some(judge) = judge {
        engine = engine.with_llm(std::sync::Arc::new(judge));
    } else if args.judge_only {
        anyhow::ensure!(engine.llm().is_some(), "--judge-only: no LLM is configured to judge");
        engine = engine.wrap_llm(|model| {
            let only = hoprag::eval::JudgeOnly::new(model);
            stand_in = Some(only.header());
            std::sync::Arc::new(only)
        });
    }
    let simulated = hoprag::eval::simulation_note(&engine, stand_in);
    if let Some(s) = &simulated {
        ctx.note(s.clone());
    }
    let options = EvalOptions {
        simulated,
        traces: args.traces,
        answer_k: args.answers,
        ..EvalOptions::new(args.k.clone(), args.baseline.clone(), args.dataset.display().to_string())
    };
    let mut methods = super::split_methods(&args.methods);
    let flip_pair = match &args.flips {
        Some(pair) => {
            let (from, to) =
                pair.split_once(',').ok_or_else(|| anyhow::anyhow!("--flips {pair:?}: expected FROM,TO"))?;
            let (from, to) = (from.trim().to_string(), to.trim().to_string());
            for m in [&from, &to] {
                if !methods.contains(m) {
                    methods.push(m.clone());
                }
            }
            Some((from, to))
        }
        None => None,
    };
    super::note_llm(ctx, &engine, methods.iter().map(String::as_str));
    let texts: Vec<String> = resolved.questions.iter().map(|q| q.text.clone()).collect();
    let mut queries = engine.embed_queries(&texts, &ctx.progress)?;
    let mut resolved = resolved;
    if args.hop1_correct {
        let (kept, kept_queries, r) = hop1_correct(&engine, &resolved, &queries)?;
        ctx.note(format!(
            "--hop1-correct: {} of {} questions have their hop-1 gold in the dense top-{HOP1_DEPTH} \
             ({} missed it, {} have fewer than two gold passages); scoring their hop-2 gold only",
            r.kept, r.questions, r.hop1_missed, r.single_gold
        ));
        (resolved, queries) = (kept, kept_queries);
    }
    let mut report = evaluate_queries(&engine, &resolved, &queries, &methods, &options, &ctx.progress)?;
    if let Some((from, to)) = &flip_pair {
        report.flips.push(flips(&report, from, to, 5)?);
    }
    if let Some(dir) = &args.run {
        let files = write_runs(&report, dir)?;
        ctx.note(format!("TREC runs and qrels: {} files in {}", files.len(), dir.display()));
    }
    if let Some(path) = &args.qrels {
        write_qrels(&report, path)?;
    }
    match &args.json {
        Some(p) if p == Path::new("-") => {
            println!("{}", serde_json::to_string_pretty(&report)?);
            return Ok(());
        }
        Some(p) => {
            std::fs::write(p, serde_json::to_vec_pretty(&report)?)
                .map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?;
        }
        None => {}
    }
    if args.brief {
        print_brief(&report, engine.index.passages().len());
    } else {
        print_report(&report, args.stages);
    }
    Ok(())
}

/// `settings` without `llm.simulated_judge=P`, and P (a number in [0, 1]) if it was there.
fn take_simulated_judge(settings: &[String]) -> anyhow::Result<(Vec<String>, Option<f64>)> {
    let mut rest = Vec::with_capacity(settings.len());
    let mut p = None;
    for s in settings {
        match s.split_once('=') {
            Some((key, value)) if key.trim() == "llm.simulated_judge" => {
                let v: f64 = value.trim().parse().map_err(|_| {
                    anyhow::anyhow!("llm.simulated_judge={value}: expected the judge's accuracy, a number in [0, 1]")
                })?;
                anyhow::ensure!((0.0..=1.0).contains(&v), "llm.simulated_judge={value}: must be between 0 and 1");
                p = Some(v);
            }
            _ => rest.push(s.clone()),
        }
    }
    Ok((rest, p))
}

/// Keeps the questions whose type is one of `types` (all of them when `types` is empty)
/// and says how many; a question without a type is dropped by a filter.
pub fn retain_types(ctx: &Context, questions: &mut Vec<hoprag::dataset::Question>, types: &[String]) {
    if types.is_empty() {
        return;
    }
    let before = questions.len();
    questions.retain(|q| q.qtype.as_ref().is_some_and(|t| types.iter().any(|x| x == t)));
    ctx.note(format!("--types {}: {} of {before} questions", types.join(","), questions.len()));
}

/// The short table of `--brief` (what the quickstart prints): R@k per method, the
/// default method marked, and each method's R@5 against the baseline with the exact
/// two-sided sign test, then a legend saying what the columns mean.
fn print_brief(r: &EvalReport, passages: usize) {
    let name = |m: &str| if m == hoprag::engine::DEFAULT_METHOD { format!("{m} (default)") } else { m.to_string() };
    let recall = |m: &hoprag::eval::MethodReport, k: usize| m.recall.get(&k.to_string()).copied();
    let base = r.baseline.as_ref().and_then(|b| Some((b, r.methods.get(b)?)));
    let paired_k = r.methods.values().find_map(|m| m.vs_baseline.as_ref()).map(|v| v.k);
    let mut header: Vec<String> = vec!["method".into()];
    header.extend(r.ks.iter().map(|k| format!("R@{k}")));
    if let (Some((b, _)), Some(k)) = (base, paired_k) {
        header.extend([format!("R@{k} vs {b}"), "won/lost/tied".into(), "sign p".into()]);
    }
    header.push("ms/question".into());
    let rows: Vec<Vec<String>> = r
        .methods
        .iter()
        .map(|(m, report)| {
            let mut row = vec![name(m)];
            row.extend(r.ks.iter().map(|&k| recall(report, k).map_or("n/a".into(), pct)));
            if let (Some((b, base)), Some(k)) = (base, paired_k) {
                match &report.vs_baseline {
                    Some(v) => {
                        let delta = recall(report, k).zip(recall(base, k)).map(|(a, b)| 100.0 * (a - b));
                        row.push(delta.map_or("n/a".into(), |d| format!("{d:+.1}")));
                        row.push(format!("{}/{}/{}", v.all.wins, v.all.losses, v.all.ties));
                        row.push(format!("{:.4}", v.all.sign_p));
                    }
                    None if m == b => row.extend(["(baseline)".into(), "-".into(), "-".into()]),
                    None => row.extend(["-".into(), "-".into(), "-".into()]),
                }
            }
            row.push(format!("{:.2}", report.latency_ms.p50));
            row
        })
        .collect();
    if let Some(s) = &r.simulated {
        println!("{s}");
    }
    println!("{} — {} questions, {passages} passages", r.dataset, r.n);
    println!("{}", table(&header, &rows));
    println!("R@k: the share of each question's gold passages in the method's top k, averaged over the questions.");
    if let (Some((b, _)), Some(k)) = (base, paired_k) {
        println!("R@{k} vs {b}: R@{k} minus {b}'s. won/lost/tied: questions with R@{k} above, below, equal to {b}'s.");
        println!("sign p: exact two-sided sign test of won against lost: the chance of a split this uneven or more");
        println!("        if both methods were equally good.");
    }
    println!("ms/question: the median. The full report (Full@k, LastHop, by question type): the same without --brief.");
    if !r.unmatched_gold.is_empty() {
        println!("note: {} gold passages are not in the index and count as missed", r.unmatched_gold.len());
    }
    for (m, report) in r.methods.iter().filter(|(_, m)| m.fallbacks > 0) {
        println!("note: {m} answered {} of {} questions with its LLM-free fallback ranking", report.fallbacks, r.n);
    }
}

fn print_report(r: &EvalReport, stages: bool) {
    let at =
        |m: &std::collections::BTreeMap<String, f64>, k: usize| m.get(&k.to_string()).map_or("n/a".into(), |v| pct(*v));
    let mut header: Vec<String> = vec!["method".into()];
    header.extend(r.ks.iter().map(|k| format!("R@{k}")));
    header.extend(r.ks.iter().map(|k| format!("Full@{k}")));
    header.extend(r.ks.iter().map(|k| format!("LastHop@{k}")));
    header.push("p50 ms".into());
    let rows: Vec<Vec<String>> = r
        .methods
        .iter()
        .map(|(name, m)| {
            let mut row = vec![name.clone()];
            row.extend(r.ks.iter().map(|&k| at(&m.recall, k)));
            row.extend(r.ks.iter().map(|&k| at(&m.full, k)));
            row.extend(r.ks.iter().map(|&k| at(&m.last_hop, k)));
            row.push(format!("{:.2}", m.latency_ms.p50));
            row
        })
        .collect();
    let last_hop_n = r.methods.values().next().map_or(0, |m| m.last_hop_n);
    if let Some(s) = &r.simulated {
        println!("{s}");
    }
    println!("{} — {} questions ({} with hop order, where LastHop is defined)", r.dataset, r.n, last_hop_n);
    println!("{}", table(&header, &rows));
    for (name, a) in r.methods.iter().filter_map(|(n, m)| Some((n, m.judge_agreement?))) {
        let percent = |x: Option<f64>| x.map_or("n/a".into(), |b| format!("{:.1}%", 100.0 * b));
        let share = |x: usize, n: usize| {
            if n == 0 {
                "n/a".to_string()
            } else {
                format!("{:.1}% of {n}", 100.0 * x as f64 / n as f64)
            }
        };
        println!(
            "{name}: judge agrees with the gold on {} verdicts (gold candidates {}, others {}; balanced {}); {} judge \
             calls, {} candidates without a score (read as 0); {} of the pools judged \"first candidate only\" (a \
             judge always doing so: balanced {})",
            share(a.gold_agree + a.other_agree, a.gold + a.other),
            share(a.gold_agree, a.gold),
            share(a.other_agree, a.other),
            percent(a.balanced()),
            a.calls,
            a.missing,
            a.first_only_pools,
            percent(a.first_only_balanced()),
        );
    }

    if let Some(base) = &r.baseline {
        let p = |x: f64| format!("{x:.4}");
        let mut header: Vec<String> =
            ["method", "vs", "type", "n", "W/L/T on R@5", "sign p (2-sided)", "p (1-sided, better)", "Holm p"]
                .map(String::from)
                .to_vec();
        header.extend(r.ks.iter().map(|k| format!("LastHop@{k} only m/only b, McNemar p (Holm)")));
        let mut rows: Vec<Vec<String>> = Vec::new();
        for (name, m) in &r.methods {
            let Some(v) = m.vs_baseline.as_ref() else { continue };
            let mut row = |t: &str, x: &hoprag::eval::Paired, holm: Option<f64>| {
                let mut row = vec![
                    name.clone(),
                    base.clone(),
                    t.to_string(),
                    x.n.to_string(),
                    format!("{}/{}/{}", x.wins, x.losses, x.ties),
                    p(x.sign_p),
                    p(x.sign_p_greater),
                    holm.map_or("-".into(), p),
                ];
                row.extend(r.ks.iter().map(|k| match x.last_hop.get(&k.to_string()) {
                    Some(c) => format!(
                        "{}/{}, {}{}",
                        c.only_method,
                        c.only_baseline,
                        p(c.p),
                        c.p_holm.map_or(String::new(), |h| format!(" ({})", p(h)))
                    ),
                    None => "n/a".into(),
                }));
                rows.push(row);
            };
            row("all", &v.all, Some(v.sign_p_holm));
            if v.by_type.len() > 1 {
                for (t, x) in &v.by_type {
                    row(t, x, None);
                }
            }
        }
        println!("paired tests (LastHop only-method/only-baseline = GraphWin/GraphLoss; n/a: no hop order)");
        println!("{}", table(&header, &rows));
    }

    let types: Vec<&String> = r.methods.values().next().map(|m| m.by_type.keys().collect()).unwrap_or_default();
    if types.len() > 1 {
        let mut header: Vec<String> = vec!["type".into(), "n".into(), "method".into()];
        header.extend(r.ks.iter().map(|k| format!("R@{k}")));
        header.extend(r.ks.iter().map(|k| format!("Full@{k}")));
        let mut rows = Vec::new();
        for t in types {
            for (name, m) in &r.methods {
                let tr = &m.by_type[t];
                let mut row = vec![t.clone(), tr.n.to_string(), name.clone()];
                row.extend(r.ks.iter().map(|&k| at(&tr.recall, k)));
                row.extend(r.ks.iter().map(|&k| at(&tr.full, k)));
                rows.push(row);
            }
        }
        println!("by question type");
        println!("{}", table(&header, &rows));
    }
    let with_llm: Vec<_> = r.methods.iter().filter_map(|(n, m)| Some((n, m.llm.as_ref()?, m.fallbacks))).collect();
    if !with_llm.is_empty() {
        let header = [
            "method",
            "LLM calls/q",
            "prompt tok/q",
            "completion tok/q",
            "LLM ms/q",
            "cache hits",
            "errors",
            "unparsed",
            "fell back",
        ];
        let rows: Vec<Vec<String>> = with_llm
            .iter()
            .map(|(n, c, fallbacks)| {
                vec![
                    n.to_string(),
                    format!("{:.2}", c.calls_per_query),
                    format!("{:.0}", c.prompt_tokens_per_query),
                    format!("{:.0}", c.completion_tokens_per_query),
                    format!("{:.0}", c.llm_ms_per_query),
                    c.cache_hits.to_string(),
                    c.errors.to_string(),
                    c.parse_failures.to_string(),
                    format!("{fallbacks}/{}", r.n),
                ]
            })
            .collect();
        println!("LLM cost per query (tokens at their original cost, cached or not)");
        println!("{}", table(&header.map(String::from), &rows));
    }
    for (name, m) in r.methods.iter().filter(|(_, m)| m.fallbacks > 0) {
        println!(
            "note: {name} answered {} of {} questions with its LLM-free fallback ranking (its LLM stages failed; \
             `fell_back` in --json)",
            m.fallbacks, r.n
        );
    }
    let with_qa: Vec<_> = r.methods.iter().filter_map(|(n, m)| Some((n, m.qa.as_ref()?))).collect();
    if !with_qa.is_empty() {
        let header = ["method", "answers from top", "questions", "EM", "F1", "failed", "LLM calls", "tokens"];
        let rows: Vec<Vec<String>> = with_qa
            .iter()
            .map(|(n, q)| {
                vec![
                    n.to_string(),
                    q.k.to_string(),
                    q.answered.to_string(),
                    pct(q.em),
                    pct(q.f1),
                    q.failed.to_string(),
                    q.llm.calls.to_string(),
                    q.llm.tokens().total().to_string(),
                ]
            })
            .collect();
        println!("answers (exact match and F1 against the dataset's answers)");
        println!("{}", table(&header.map(String::from), &rows));
    }
    if stages {
        let header = ["method", "step", "runs/q", "ms/q", "LLM calls/q", "prompt tok/q", "completion tok/q"];
        let rows: Vec<Vec<String>> = r
            .methods
            .iter()
            .flat_map(|(n, m)| {
                m.stages.iter().map(move |(step, s)| {
                    vec![
                        n.clone(),
                        step.clone(),
                        format!("{:.2}", s.runs_per_query),
                        format!("{:.2}", s.ms_per_query),
                        format!("{:.2}", s.llm_calls_per_query),
                        format!("{:.0}", s.prompt_tokens_per_query),
                        format!("{:.0}", s.completion_tokens_per_query),
                    ]
                })
            })
            .collect();
        println!("steps");
        println!("{}", table(&header.map(String::from), &rows));
    }
    for f in &r.flips {
        let header = ["type", "n", "flips", "flip rate", "productive", "harmful", "productivity", "ΔR@5"];
        let row = |t: &str, x: &hoprag::eval::FlipRow| {
            vec![
                t.to_string(),
                x.n.to_string(),
                x.flips.to_string(),
                pct(x.flip_rate),
                x.productive.to_string(),
                x.harmful.to_string(),
                pct(x.productivity),
                format!("{:+.1}pp", 100.0 * x.recall_delta),
            ]
        };
        let mut rows: Vec<Vec<String>> = f.by_type.iter().map(|(t, x)| row(t, x)).collect();
        rows.push(row("all", &f.all));
        println!("top-1 flips {} -> {} (productive: R@{} rises)", f.from, f.to, f.k);
        println!("{}", table(&header.map(String::from), &rows));
    }
    if !r.unmatched_gold.is_empty() {
        println!(
            "note: {} gold passages are not in the index and count as missed (--json lists them)",
            r.unmatched_gold.len()
        );
    }
}
