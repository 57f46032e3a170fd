#!/usr/bin/env bash
# Load benchmark of `hoprag serve` with wrk (apt-get install wrk), on loopback only:
# requests/s and latency percentiles of POST /v1/retrieve, one bounded run per method.
#
#   scripts/bench_serve.sh [INDEX] [METHODS] [DURATION] [CONNECTIONS] [K]
#
# Defaults: /tmp/2wiki (built from ../shared/data/2wiki-corpus/corpus.json when missing,
# about 12 minutes of embedding on two slow cores), "bm25 dense hybrid", 10s, 4, 5.
# Queries: "Who is TITLE?" for 200 passage titles of the index, sampled with a fixed seed.
# HOPRAG_BIN picks the binary (default ./target/debug/hoprag, built if missing);
# HOPRAG_TOKEN, if set, is used by the server and sent by wrk.
set -euo pipefail
cd "$(dirname "$0")/.."

INDEX=${1:-/tmp/2wiki}
METHODS=${2:-"bm25 dense hybrid"}
DURATION=${3:-10s}
CONNECTIONS=${4:-4}
K=${5:-5}
THREADS=$(( CONNECTIONS < 2 ? CONNECTIONS : 2 ))
BIN=${HOPRAG_BIN:-./target/debug/hoprag}
CORPUS=../shared/data/2wiki-corpus/corpus.json

command -v wrk >/dev/null || { echo "needs wrk: apt-get install -y wrk" >&2; exit 1; }
[ -x "$BIN" ] || cargo build --quiet -p hoprag-cli
if [ ! -e "$INDEX/CURRENT" ]; then
  echo "building $INDEX from $CORPUS (once)" >&2
  "$BIN" index --corpus "$CORPUS" --out "$INDEX" -q
fi

WORK=$(mktemp -d)
SERVER=
cleanup() {
  if [ -n "$SERVER" ]; then kill -TERM "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

python3 - "$INDEX" "$WORK/queries.txt" <<'PY'
import json, random, sys
from pathlib import Path
root = Path(sys.argv[1])
generation = root / (root / "CURRENT").read_text().strip()
titles = sorted({json.loads(line)["title"] for line in open(generation / "passages.jsonl")} - {""})
random.Random(7).shuffle(titles)
with open(sys.argv[2], "w") as out:
    for t in titles[:200]:
        out.write(json.dumps(f"Who is {t}?") + "\n")
PY

# Access logs off (RUST_LOG=warn): one stderr line per request would be measured too.
RUST_LOG=warn "$BIN" serve --index "$INDEX" --addr 127.0.0.1:0 >"$WORK/out" 2>"$WORK/err" &
SERVER=$!
for _ in $(seq 600); do
  grep -q "^listening on " "$WORK/out" 2>/dev/null && break
  kill -0 "$SERVER" 2>/dev/null || { cat "$WORK/err" >&2; exit 1; }
  sleep 0.1
done
URL=$(sed -n 's/^listening on //p' "$WORK/out")
[ -n "$URL" ] || { echo "the server did not start" >&2; cat "$WORK/err" >&2; exit 1; }
PASSAGES=$(curl -s "$URL/health" | python3 -c 'import json,sys; print(json.load(sys.stdin)["passages"])')

echo "index $INDEX ($PASSAGES passages), $URL, wrk -t$THREADS -c$CONNECTIONS -d$DURATION, k=$K, $(nproc) cores"
printf '%-10s %10s %9s %9s %9s %9s %9s %8s %7s\n' method "req/s" "p50 ms" "p90 ms" "p99 ms" "mean ms" requests non-2xx errors
for METHOD in $METHODS; do
  # Warm-up: the first request of a method loads what it needs.
  curl -s -o /dev/null -H "Content-Type: application/json" ${HOPRAG_TOKEN:+-H "Authorization: Bearer $HOPRAG_TOKEN"} \
    -d "{\"query\": \"warm up\", \"method\": \"$METHOD\"}" "$URL/v1/retrieve"
  wrk -t"$THREADS" -c"$CONNECTIONS" -d"$DURATION" --timeout 30s -s scripts/bench_serve.lua "$URL/v1/retrieve" \
    -- "$METHOD" "$K" "$WORK/queries.txt" "${HOPRAG_TOKEN:-}" >"$WORK/wrk.txt"
  read -r _ rps p50 p90 p99 mean n non2xx errors < <(grep '^RESULT ' "$WORK/wrk.txt")
  printf '%-10s %10s %9s %9s %9s %9s %9s %8s %7s\n' "$METHOD" "$rps" "$p50" "$p90" "$p99" "$mean" "$n" "$non2xx" "$errors"
done
