#!/usr/bin/env bash
# BridgeRAG's ablation conditions A, B, C end to end on the HotpotQA and MuSiQue subsets,
# with tokens and latency per stage and the B -> C flip table. Uses the chat model the
# environment configures (HOPRAG_LLM_BASE_URL / HOPRAG_LLM_MODEL) and the indexes of the
# README (/tmp/hotpot, /tmp/musique). LIMIT questions per dataset (default 5): measure one
# query first (`hoprag query --method bridge_rag --json ...`) and size LIMIT from it.
# Answers are cached, so a second run (or a larger LIMIT) pays only for new questions.
set -euo pipefail
cd "$(dirname "$0")/.."
LIMIT=${1:-5}
OUT=${OUT:-/tmp/bridge-abc}
mkdir -p "$OUT"
bash scripts/llm-build-deps.sh
cargo build --quiet -p hoprag-cli --features local-llm
H=./target/debug/hoprag
for name in hotpot musique; do
  case $name in
    hotpot) data=../shared/data/hotpotqa-train/questions.json ;;
    musique) data=../shared/data/musique-train/questions.json ;;
  esac
  echo "== $name ($LIMIT questions)"
  $H eval -q --index /tmp/$name --dataset $data --limit "$LIMIT" --k 2,5,10 \
    --method dense,bridge_rag_a,bridge_rag_b,bridge_rag --baseline bridge_rag_b \
    --flips bridge_rag_b,bridge_rag --stages --traces --json "$OUT/$name.json" | tee "$OUT/$name.txt"
done
