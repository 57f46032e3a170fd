use std::path::PathBuf;

use clap::Args;
use hoprag::dataset::{load_dataset, resolve_gold};
use hoprag::regime::{train, TrainingSet, MODEL_FILE};
use hoprag::Engine;

use super::{Context, SplitHalf};
use hoprag_bench::output::pct;

#[derive(Args)]
pub struct TrainRouterArgs {
    /// Index directory of the dataset's corpus (repeat with --dataset for several).
    #[arg(long, value_name = "DIR", required = true)]
    index: Vec<PathBuf>,
    /// Questions with gold passages, one file per --index, in the same order.
    #[arg(long, value_name = "FILE", required = true)]
    dataset: Vec<PathBuf>,
    /// Where to write the model (default: router.json in the index, with one index).
    #[arg(long, value_name = "MODEL.json")]
    out: Option<PathBuf>,
    /// Dense pool the router's labels rank (the method's pool).
    #[arg(long, default_value_t = 50)]
    pool: usize,
    /// α of Union (recorded in the model; the margin label does not depend on it).
    #[arg(long, default_value_t = 0.25)]
    alpha: f32,
    /// Train on one half of each question file (as `hoprag eval --split`), e.g. `tune`,
    /// and report on the other.
    #[arg(long, value_enum)]
    split: Option<SplitHalf>,
    /// Share of questions in the tune half.
    #[arg(long, default_value_t = 0.5, requires = "split")]
    tune_share: f64,
    /// Train only on questions of these types (as `hoprag eval --types`), e.g.
    /// `compositional,inference`: the paper trains on 2Wiki's bridge-type questions.
    #[arg(long, value_delimiter = ',', value_name = "TYPE,..")]
    types: Vec<String>,
    /// Cross-fitting folds.
    #[arg(long, default_value_t = 5)]
    folds: usize,
    /// Print the training report as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(ctx: &Context, args: TrainRouterArgs) -> anyhow::Result<()> {
    if args.index.len() != args.dataset.len() {
        anyhow::bail!("give one --dataset per --index ({} indexes, {} datasets)", args.index.len(), args.dataset.len());
    }
    let out = match (&args.out, args.index.as_slice()) {
        (Some(p), _) => p.clone(),
        (None, [one]) => one.join(MODEL_FILE),
        (None, _) => anyhow::bail!("with several indexes, say where the model goes with --out"),
    };
    let mut loaded = Vec::new();
    for (dir, file) in args.index.iter().zip(&args.dataset) {
        let engine = Engine::open(
            super::open_store(dir, &Default::default(), hoprag::store::Open::Existing)?,
            ctx.config.clone(),
        )?;
        let (_, mut questions) = load_dataset(file)?;
        super::eval::retain_types(ctx, &mut questions, &args.types);
        if let Some(half) = args.split {
            half.retain(ctx, &mut questions, args.tune_share);
        }
        let resolved = resolve_gold(&questions, engine.index.passages());
        ctx.note(format!(
            "{}: {} questions, {} gold passages unmatched",
            file.display(),
            resolved.questions.len(),
            resolved.unmatched.len()
        ));
        let texts: Vec<String> = resolved.questions.iter().map(|q| q.text.clone()).collect();
        let queries = engine.embed_queries(&texts, &ctx.progress)?;
        let file_name = match args.types.as_slice() {
            [] => file.display().to_string(),
            t => format!("{} (types {})", file.display(), t.join(",")),
        };
        let name = match args.split {
            Some(half) => {
                format!("{file_name}, {} half (MD5 split, tune share {})", half.name(), args.tune_share)
            }
            None => file_name,
        };
        loaded.push((engine, name, resolved, queries));
    }
    let sets: Vec<TrainingSet> = loaded
        .iter()
        .map(|(engine, name, data, queries)| TrainingSet {
            name: name.clone(),
            index: &engine.index,
            questions: &data.questions,
            queries,
        })
        .collect();
    let embedder = loaded[0].0.embedder.clone();
    let model = train(&sets, embedder.as_ref(), args.pool, args.alpha, args.folds, &ctx.progress)?;
    model.save(&out)?;
    let r = &model.report;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&serde_json::json!({"model": out, "report": r}))?);
        return Ok(());
    }
    println!("router model written to {}", out.display());
    println!(
        "selector: {} sentences ({} relation-bearing) from {} gold bridges; {} gold bridges name no next title (skipped)",
        r.selector_examples, r.selector_positives, r.bridges_with_naming_sentence, r.bridges_without_naming_sentence
    );
    let labelled = r.union_labels + r.q_labels;
    println!(
        "router labels (margin of the next gold passage over the pool, B_rel vs question): {labelled} of {} \
         questions — Union better {} ({}), Q at least as good {}; unlabelled (one gold passage, or an empty bridge): {}",
        r.questions,
        r.union_labels,
        pct(r.union_labels as f64 / labelled.max(1) as f64),
        r.q_labels,
        r.unlabelled_no_next_hop
    );
    println!(
        "cross-fitted ({} folds) router accuracy {} on {} labelled questions (majority label: {}); routed to Union: {}",
        r.folds,
        pct(r.cross_fitted_accuracy),
        r.cross_fitted_n,
        pct(r.majority_accuracy),
        pct(r.cross_fitted_union_share)
    );
    println!("the full model sends {} of the labelled training questions to Union", pct(r.full_union_share));
    if let Some(d) = &r.diagnostics {
        println!(
            "always Union (α {}) on these questions: the next gold passage enters the pool's top 5 on {}, leaves it on \
             {}; ranked higher on {}, lower on {}, the same on {}; the margin label agrees with \"Union ranks it \
             higher\" on {}",
            r.alpha,
            d.union_into_top5,
            d.union_out_of_top5,
            d.union_rank_better,
            d.union_rank_worse,
            d.union_rank_same,
            pct(d.margin_label_agrees_with_rank)
        );
        let show = |v: &[(String, f64)]| v.iter().map(|(n, a)| format!("{n} {a:.3}")).collect::<Vec<_>>().join(", ");
        println!(
            "the gold bridge is the dense top 1 (the bridge read at query time) on {} of them",
            d.bridge_is_dense_top1
        );
        println!("feature AUC vs the margin label (0.5 = no signal): {}", show(&d.feature_auc));
        println!("feature AUC vs \"Union brings it into the top 5\": {}", show(&d.feature_auc_top5_gain));
    }
    let by_t: Vec<String> = r
        .out_of_fold_by_threshold
        .iter()
        .map(|o| format!("τ {:.2}: {} routed, {}W/{}L", o.threshold, o.routed, o.wins, o.losses))
        .collect();
    println!("out-of-fold top-5 outcome by threshold: {}", by_t.join("; "));
    match r.selected_threshold {
        Some(t) => println!("no-regret threshold (most out-of-fold wins over losses): {t:.2}"),
        None => {
            println!("no-regret threshold: none (no τ wins more than it loses out of fold): the router keeps dense")
        }
    }
    Ok(())
}
