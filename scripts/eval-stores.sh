#!/usr/bin/env bash
# The folder store's and the PostgreSQL store's eval tables side by side, on the shared
# benchmark subsets: each subset is indexed into PostgreSQL (MiniLM, heuristic graph,
# HNSW) and into a folder, then evaluated with bm25, dense, hybrid and ppr (exact
# vectors), and with dense and hybrid through pgvector's HNSW.
#
#   scripts/eval-stores.sh POSTGRES_URL [WORK_DIR]
#
# POSTGRES_URL without ?schema= (e.g. `scripts/postgres.sh url DIR`); the schemas
# eval_musique and eval_hotpotqa are replaced. WORK_DIR (default a temporary folder)
# receives the folder indexes and the JSON reports.
set -euo pipefail
cd "$(dirname "$0")/.."
BASE=${1:?usage: scripts/eval-stores.sh POSTGRES_URL [WORK_DIR]}
WORK=${2:-$(mktemp -d)}
H=${HOPRAG:-target/debug/hoprag}
for set in musique-train hotpotqa-train; do
    name=${set%%-*}
    url="$BASE?schema=eval_$name"
    q=../shared/data/$set/questions.json
    "$H" index -q --corpus "../shared/data/$set/corpus.json" --out "$WORK/$name" --force
    "$H" index -q --corpus "../shared/data/$set/corpus.json" --store "$url" --vector-index hnsw --force
    "$H" eval -q --index "$WORK/$name" --dataset "$q" --method bm25,dense,hybrid,ppr --k 2,5,10,15 --json >"$WORK/$name-folder.json"
    "$H" eval -q --store "$url" --dataset "$q" --method bm25,dense,hybrid,ppr --k 2,5,10,15 --set dense.exact=true --json >"$WORK/$name-pg-exact.json"
    "$H" eval -q --store "$url" --dataset "$q" --method dense,hybrid --k 2,5,10,15 --json >"$WORK/$name-pg-hnsw.json"
done
python3 - "$WORK" <<'PY'
import json, sys
work = sys.argv[1]
cell = lambda m: " / ".join(f"{100 * m['recall'][k]:.1f}" for k in ["2", "5", "10", "15"])
for name in ["musique", "hotpotqa"]:
    f, e, h = (json.load(open(f"{work}/{name}-{x}.json")) for x in ["folder", "pg-exact", "pg-hnsw"])
    print(f"\n| {name} | folder R@2 / R@5 / R@10 / R@15 | PostgreSQL R@2 / R@5 / R@10 / R@15 |\n|---|---|---|")
    for m in ["bm25", "dense", "hybrid", "ppr"]:
        print(f"| {m}, exact | {cell(f['methods'][m])} | {cell(e['methods'][m])} |")
    for m in ["dense", "hybrid"]:
        print(f"| {m}, PostgreSQL HNSW (folder exact) | {cell(f['methods'][m])} | {cell(h['methods'][m])} |")
PY
