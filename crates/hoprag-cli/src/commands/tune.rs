use std::path::PathBuf;

use clap::Args;
use hoprag::dataset::{load_dataset, resolve_gold};
use hoprag::eval::tune::{tune, Metric, TuneOptions};
use hoprag::Engine;
use serde_json::Value;

use super::Context;
use hoprag_bench::output::{pct, table};

#[derive(Args)]
pub struct TuneArgs {
    /// The index: a folder, or a PostgreSQL URL `postgres://USER@HOST:PORT/DB?schema=NAME`
    /// (`--store` is the same flag).
    #[arg(long, alias = "store", env = "HOPRAG_STORE", value_name = "DIR|URL")]
    index: PathBuf,
    #[command(flatten)]
    namespace: super::NamespaceArg,
    /// Override a method parameter, e.g. `phasegraph.dk=20` (repeatable).
    #[arg(long = "set", value_name = "PATH=VALUE")]
    settings: Vec<String>,
    /// Questions with gold.
    #[arg(long, value_name = "FILE")]
    dataset: PathBuf,
    /// Method to tune.
    #[arg(long)]
    method: String,
    /// A parameter and its values, e.g. `alpha=0.5,0.6,0.7` or `dk=20,30` or
    /// `normalization=pit,min_max` (repeat for more axes; names may be dotted config paths).
    #[arg(long = "grid", value_name = "NAME=V1,V2,..", required = true)]
    grid: Vec<String>,
    /// Selection metric on the tune split.
    #[arg(long, default_value = "last_hop@10")]
    metric: Metric,
    /// Cutoffs reported on test.
    #[arg(long, value_delimiter = ',', default_values_t = [2usize, 5, 10, 15])]
    k: Vec<usize>,
    /// Method compared with on the test split.
    #[arg(long)]
    baseline: Option<String>,
    /// Share of questions in the tune split (by MD5 of the question id).
    #[arg(long, default_value_t = 0.5)]
    tune_share: f64,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

fn parse_axis(s: &str) -> anyhow::Result<(String, Vec<Value>)> {
    let (name, values) = s.split_once('=').ok_or_else(|| anyhow::anyhow!("--grid {s:?}: expected NAME=V1,V2"))?;
    let values = values
        .split(',')
        .filter(|v| !v.is_empty())
        .map(|v| serde_json::from_str(v).unwrap_or_else(|_| Value::String(v.to_string())))
        .collect();
    Ok((name.trim().to_string(), values))
}

pub fn run(ctx: &Context, args: TuneArgs) -> anyhow::Result<()> {
    let store = super::open_store(&args.index, &args.namespace, hoprag::store::Open::Existing)?;
    let engine = Engine::open(store.clone(), ctx.config_for(store.as_ref(), &args.settings)?)?;
    let (_, questions) = load_dataset(&args.dataset)?;
    let data = resolve_gold(&questions, engine.index.passages());
    let grid = args.grid.iter().map(|g| parse_axis(g)).collect::<anyhow::Result<Vec<_>>>()?;
    let options = TuneOptions {
        method: args.method.clone(),
        grid,
        metric: args.metric.clone(),
        ks: args.k.clone(),
        baseline: args.baseline.clone(),
        tune_share: args.tune_share,
        dataset: args.dataset.display().to_string(),
    };
    super::note_llm(ctx, &engine, [args.method.as_str()]);
    let report = tune(&engine, &data, &options, &ctx.progress)?;
    if ctx.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    let show = |s: &[(String, Value)]| s.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ");
    let header = vec!["setting".to_string(), format!("tune {}", report.metric)];
    let rows: Vec<Vec<String>> = report.grid.iter().map(|g| vec![show(&g.setting), pct(g.tune_score)]).collect();
    println!("{} on {} tune / {} test questions", report.method, report.tune_n, report.test_n);
    println!("{}", table(&header, &rows));
    println!("chosen on tune: {} ({} = {})", show(&report.best), report.metric, pct(report.best_tune_score));
    print!("test: {} = {}", report.metric, pct(report.test_score));
    if let (Some(b), Some(s)) = (&args.baseline, report.baseline_test_score) {
        print!(" vs {b} {}", pct(s));
        if let Some(v) = report.test.methods.get(&report.method).and_then(|m| m.vs_baseline.as_ref()) {
            let k = report.metric.k.to_string();
            let last_hop = v.all.last_hop.get(&k).map_or("n/a (no hop order)".to_string(), |c| {
                format!("{}/{}, McNemar p {:.3}", c.only_method, c.only_baseline, c.p)
            });
            print!(
                " (W/L/T on R@{} {}/{}/{}, two-sided sign p {:.3}; LastHop@{k} wins/losses {last_hop})",
                v.k, v.all.wins, v.all.losses, v.all.ties, v.all.sign_p,
            );
        }
    }
    println!();
    Ok(())
}
