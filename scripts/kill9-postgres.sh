#!/usr/bin/env bash
# kill -9 of `hoprag index --store postgres://...` at random moments, and what the store
# holds afterwards: the old generation or the new one, whole, never a mix.
#
#   scripts/kill9-postgres.sh PG_DATA_DIR [KILLS]      (default 10 kills)
#
# The old generation is the demo corpus (60 passages); each round rebuilds the store
# from ../shared/data/hotpotqa-train/corpus.json (994 passages, MiniLM, with the
# heuristic graph) and is killed after a delay drawn uniformly over a whole build's
# duration, measured first. After each kill it checks, in SQL, that `current` names a
# generation whose passage count and corpus checksum are one of the two builds', that
# the generation's build holds exactly that many passage rows below its count, and that
# `hoprag query` answers from it.
set -euo pipefail
cd "$(dirname "$0")/.."
PG_DIR=${1:?usage: scripts/kill9-postgres.sh PG_DATA_DIR [KILLS]}
KILLS=${2:-10}
HOPRAG=${HOPRAG:-target/debug/hoprag}
SCHEMA=kill9_$$
URL="$(bash scripts/postgres.sh url "$PG_DIR")?schema=$SCHEMA"
NEW_CORPUS=../shared/data/hotpotqa-train/corpus.json
sql() { bash scripts/postgres.sh psql "$PG_DIR" -qAt -c "SET search_path = $SCHEMA, public; $1" | tail -n +1; }
live() { sql "SELECT g.passages || ' ' || (g.manifest->>'corpus_checksum') || ' ' || g.build FROM current c JOIN generations g ON g.id = c.generation"; }

"$HOPRAG" index -q --corpus demo/corpus.jsonl --store "$URL" --force >/dev/null
read -r OLD_N OLD_SUM _ <<<"$(live)"
start=$(date +%s.%N)
"$HOPRAG" index -q --corpus "$NEW_CORPUS" --store "$URL" --force >/dev/null
full=$(echo "$(date +%s.%N) - $start" | bc)
read -r NEW_N NEW_SUM _ <<<"$(live)"
echo "old generation: $OLD_N passages; new: $NEW_N passages; a whole build takes ${full}s"

ok=0
for i in $(seq 1 "$KILLS"); do
    "$HOPRAG" index -q --corpus demo/corpus.jsonl --store "$URL" --force >/dev/null # back to the old one
    delay=$(python3 -c "import random; print(round(random.uniform(0, $full), 2))")
    "$HOPRAG" index -q --corpus "$NEW_CORPUS" --store "$URL" --force >/dev/null 2>&1 &
    pid=$!
    sleep "$delay"
    during=$(sql "SELECT coalesce(string_agg(left(query, 40), ' | '), 'none') FROM pg_stat_activity WHERE state <> 'idle' AND query NOT LIKE '%pg_stat_activity%' AND datname = current_database()")
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    sleep 0.5 # the server notices the dropped connection and rolls back
    read -r n sum build <<<"$(live)"
    rows=$(sql "SELECT count(*) FROM passages_b$build WHERE idx < $n")
    which=mix
    if [ "$n" = "$OLD_N" ] && [ "$sum" = "$OLD_SUM" ]; then which=old; fi
    if [ "$n" = "$NEW_N" ] && [ "$sum" = "$NEW_SUM" ]; then which=new; fi
    answers=$("$HOPRAG" query -q --store "$URL" --method bm25 --json "Which river?" | python3 -c "import json,sys; print(len(json.load(sys.stdin)['passages']))")
    verdict=FAIL
    if [ "$which" != mix ] && [ "$rows" = "$n" ] && [ "$answers" -gt 0 ]; then verdict=ok; ok=$((ok + 1)); fi
    echo "kill $i at ${delay}s (writer busy with: ${during:0:90}): store holds the $which generation ($n passages, $rows rows) -> $verdict"
done
echo "$ok of $KILLS kills left a whole generation"
bash scripts/postgres.sh psql "$PG_DIR" -qc "SET client_min_messages = warning; DROP SCHEMA $SCHEMA CASCADE" >/dev/null
[ "$ok" = "$KILLS" ]
