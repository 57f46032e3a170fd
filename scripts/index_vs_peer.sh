#!/usr/bin/env bash
# Issue 52's measurement: for each corpus, in one run on 2 threads, sentence-transformers
# embedding its passages with the same MiniLM files (../shared/peers/embed_bench.py), then
# `hoprag index` of it with default settings, with the dev and the release build. Prints
# one row per corpus: passages, the peer's seconds, then for each build its seconds, its
# ratio to the peer, and its passages / entities / facts seconds.
#
# usage: scripts/index_vs_peer.sh OUT_DIR [CORPUS_NAME ...]   (default: 2wiki-corpus musique-dev hotpotqa-dev)
# needs: target/debug/hoprag and target/release/hoprag built, and the peers' venv
#        (~/.cache/hoprag-peers, see ../shared/peers/README.md)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:?usage: scripts/index_vs_peer.sh OUT_DIR [CORPUS_NAME ...]}"
shift
SETS=("$@")
[ $# -eq 0 ] && SETS=(2wiki-corpus musique-dev hotpotqa-dev)
D=../shared/data
PY="${HOPRAG_PEERS_PYTHON:-$HOME/.cache/hoprag-peers/bin/python}"
mkdir -p "$OUT"
for S in "${SETS[@]}"; do
  C="$D/$S/corpus.json"
  N=$(python3 -c "import json,sys; print(len(json.load(open(sys.argv[1]))))" "$C")
  "$PY" ../shared/peers/embed_bench.py "$C" --limit "$N" --threads 2 --queries 20 2>/dev/null >"$OUT/peer-$S.json"
  for B in debug release; do
    rm -rf "$OUT/index-$B-$S"
    "./target/$B/hoprag" index --threads 2 --corpus "$C" --out "$OUT/index-$B-$S" --json >"$OUT/$B-$S.json"
  done
  python3 - "$OUT" "$S" <<'PY'
import json, sys
out, s = sys.argv[1], sys.argv[2]
peer = json.load(open(f"{out}/peer-{s}.json"))
row = [s, peer["passages"], peer["seconds"]]
for build in ["debug", "release"]:
    t = json.load(open(f"{out}/{build}-{s}.json"))["time"]
    row += [round(t["total_secs"], 1), round(t["total_secs"] / peer["seconds"], 2), round(t["passages_secs"], 1),
            round(t.get("entity_embed_secs", 0), 1), round(t.get("fact_embed_secs", 0), 1)]
print(" | ".join(str(x) for x in row), flush=True)
PY
done
