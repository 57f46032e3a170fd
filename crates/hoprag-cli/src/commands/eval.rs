use std::path::{Path, PathBuf};

use clap::Args;
use hoprag::dataset::{load_dataset, resolve_gold};
use hoprag::eval::{evaluate, write_qrels, write_run, EvalOptions, EvalReport};
use hoprag::Engine;

use super::Context;
use crate::output::{pct, table};

#[derive(Args)]
pub struct EvalArgs {
    /// Index directory.
    #[arg(long, value_name = "DIR")]
    index: PathBuf,
    /// Override a method parameter, e.g. `phasegraph.fusion.alpha=0.5` (repeatable).
    #[arg(long = "set", value_name = "PATH=VALUE")]
    settings: Vec<String>,
    /// Questions with gold: HippoRAG MuSiQue, raw HotpotQA, raw 2WikiMultiHopQA, or JSONL.
    #[arg(long, value_name = "FILE")]
    dataset: PathBuf,
    /// Methods to evaluate (repeat the flag or separate with commas).
    #[arg(long = "method", value_delimiter = ',', default_values_t = ["bm25".to_string(), "dense".to_string(), "hybrid".to_string()])]
    methods: Vec<String>,
    /// Cutoffs.
    #[arg(long, value_delimiter = ',', default_values_t = [2usize, 5, 10, 15])]
    k: Vec<usize>,
    /// Method the others are compared with (W/L/T on R@5, sign test, McNemar on LastHop@5).
    #[arg(long)]
    baseline: Option<String>,
    /// Evaluate only the first N questions.
    #[arg(long)]
    limit: Option<usize>,
    /// Write the full report as JSON to OUT (`-` or no value: stdout instead of tables).
    #[arg(long, value_name = "OUT", num_args = 0..=1, default_missing_value = "-")]
    pub json: Option<PathBuf>,
    /// Write a TREC run file (every method as its own run).
    #[arg(long, value_name = "OUT.trec")]
    run: Option<PathBuf>,
    /// Write the gold passages as a TREC qrels file.
    #[arg(long, value_name = "OUT.qrels")]
    qrels: Option<PathBuf>,
}

impl EvalArgs {
    pub fn json_to_stdout(&self) -> bool {
        self.json.as_deref() == Some(Path::new("-"))
    }
}

pub fn run(ctx: &Context, args: EvalArgs) -> anyhow::Result<()> {
    let engine = Engine::open(&args.index, super::apply_settings(&ctx.config, &args.settings)?)?;
    let (format, mut questions) = load_dataset(&args.dataset)?;
    if let Some(n) = args.limit {
        questions.truncate(n);
    }
    let resolved = resolve_gold(&questions, engine.index.passages());
    ctx.note(format!(
        "{}: {} questions ({format:?}), {} gold passages unmatched, {} matched ambiguously",
        args.dataset.display(),
        resolved.questions.len(),
        resolved.unmatched.len(),
        resolved.ambiguous.len()
    ));
    for issue in resolved.unmatched.iter().chain(&resolved.ambiguous).take(10) {
        ctx.note(format!("  question {}: gold {}: {}", issue.question_id, issue.gold, issue.problem));
    }
    let options = EvalOptions {
        ks: args.k.clone(),
        baseline: args.baseline.clone(),
        dataset: args.dataset.display().to_string(),
    };
    super::note_llm(ctx, &engine, args.methods.iter().map(String::as_str));
    let report = evaluate(&engine, &resolved, &args.methods, &options, &ctx.progress)?;
    if let Some(path) = &args.run {
        write_run(&report, path)?;
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
    print_report(&report);
    Ok(())
}

fn print_report(r: &EvalReport) {
    let at =
        |m: &std::collections::BTreeMap<String, f64>, k: usize| m.get(&k.to_string()).map_or("-".into(), |v| pct(*v));
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
    println!("{} — {} questions ({} with a known last hop)", r.dataset, r.n, last_hop_n);
    println!("{}", table(&header, &rows));

    if let Some(base) = &r.baseline {
        let header = [
            "method",
            "vs",
            "W/L/T on R@5",
            "sign p",
            "LastHop@5 only method/only base",
            "McNemar p",
            "LastHop wins/losses at each k",
        ];
        let rows: Vec<Vec<String>> = r
            .methods
            .iter()
            .filter_map(|(name, m)| {
                let v = m.vs_baseline.as_ref()?;
                Some(vec![
                    name.clone(),
                    base.clone(),
                    format!("{}/{}/{}", v.wins, v.losses, v.ties),
                    format!("{:.4}", v.sign_p),
                    format!("{}/{}", v.last_hop_only_method, v.last_hop_only_baseline),
                    format!("{:.4}", v.mcnemar_p),
                    r.ks.iter()
                        .map(|k| {
                            let k = k.to_string();
                            format!("@{k} {}/{}", v.last_hop_wins[&k], v.last_hop_losses[&k])
                        })
                        .collect::<Vec<_>>()
                        .join(" "),
                ])
            })
            .collect();
        println!("{}", table(&header.map(String::from), &rows));
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
    if !r.unmatched_gold.is_empty() {
        println!(
            "note: {} gold passages are not in the index and count as missed (--json lists them)",
            r.unmatched_gold.len()
        );
    }
}
