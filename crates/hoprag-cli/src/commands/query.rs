use std::path::PathBuf;

use clap::Args;
use hoprag::engine::DEFAULT_METHOD;
use hoprag::response::RetrieveResponse;
use hoprag::retrieve::Query;
use hoprag::Engine;

use super::Context;

#[derive(Args)]
pub struct QueryArgs {
    /// The index: a folder, or a PostgreSQL URL `postgres://USER@HOST:PORT/DB?schema=NAME`
    /// (`--store` is the same flag).
    #[arg(long, alias = "store", env = "HOPRAG_STORE", value_name = "DIR|URL")]
    index: PathBuf,
    #[command(flatten)]
    namespace: super::NamespaceArg,
    /// Override a method parameter, e.g. `phasegraph.fusion.alpha=0.5` (repeatable).
    #[arg(long = "set", value_name = "PATH=VALUE")]
    settings: Vec<String>,
    /// Retrieval method (`hoprag methods` lists them); `auto` is the best LLM-free pipeline.
    #[arg(long, default_value = DEFAULT_METHOD)]
    method: String,
    /// Passages to return.
    #[arg(short, default_value_t = 5)]
    k: usize,
    /// Return only passages whose `meta` matches this filter (JSON, e.g.
    /// `{"year": {"$gte": 2000}}`; docs/filters.md): the first k of the method's order
    /// that match.
    #[arg(long, value_name = "JSON")]
    filter: Option<String>,
    /// Include the method's trace (always included with --json).
    #[arg(long)]
    trace: bool,
    /// Print JSON (passages and trace).
    #[arg(long)]
    pub json: bool,
    /// Also answer the question from the passages with the LLM (`hoprag answer`).
    #[arg(skip)]
    pub answer: bool,
    /// The question.
    question: String,
}

#[derive(serde::Serialize)]
struct QueryOutput<'a> {
    #[serde(flatten)]
    response: RetrieveResponse,
    #[serde(skip_serializing_if = "Option::is_none")]
    answer: Option<&'a hoprag::answer::Answer>,
}

pub fn run(ctx: &Context, args: QueryArgs) -> anyhow::Result<()> {
    let store = super::open_store(&args.index, &args.namespace, hoprag::store::Open::Existing)?;
    let engine = Engine::open(store.clone(), ctx.config_for(store.as_ref(), &args.settings)?)?;
    let retriever = engine.retriever(&args.method)?;
    super::note_llm(ctx, &engine, [args.method.as_str()]);
    let mut query = Query::new(&args.question);
    if let Some(text) = &args.filter {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| anyhow::anyhow!("--filter: not JSON: {e}"))?;
        query.filter = Some(engine.select(&value)?);
    }
    let r = retriever.retrieve(&query, args.k)?;
    let answer = if args.answer {
        let llm = engine
            .llm()
            .ok_or_else(|| anyhow::anyhow!("answering needs an LLM: set HOPRAG_LLM_BASE_URL and HOPRAG_LLM_MODEL"))?;
        let passages: Vec<&hoprag::Passage> = r.hits.iter().map(|h| engine.index.passage(h.passage)).collect();
        Some(hoprag::answer::answer(llm.as_ref(), &args.question, &passages, hoprag::answer::MAX_TOKENS)?)
    } else {
        None
    };
    if ctx.json {
        // The document `POST /v1/retrieve` answers with, plus the answer when asked for.
        // Serialised straight to text (not through a `Value`, which would widen the f32
        // scores to f64 digits), so that the CLI and the server print the same numbers.
        let out = QueryOutput {
            response: RetrieveResponse::new(&engine, args.question, args.method, args.k, r),
            answer: answer.as_ref(),
        };
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
    if let Some(a) = &answer {
        println!("answer: {}", a.text);
    }
    Ok(())
}
