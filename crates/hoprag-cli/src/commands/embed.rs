//! `hoprag embed`: texts in, vectors out, with any embedder hoprag has: to compare
//! encoders, to reuse vectors elsewhere, and to test the encoder from outside.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _};
use clap::Args;
use hoprag::embed::{load_embedder, Embedder, EmbedderSpec, TextKind};
use hoprag::progress::Progress;

use super::Context;

#[derive(Args)]
pub struct EmbedArgs {
    /// JSONL input, one object with a `text` field per line (default: plain text on
    /// stdin, one text per line).
    #[arg(long, value_name = "FILE")]
    input: Option<PathBuf>,
    /// Output file: `.npy` for a float32 matrix (one row per text, in input order), any
    /// other name for JSONL (default: JSONL on stdout).
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// `minilm` (the default), `mpnet`, `embeddinggemma[:SETTINGS]` or `openai:MODEL`.
    #[arg(long, default_value = "minilm")]
    embedder: EmbedderSpec,
    /// Embed the texts as queries (some endpoint models embed queries differently).
    #[arg(long)]
    query: bool,
    /// Texts per embedder call.
    #[arg(long, default_value_t = 256)]
    batch: usize,
}

pub fn run(ctx: &Context, args: EmbedArgs) -> anyhow::Result<()> {
    let texts = match &args.input {
        Some(path) => read_jsonl(path)?,
        None => std::io::stdin().lock().lines().collect::<std::io::Result<Vec<_>>>().context("reading stdin")?,
    };
    let embedder = load_embedder(&args.embedder, &ctx.config.embedder)?;
    let kind = if args.query { TextKind::Query } else { TextKind::Passage };
    ctx.progress.start("embedding", texts.len() as u64);
    let mut sink = Sink::open(args.out.as_deref(), texts.len(), embedder.dim())?;
    for chunk in texts.chunks(args.batch.max(1)) {
        let vectors = embedder.embed(chunk, kind)?;
        check_dims(embedder.as_ref(), &vectors)?;
        sink.write(chunk, &vectors)?;
        ctx.progress.advance(chunk.len() as u64);
    }
    ctx.progress.finish();
    sink.finish()?;
    if let Some(out) = &args.out {
        ctx.note(format!(
            "{} vectors ({} dimensions, {}) written to {}",
            texts.len(),
            embedder.dim(),
            embedder.id(),
            out.display()
        ));
    }
    Ok(())
}

fn check_dims(embedder: &dyn Embedder, vectors: &[Vec<f32>]) -> anyhow::Result<()> {
    match vectors.iter().find(|v| v.len() != embedder.dim()) {
        Some(v) => bail!("the embedder returned a {}-dimensional vector, expected {}", v.len(), embedder.dim()),
        None => Ok(()),
    }
}

/// Every line's `text`; a line that is not an object with a string `text` is an error
/// naming the file and line (blank lines are skipped, as JSONL allows).
fn read_jsonl(path: &Path) -> anyhow::Result<Vec<String>> {
    let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut texts = Vec::new();
    for (i, line) in BufReader::new(file).lines().enumerate() {
        let line = line.with_context(|| format!("{}:{}", path.display(), i + 1))?;
        if line.trim().is_empty() {
            continue;
        }
        let value: serde_json::Value =
            serde_json::from_str(&line).with_context(|| format!("{}:{}: not JSON", path.display(), i + 1))?;
        match value.get("text").and_then(|t| t.as_str()) {
            Some(t) => texts.push(t.to_string()),
            None => bail!("{}:{}: no string field `text`", path.display(), i + 1),
        }
    }
    Ok(texts)
}

/// Where vectors go: JSONL lines `{"text", "vector"}` or a `.npy` float32 matrix.
enum Sink {
    Jsonl(Box<dyn Write>),
    Npy { out: BufWriter<File>, path: PathBuf },
}

impl Sink {
    fn open(path: Option<&Path>, rows: usize, dim: usize) -> anyhow::Result<Sink> {
        let create = |p: &Path| File::create(p).with_context(|| format!("creating {}", p.display()));
        Ok(match path {
            None => Sink::Jsonl(Box::new(BufWriter::new(std::io::stdout().lock()))),
            Some(p) if p.extension().is_some_and(|e| e == "npy") => {
                let mut out = BufWriter::new(create(p)?);
                out.write_all(&npy_header(rows, dim))?;
                Sink::Npy { out, path: p.to_path_buf() }
            }
            Some(p) => Sink::Jsonl(Box::new(BufWriter::new(create(p)?))),
        })
    }

    fn write(&mut self, texts: &[String], vectors: &[Vec<f32>]) -> anyhow::Result<()> {
        match self {
            Sink::Jsonl(out) => {
                for (text, vector) in texts.iter().zip(vectors) {
                    serde_json::to_writer(&mut *out, &serde_json::json!({"text": text, "vector": vector}))?;
                    out.write_all(b"\n")?;
                }
            }
            Sink::Npy { out, path } => {
                for v in vectors.iter().flatten() {
                    out.write_all(&v.to_le_bytes()).with_context(|| format!("writing {}", path.display()))?;
                }
            }
        }
        Ok(())
    }

    fn finish(self) -> anyhow::Result<()> {
        match self {
            Sink::Jsonl(mut out) => out.flush()?,
            Sink::Npy { mut out, path } => out.flush().with_context(|| format!("writing {}", path.display()))?,
        }
        Ok(())
    }
}

/// The header of a version 1.0 `.npy` file holding a C-order `<f4` matrix. Written here
/// rather than through a crate: it is one fixed dictionary padded to 64 bytes, and the
/// rows are streamed after it as they are embedded.
fn npy_header(rows: usize, cols: usize) -> Vec<u8> {
    let dict = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': ({rows}, {cols}), }}");
    // magic (6) + version (2) + header length (2) + dict + padding + '\n', a multiple of 64.
    let unpadded = 10 + dict.len() + 1;
    let padding = (64 - unpadded % 64) % 64;
    let header_len = (dict.len() + padding + 1) as u16;
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&header_len.to_le_bytes());
    out.extend_from_slice(dict.as_bytes());
    out.extend(std::iter::repeat_n(b' ', padding));
    out.push(b'\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn npy_header_is_aligned_and_describes_the_matrix() {
        let h = npy_header(3, 384);
        assert_eq!(h.len() % 64, 0);
        assert!(h.starts_with(b"\x93NUMPY\x01\x00"));
        assert_eq!(u16::from_le_bytes([h[8], h[9]]) as usize, h.len() - 10);
        let dict = std::str::from_utf8(&h[10..]).unwrap();
        assert!(dict.contains("'shape': (3, 384)") && dict.contains("'<f4'") && dict.ends_with('\n'));
    }
}
