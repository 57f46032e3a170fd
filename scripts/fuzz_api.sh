#!/usr/bin/env bash
# The HTTP API under generated input: schemathesis (PyPI) against /openapi.json of a live
# `hoprag serve` on loopback, over a fresh index of the demo corpus, with the bearer token
# set. Bounded: EXAMPLES generated cases per operation (default 100) and MAX_TIME seconds
# in all (default 900).
#
#   scripts/fuzz_api.sh [EXAMPLES] [MAX_TIME]
#
# Checks: no 5xx; every response conforms to the schema's status codes, content types
# and body schemas (every error is a JSON `{error: {code, message}}`); requests the
# schema says are invalid are refused and valid ones accepted. schemathesis is installed
# into ~/.cache/hoprag-schemathesis (or $HOPRAG_SCHEMATHESIS_VENV) on first use.
# HOPRAG_BIN picks the binary (default ./target/debug/hoprag, built if missing);
# HOPRAG_FUZZ_STORE a store to serve instead of a folder (a PostgreSQL URL with a schema of
# its own: it is replaced). The store also holds a namespace `fuzz.ns-1`, so that requests
# naming namespaces reach one that exists as well as ones that do not.
set -euo pipefail
cd "$(dirname "$0")/.."

EXAMPLES=${1:-100}
MAX_TIME=${2:-900}
BIN=${HOPRAG_BIN:-./target/debug/hoprag}
VENV=${HOPRAG_SCHEMATHESIS_VENV:-$HOME/.cache/hoprag-schemathesis}
TOKEN=fuzz-token

[ -x "$VENV/bin/schemathesis" ] || { python3 -m venv "$VENV" && "$VENV/bin/pip" install -q schemathesis; }
[ -x "$BIN" ] || cargo build --quiet -p hoprag-cli
"$BIN" models fetch minilm >/dev/null

WORK=$(mktemp -d)
SERVER=
cleanup() {
  if [ -n "$SERVER" ]; then kill -TERM "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

STORE=${HOPRAG_FUZZ_STORE:-$WORK/idx}
"$BIN" index -q --force --corpus demo/corpus.jsonl --out "$STORE"
"$BIN" index -q --force --corpus demo/corpus.jsonl --out "$STORE" --namespace fuzz.ns-1
HOPRAG_TOKEN=$TOKEN "$BIN" serve --index "$STORE" --addr 127.0.0.1:0 >"$WORK/out" 2>"$WORK/server.log" &
SERVER=$!
for _ in $(seq 100); do grep -q '^listening on' "$WORK/out" 2>/dev/null && break; sleep 0.2; done
BASE=$(sed -n 's/^listening on //p' "$WORK/out")
[ -n "$BASE" ] || { cat "$WORK/server.log" >&2; echo "hoprag serve did not start" >&2; exit 1; }
case "$BASE" in http://127.0.0.1:*) ;; *) echo "refusing a non-loopback address: $BASE" >&2; exit 1 ;; esac

start=$(date +%s)
status=0
# Run from the scratch folder: schemathesis writes its case database into the current one.
cd "$WORK"
"$VENV/bin/schemathesis" run "$BASE/openapi.json" \
  --header "Authorization: Bearer $TOKEN" \
  --checks all --exclude-checks ignored_auth \
  --max-examples "$EXAMPLES" --max-time "$MAX_TIME" --workers 2 \
  --seed 32 || status=$?
echo "schemathesis: exit $status in $(( $(date +%s) - start )) s" >&2
if ! kill -0 "$SERVER" 2>/dev/null; then
  echo "the server died during the run; its log:" >&2
  tail -50 "$WORK/server.log" >&2
  exit 1
fi
exit "$status"
