#!/usr/bin/env bash
# Edit equivalence on the dev sets (issue 49): an index edited through the CLI against a
# fresh `hoprag index` of the same documents, compared by the TREC runs of every LLM-free
# method and by their R@5.
#
#   scripts/edit_equivalence.sh BIN OUT_DIR [SET...]    SET: musique-dev hotpotqa-dev 2wiki-dev (default: all)
#
# For each SET, one after another:
# - corpus: the set's corpus.json indexed once and written back with `BIN export
#   documents` as OUT_DIR/SET/corpus.jsonl, so that every passage has its id first: the
#   sets' JSON files carry none, and the loader gives a passage without one its content id
#   (the first 16 hex digits of SHA-256(title, newline, text)); each passage is a document
#   of its own. A fifth of the documents (`fifth.ids`, sampled with Python's
#   random.Random(49) from the sorted ids) and a tenth of the passages (`tenth.jsonl`,
#   random.Random(4910)) are drawn; a drawn passage is rewritten with its sentences in
#   reverse order (split after ". "), or, if it has one sentence, with " Revised." appended
#   (same id, no `doc`: replaced in place).
# - fresh indexes (`BIN index`): `whole` (corpus.jsonl), `rest` (without the fifth),
#   `rewritten` (corpus.jsonl with the tenth replaced).
# - edited indexes, each a copy of a fresh one edited by one command:
#   (a) add:     rest + `BIN add --corpus fifth.jsonl`        twin: whole
#   (b) delete:  whole + `BIN delete --from fifth.ids`        twin: rest
#   (c) rewrite: whole + `BIN add --corpus tenth.jsonl`       twin: rewritten
# - every index is evaluated with scripts/trec_equivalence.sh's run mode (`BIN eval --run`,
#   the eight LLM-free methods, k = 2,5,10,15) on the set's questions, into
#   OUT_DIR/SET/CASE/{edited,fresh}/SET, and the two compared with its compare mode (every
#   .trec and qrels.txt byte for byte); the R@5 of every method, edited and fresh, is
#   printed from the runs' report.json.
#
# OUT_DIR/SET/timings.tsv holds the seconds of every index build, edit and eval;
# OUT_DIR/SET/logs the commands' output (the edits' JSON reports, with where their time
# went); OUT_DIR/summary.txt the comparisons and the R@5 tables. Work indexes are kept
# under OUT_DIR/SET/idx (delete them when done: they are rebuilt on the next call).
#
# Environment: HOPRAG_EQ_DATA (default ../shared/data beside the checkout), HOPRAG_THREADS
# (passed through to every command).
# Exit status: 0 every run identical, 1 a run differs or a command failed, 2 usage error.
set -euo pipefail

REPO="$(cd "$(dirname "$0")/.." && pwd)"
DATA="${HOPRAG_EQ_DATA:-$REPO/../shared/data}"
TREC_EQ="$REPO/scripts/trec_equivalence.sh"
ALL_SETS=(musique-dev hotpotqa-dev 2wiki-dev)
CASES=(add delete rewrite)

usage() {
    sed -n '5,6p' "$0" | sed 's/^# \{0,1\}//' >&2
    [ $# -gt 0 ] && echo "edit_equivalence.sh: $*" >&2
    exit 2
}

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# Runs a command, its output in LOG, and records its wall time under STEP in TIMINGS.
# timed TIMINGS SET STEP LOG COMMAND...
timed() {
    local timings="$1" set="$2" step="$3" log="$4"
    shift 4
    local t secs
    t="$(now)"
    if ! "$@" >"$log" 2>&1; then
        echo "[$set] $step failed; see $log" >&2
        tail -n 20 "$log" >&2
        exit 1
    fi
    secs="$(elapsed "$t")"
    printf '%s\t%s\t%s\n' "$set" "$step" "$secs" >>"$timings"
    echo "[$set] $step: ${secs}s"
}

# Writes fifth.ids, fifth.jsonl, rest.jsonl, tenth.jsonl and rewritten.jsonl beside corpus.jsonl.
draw() {
    python3 - "$1" <<'EOF'
import json, os, random, sys
d = sys.argv[1]
rows = [json.loads(l) for l in open(os.path.join(d, "corpus.jsonl")) if l.strip()]
ids = sorted(r["id"] for r in rows)
assert len(set(ids)) == len(ids), "ids must be unique"
assert all("doc" not in r for r in rows), "each passage is a document of its own"
fifth = set(random.Random(49).sample(ids, len(ids) // 5))
tenth = set(random.Random(4910).sample(ids, len(ids) // 10))

def rewrite(text):
    parts = text.split(". ")
    if len(parts) > 1:
        # Sentences in reverse order; each but the last (which keeps its own ending) had ". " after it.
        sentences = [p + "." for p in parts[:-1]] + [parts[-1]]
        out = " ".join(reversed(sentences))
        if out != text:
            return out
    return text + " Revised."

def write(name, rs):
    with open(os.path.join(d, name), "w") as f:
        for r in rs:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")

write("fifth.jsonl", [r for r in rows if r["id"] in fifth])
write("rest.jsonl", [r for r in rows if r["id"] not in fifth])
with open(os.path.join(d, "fifth.ids"), "w") as f:
    f.write("".join(i + "\n" for i in sorted(fifth)))
rewritten = [dict(r, text=rewrite(r["text"])) if r["id"] in tenth else r for r in rows]
write("tenth.jsonl", [r for r in rewritten if r["id"] in tenth])
write("rewritten.jsonl", rewritten)
print(f"{len(rows)} passages; fifth {len(fifth)}, tenth {len(tenth)} "
      f"({sum(1 for r in rows if r['id'] in tenth and len(r['text'].split('. ')) == 1)} of them with one sentence)")
EOF
}

# R@5 of every method in the edited and the fresh run of a case.
r5_table() {
    python3 - "$1" "$2" "$3" "$4" <<'EOF'
import json, sys
set_, case, edited, fresh = sys.argv[1:5]
a, b = json.load(open(edited)), json.load(open(fresh))
print(f"\n{set_}, {case}: R@5 (n = {a.get('n')} questions)")
print("| method | edited | fresh |")
print("|---|---|---|")
for m, x in a["methods"].items():
    y = b["methods"].get(m, {})
    r = lambda v: f"{100 * v['recall']['5']:.1f}" if v else "-"
    print(f"| {m} | {r(x)} | {r(y)} |")
EOF
}

run_set() {
    local bin="$1" out="$2" set="$3"
    local dir="$out/$set" idx="$out/$set/idx"
    local logs="$dir/logs" timings="$dir/timings.tsv"
    rm -rf "$dir"
    mkdir -p "$logs" "$idx"
    printf 'set\tstep\tseconds\n' >"$timings"
    [ -f "$DATA/$set/corpus.json" ] || { echo "missing $DATA/$set/corpus.json" >&2; exit 1; }

    # The corpus with its ids, and the documents drawn.
    timed "$timings" "$set" "index corpus.json" "$logs/index-json.log" \
        "$bin" index -q --corpus "$DATA/$set/corpus.json" --out "$idx/json" --no-graph
    "$bin" export documents -q --index "$idx/json" --out "$dir/corpus.jsonl" >"$logs/export.log" 2>&1
    rm -rf "$idx/json"
    draw "$dir" | tee "$logs/draw.log"

    # Fresh indexes.
    local name
    for name in whole rest rewritten; do
        local corpus="$dir/corpus.jsonl"
        [ "$name" = whole ] || corpus="$dir/$name.jsonl"
        timed "$timings" "$set" "index $name" "$logs/index-$name.log" \
            "$bin" index -q --corpus "$corpus" --out "$idx/$name"
    done

    # Edited indexes (a copy of a fresh one; the copy's files are its own).
    cp -a "$idx/rest" "$idx/add"
    timed "$timings" "$set" "edit add" "$logs/edit-add.json" \
        "$bin" add -q --json --index "$idx/add" --corpus "$dir/fifth.jsonl"
    cp -a "$idx/whole" "$idx/delete"
    timed "$timings" "$set" "edit delete" "$logs/edit-delete.json" \
        "$bin" delete -q --json --index "$idx/delete" --from "$dir/fifth.ids"
    cp -a "$idx/whole" "$idx/rewrite"
    timed "$timings" "$set" "edit rewrite" "$logs/edit-rewrite.json" \
        "$bin" add -q --json --index "$idx/rewrite" --corpus "$dir/tenth.jsonl"

    # Evaluations: trec_equivalence.sh's run mode over INDEXES/SET.
    local case twin side index
    for case in "${CASES[@]}"; do
        case "$case" in
            add) twin=whole ;;
            delete) twin=rest ;;
            rewrite) twin=rewritten ;;
        esac
        for side in edited fresh; do
            index="$case"
            [ "$side" = fresh ] && index="$twin"
            mkdir -p "$idx/eval-$case-$side"
            ln -sfn "$idx/$index" "$idx/eval-$case-$side/$set"
            timed "$timings" "$set" "eval $case $side ($index)" "$logs/eval-$case-$side.log" \
                env HOPRAG_EQ_DATA="$DATA" HOPRAG_EQ_INDEXES="$idx/eval-$case-$side" \
                bash "$TREC_EQ" "$bin" "$dir/$case/$side" "$set"
        done
        {
            echo
            echo "$set, $case: edited ($case) against fresh ($twin)"
            bash "$TREC_EQ" --compare "$dir/$case/edited" "$dir/$case/fresh"
        } | tee "$dir/$case/compare.txt" || STATUS=1
        r5_table "$set" "$case" "$dir/$case/edited/$set/report.json" "$dir/$case/fresh/$set/report.json" \
            | tee "$dir/$case/r5.md"
    done
}

main() {
    [ $# -ge 2 ] || usage "BIN and OUT_DIR are required"
    local bin="$1" out="$2"
    shift 2
    [ -x "$bin" ] || usage "$bin is not an executable file"
    [ -d "$DATA" ] || usage "no shared data at $DATA (set HOPRAG_EQ_DATA)"
    local sets=("$@")
    [ ${#sets[@]} -gt 0 ] || sets=("${ALL_SETS[@]}")
    local s
    for s in "${sets[@]}"; do
        case " ${ALL_SETS[*]} " in *" $s "*) ;; *) usage "unknown set '$s' (one of: ${ALL_SETS[*]})" ;; esac
    done
    bin="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"
    mkdir -p "$out"
    out="$(cd "$out" && pwd)"
    for s in "${sets[@]}"; do
        run_set "$bin" "$out" "$s"
    done
    {
        echo "binary: $bin ($(sha256sum "$bin" | cut -d' ' -f1)), $("$bin" --version)"
        echo "HOPRAG_THREADS: ${HOPRAG_THREADS:-unset} (nproc $(nproc)); finished $(date -u +%FT%TZ)"
        for s in "${sets[@]}"; do
            for c in "${CASES[@]}"; do
                cat "$out/$s/$c/compare.txt" "$out/$s/$c/r5.md" 2>/dev/null || true
            done
            echo
            echo "$s timings (s):"
            column -t -s $'\t' "$out/$s/timings.tsv" 2>/dev/null || cat "$out/$s/timings.tsv"
        done
    } >"$out/summary.txt"
    echo "summary: $out/summary.txt"
    exit "$STATUS"
}

# 1 once any comparison differs (a failed command exits at once).
STATUS=0

case "${1:-}" in
    -h | --help) sed -n '2,37p' "$0" | sed 's/^# \{0,1\}//' ;;
    "" | -*) usage ;;
    *) main "$@" ;;
esac
