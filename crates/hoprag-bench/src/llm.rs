//! `hoprag bench llm`: speed of the in-process GGUF chat model (llama.cpp): load time,
//! prompt processing (prefill) and generation tokens per second, median of a few runs
//! with a fixed prompt and a fixed number of generated tokens, and the process's peak
//! memory. Threads: the global `--threads` / `HOPRAG_THREADS`.

use std::time::Instant;

use clap::Args;
use hoprag::llm::{ChatRequest, LocalLlm, LocalModel, Message};
use serde::Serialize;

use crate::Context;

#[derive(Args)]
pub struct LlmBench {
    /// `smollm2`, `gemma3-270m`, `qwen2.5-0.5b`, `qwen2.5-1.5b`, a path to a .gguf file,
    /// or `installed`: each installed chat model in turn, each in a process of its own
    /// (so that its peak memory is its own).
    #[arg(long, default_value = "smollm2")]
    model: String,
    /// Prompt length in tokens (about: whole sentences are added until it is reached).
    #[arg(long, default_value_t = 512)]
    prompt_tokens: usize,
    /// Tokens generated per run (greedy, past any end of turn).
    #[arg(long, default_value_t = 64)]
    gen_tokens: u32,
    /// Timed runs (after one untimed warm-up run).
    #[arg(long, default_value_t = 3)]
    runs: usize,
}

#[derive(Serialize)]
struct Run {
    prefill_secs: f64,
    decode_secs: f64,
    prefill_tokens_per_sec: f64,
    decode_tokens_per_sec: f64,
}

#[derive(Serialize)]
struct Report {
    model: String,
    path: String,
    id: String,
    /// Threads a forward pass runs on.
    threads: usize,
    load_secs: f64,
    /// The process's peak resident memory (VmHWM) after the runs, in MiB; null where
    /// the system does not report it.
    peak_rss_mib: Option<f64>,
    prompt_tokens: usize,
    generated_tokens: usize,
    median_prefill_tokens_per_sec: f64,
    median_decode_tokens_per_sec: f64,
    runs: Vec<Run>,
}

/// Sentences of an invented passage, repeated to the prompt length.
const FILLER: &[&str] = &[
    "The Harrowgate ferry crosses the Velloria strait twice a day in summer.",
    "Its first captain, Ida Marsh, kept a log of every crossing from 1904 to 1931.",
    "The log is now held by the maritime museum in the old lighthouse.",
    "In 1958 a second ferry, the Corran Star, joined the route.",
];

pub fn run(ctx: &Context, args: LlmBench) -> anyhow::Result<()> {
    if args.runs == 0 || args.gen_tokens < 2 {
        anyhow::bail!("--runs must be at least 1 and --gen-tokens at least 2");
    }
    if args.model == "installed" {
        return run_installed(ctx, &args);
    }
    let model = LocalModel::resolve(&args.model)?;
    let t = Instant::now();
    let llm = LocalLlm::load(&model)?;
    let load_secs = t.elapsed().as_secs_f64();
    let llm = llm.as_ref();
    ctx.note(format!("loaded {} in {load_secs:.1}s", model.path.display()));

    let mut passage = String::new();
    let mut request = request(&passage, args.gen_tokens);
    for sentence in FILLER.iter().cycle() {
        if llm.prompt(&request)?.len() >= args.prompt_tokens {
            break;
        }
        passage.push_str(sentence);
        passage.push(' ');
        request = self::request(&passage, args.gen_tokens);
    }
    let prompt_tokens = llm.prompt(&request)?.len();

    llm.generate_exactly(&request)?; // warm-up: page in the weights, start the threads
    let mut runs = Vec::new();
    for _ in 0..args.runs {
        let g = llm.generate_exactly(&request)?;
        // The first new token comes from the prefill's logits; each later one costs a
        // forward pass.
        runs.push(Run {
            prefill_secs: g.prefill_secs,
            decode_secs: g.decode_secs,
            prefill_tokens_per_sec: g.prompt_tokens as f64 / g.prefill_secs,
            decode_tokens_per_sec: (g.completion_tokens - 1) as f64 / g.decode_secs,
        });
    }
    let report = Report {
        model: args.model.clone(),
        path: model.path.display().to_string(),
        id: hoprag::llm::Llm::id(llm).to_string(),
        threads: llm.threads(),
        load_secs,
        peak_rss_mib: super::proc_status_mib("VmHWM"),
        prompt_tokens,
        generated_tokens: args.gen_tokens as usize,
        median_prefill_tokens_per_sec: median(runs.iter().map(|r| r.prefill_tokens_per_sec).collect()),
        median_decode_tokens_per_sec: median(runs.iter().map(|r| r.decode_tokens_per_sec).collect()),
        runs,
    };
    if ctx.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "{} ({} threads): load {:.1}s; prompt processing {:.0} tokens/s ({} tokens), generation {:.1} tokens/s \
             ({} tokens); median of {} runs; peak memory {}",
            report.model,
            report.threads,
            report.load_secs,
            report.median_prefill_tokens_per_sec,
            report.prompt_tokens,
            report.median_decode_tokens_per_sec,
            report.generated_tokens,
            report.runs.len(),
            report.peak_rss_mib.map_or("unknown".to_string(), |m| format!("{m:.0} MiB"))
        );
    }
    Ok(())
}

/// Runs this command once per installed chat model, as a child process with the same
/// settings; with `--json`, the reports form one array.
fn run_installed(ctx: &Context, args: &LlmBench) -> anyhow::Result<()> {
    let installed: Vec<_> = hoprag::models::MODELS
        .iter()
        .filter(|m| m.kind == hoprag::models::ModelKind::Chat && hoprag::models::require(m.name).is_ok())
        .collect();
    if installed.is_empty() {
        anyhow::bail!("no chat model is installed; install one with `hoprag models fetch qwen2.5-0.5b`");
    }
    let exe = std::env::current_exe()?;
    let mut reports = Vec::new();
    for spec in installed {
        let mut child = std::process::Command::new(&exe);
        child.env("HOPRAG_THREADS", hoprag::threads::get().to_string());
        child.args(["-q", "bench", "llm", "--model", spec.name]).args([
            format!("--prompt-tokens={}", args.prompt_tokens),
            format!("--gen-tokens={}", args.gen_tokens),
            format!("--runs={}", args.runs),
        ]);
        if ctx.json {
            child.arg("--json");
        }
        let out = child.stderr(std::process::Stdio::inherit()).output()?;
        if !out.status.success() {
            anyhow::bail!("bench llm --model {} failed ({})", spec.name, out.status);
        }
        let stdout = String::from_utf8(out.stdout)?;
        if ctx.json {
            reports.push(serde_json::from_str::<serde_json::Value>(&stdout)?);
        } else {
            print!("{stdout}");
        }
    }
    if ctx.json {
        println!("{}", serde_json::to_string_pretty(&reports)?);
    }
    Ok(())
}

fn request(passage: &str, max_tokens: u32) -> ChatRequest {
    ChatRequest {
        max_tokens: Some(max_tokens),
        ..ChatRequest::new(vec![
            Message::system("You summarise passages."),
            Message::user(format!("Passage: {passage}\nSummarise the passage in one paragraph.")),
        ])
    }
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(|a, b| hoprag::rank::asc(*a, *b));
    let n = xs.len();
    if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    }
}
