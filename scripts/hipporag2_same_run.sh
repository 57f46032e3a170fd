#!/usr/bin/env bash
# HippoRAG 2's own code and hoprag `ppr` in the same run: same corpus, same triples, same
# MiniLM files, same questions. Prints both tables and the per-question agreement.
#
#   scripts/hipporag2_same_run.sh [DATASET] [OUT]
#
# DATASET is a folder of ../shared/data with corpus.json and questions.json (default
# musique-train, the only one with LLM triples: its GPT-3.5 OpenIE file is used when
# present, else hoprag's heuristic triples). OUT defaults to target/same-run/DATASET.
# Needs the peer's virtual environment (../shared/peers/hipporag2/README.md, "Set-up")
# at $PEER_VENV (default ~/.cache/peer-hipporag) and a built ./target/debug/hoprag
# (or $HOPRAG).
set -euo pipefail
cd "$(dirname "$0")/.."

set_name=${1:-musique-train}
data=../shared/data/$set_name
out=${2:-target/same-run/$set_name}
hoprag=${HOPRAG:-./target/debug/hoprag}
peer=${PEER_VENV:-$HOME/.cache/peer-hipporag}/bin/python
openie=$(ls "$data"/openie_*.json 2>/dev/null | head -1 || true)

[ -x "$hoprag" ] || { echo "no hoprag binary at $hoprag (cargo build -p hoprag-cli)" >&2; exit 2; }
[ -x "$peer" ] || { echo "no peer environment at $peer (see ../shared/peers/hipporag2/README.md)" >&2; exit 2; }
mkdir -p "$out"

# One hoprag index holds the triples both systems read: the peer takes them from it.
index=$out/index
if [ ! -f "$index/CURRENT" ]; then
    if [ -n "$openie" ]; then
        "$hoprag" index --corpus "$data/corpus.json" --triples "$openie" --out "$index"
    else
        "$hoprag" index --corpus "$data/corpus.json" --out "$index"
    fi
fi

echo "== hoprag (dense, ppr)"
"$hoprag" eval --index "$index" --dataset "$data/questions.json" --method dense,ppr --k 2,5,10,15 \
    --baseline dense --run "$out/runs"

echo "== HippoRAG 2 (PyPI hipporag 2.0.0a4, ../shared/peers/hipporag2/run.py)"
"$peer" ../shared/peers/hipporag2/run.py --corpus "$data/corpus.json" --questions "$data/questions.json" \
    --openie "$index" --docids id --out "$out/runs/hipporag2" --keep-index

echo "== same questions, same docids: R@k from the TREC runs and per-question agreement"
python3 - "$out/runs" <<'EOF'
import math, os, sys

sys.path.insert(0, "scripts")
from trec_runs import read_qrels as qrels, read_run as run

runs = sys.argv[1]

def sign_p(w, l):
    # Exact two-sided sign test over the questions that differ.
    n = w + l
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(0, min(w, l) + 1)) / 2 ** n
    return min(1.0, 2 * tail)

gold = qrels(os.path.join(runs, "qrels.txt"))
systems = {
    "hoprag ppr": run(os.path.join(runs, "ppr.trec")),
    "hoprag dense": run(os.path.join(runs, "dense.trec")),
    "hipporag2": run(os.path.join(runs, "hipporag2", "hipporag2.trec")),
    "hipporag2 dense": run(os.path.join(runs, "hipporag2", "dense.trec")),
}
qids = sorted(gold)

def recall(ranking, q, k):
    return len(gold[q] & set(ranking.get(q, [])[:k])) / len(gold[q])

print(f"{len(qids)} questions")
print(f"{'system':<16} {'R@2':>6} {'R@5':>6} {'R@10':>6} {'R@15':>6}")
for name, r in systems.items():
    cells = " ".join(f"{100 * sum(recall(r, q, k) for q in qids) / len(qids):6.1f}" for k in (2, 5, 10, 15))
    print(f"{name:<16} {cells}")
a, b = systems["hoprag ppr"], systems["hipporag2"]
for k in (5, 10):
    w = sum(recall(a, q, k) > recall(b, q, k) for q in qids)
    l = sum(recall(a, q, k) < recall(b, q, k) for q in qids)
    same_set = sum(set(a.get(q, [])[:k]) == set(b.get(q, [])[:k]) for q in qids)
    overlap = sum(len(set(a.get(q, [])[:k]) & set(b.get(q, [])[:k])) for q in qids) / (k * len(qids))
    print(f"ppr vs hipporag2 R@{k}: W/L/T {w}/{l}/{len(qids) - w - l} (sign p {sign_p(w, l):.4f}); "
          f"same top-{k} set on {same_set}/{len(qids)} questions, mean top-{k} overlap {100 * overlap:.1f}%")
d1, d2 = systems["hoprag dense"], systems["hipporag2 dense"]
same = sum(d1.get(q, [])[:15] == d2.get(q, [])[:15] for q in qids)
print(f"dense check: hoprag dense and HippoRAG 2's retrieve_dpr give the same top 15 on {same}/{len(qids)} questions")
EOF
