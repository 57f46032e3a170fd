use std::path::PathBuf;

use clap::Args;
use hoprag::retrieve::Query;
use hoprag::Engine;

use super::Context;

#[derive(Args)]
pub struct QueryArgs {
    /// Index directory.
    #[arg(long, value_name = "DIR")]
    index: PathBuf,
    /// Override a method parameter, e.g. `phasegraph.fusion.alpha=0.5` (repeatable).
    #[arg(long = "set", value_name = "PATH=VALUE")]
    settings: Vec<String>,
    /// Retrieval method (`hoprag methods` lists them).
    #[arg(long, default_value = "hybrid")]
    method: String,
    /// Passages to return.
    #[arg(short, default_value_t = 5)]
    k: usize,
    /// Include the method's trace (always included with --json).
    #[arg(long)]
    trace: bool,
    /// Print JSON (passages and trace).
    #[arg(long)]
    pub json: bool,
    /// The question.
    question: String,
}

pub fn run(ctx: &Context, args: QueryArgs) -> anyhow::Result<()> {
    let engine = Engine::open(&args.index, super::apply_settings(&ctx.config, &args.settings)?)?;
    let retriever = engine.retriever(&args.method)?;
    super::note_llm(ctx, &engine, [args.method.as_str()]);
    let r = retriever.retrieve(&Query::new(&args.question), args.k)?;
    if ctx.json {
        let passages: Vec<_> = r
            .hits
            .iter()
            .enumerate()
            .map(|(rank, h)| {
                let p = engine.index.passage(h.passage);
                serde_json::json!({"rank": rank + 1, "id": p.id, "title": p.title, "text": p.text, "score": h.score})
            })
            .collect();
        let out = serde_json::json!({"query": args.question, "method": args.method, "k": args.k,
                                     "passages": passages, "trace": r.trace});
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    println!("{} [{}]", args.question, args.method);
    for (rank, h) in r.hits.iter().enumerate() {
        let p = engine.index.passage(h.passage);
        let text: String = p.text.chars().take(160).collect();
        let ellipsis = if text.len() < p.text.len() { "…" } else { "" };
        println!("{:>3}. {:>8.4}  {} [{}]\n     {}{}", rank + 1, h.score, p.title, p.id, text, ellipsis);
    }
    if args.trace {
        println!("{}", serde_json::to_string_pretty(&r.trace)?);
    }
    Ok(())
}
