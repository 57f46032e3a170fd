#!/usr/bin/env bash
# The LLM stages measured offline with a local model (README, "Local models"): OpenIE
# on the passages of the first N MuSiQue questions (triples per passage, entity
# agreement with GPT-3.5's OpenIE, PPR R@5/R@10 with local-LLM vs GPT-3.5 vs heuristic
# triples vs dense), then BridgeRAG A/B/C and SyncGE vs dense on M HotpotQA questions.
# Usage: scripts/llm_offline.sh [MODEL] [N] [M]. Answers are cached (the LLM response
# cache), so a rerun is instant and a larger N pays only for the new passages.
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${1:-qwen2.5-0.5b}
N=${2:-3}
M=${3:-5}
OUT=${OUT:-/tmp/llm-offline}
H=./target/debug/hoprag
bash scripts/llm-build-deps.sh
cargo build --quiet -p hoprag-cli --features local-llm
mkdir -p "$OUT/musique"
python3 scripts/llm_slice.py make "$OUT/musique" "$N"
for src in gpt heuristic llm; do
  idx="$OUT/musique/idx-$src"
  [ -d "$idx" ] || $H index -q --corpus "$OUT/musique/corpus.json" --out "$idx"
  case $src in
    gpt) $H graph -q --index "$idx" --triples ../shared/data/musique-train/openie_gpt-3.5-turbo-1106.json ;;
    heuristic) ;; # `hoprag index` builds the heuristic graph by default
    llm) /usr/bin/time -f "openie wall %e s" $H graph --index "$idx" --extract llm --llm-local "$MODEL" --json \
           > "$OUT/musique/llm-graph.json" ;;
  esac
  echo "== musique, $src triples"
  $H eval -q --index "$idx" --dataset "$OUT/musique/questions.json" --k 5,10 --method dense,ppr
done
python3 scripts/llm_slice.py agree "$OUT/musique" "$OUT"/musique/idx-{gpt,heuristic,llm}
[ "$M" -gt 0 ] || exit 0
hidx="$OUT/hotpot-idx"
[ -d "$hidx" ] || $H index -q --corpus ../shared/data/hotpotqa-train/corpus.json --out "$hidx"
echo "== hotpotqa, $M questions, local $MODEL"
HOPRAG_LLM_LOCAL=$MODEL /usr/bin/time -f "hotpot wall %e s" $H eval -q --index "$hidx" \
  --dataset ../shared/data/hotpotqa-train/questions.json --limit "$M" --k 5,10 \
  --method dense,bridge_rag_a,bridge_rag_b,bridge_rag,sync_ge --baseline dense --stages --json "$OUT/hotpot.json"
