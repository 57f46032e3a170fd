#!/usr/bin/env bash
# Behaviour-equivalence harness (issue 48): the TREC runs of every LLM-free method on
# every shared data set, from one binary, and a byte-for-byte comparison of two such
# run folders.
#
#   scripts/trec_equivalence.sh BIN OUT_DIR [SET...]     write OUT_DIR/SET/METHOD.trec
#   scripts/trec_equivalence.sh --compare DIR_A DIR_B    diff every .trec (and qrels.txt)
#   scripts/trec_equivalence.sh --sets                   list the data sets
#
# Run mode: for each SET (default: all six), `BIN eval --run OUT_DIR/SET` with the eight
# LLM-free methods and the fixed cutoffs below, on an index of the set's corpus built once
# (by BIN, default settings: MiniLM, exact vectors below 50,000 passages, the heuristic
# graph) under ${HOPRAG_EQ_INDEXES:-/tmp/eq/idx}/NAME and reused by every later call, so
# that two binaries are compared on the same index (delete the folder, or point
# HOPRAG_EQ_INDEXES elsewhere, to compare index builds too). 2wiki-hipporag's index is
# the 2wiki-corpus one (idx/2wiki-corpus). Index builds run one after another.
# Each set also gets report.json (scores, latencies) and the logs; OUT_DIR/timings.tsv
# holds the seconds of every index build and eval, OUT_DIR/meta.txt the binary's
# checksum and version.
#
# Compare mode: per set and method, "identical" or the number of differing lines (by
# position) and questions; exits 1 on any difference or any run present on one side only.
# The .trec score column is derived from the rank (trec.rs), so the runs compare rankings;
# when both sides have report.json, whether the methods' own scores are bit-identical is
# printed as information (it does not change the exit status).
#
# Issue 48's check, with the baseline in /tmp/eq/before (from the binary built before the
# change, whose indexes are in /tmp/eq/idx):
#   cargo build -p hoprag-cli && scripts/trec_equivalence.sh target/debug/hoprag /tmp/eq/after
#   scripts/trec_equivalence.sh --compare /tmp/eq/before /tmp/eq/after
# (add HOPRAG_EQ_INDEXES=/tmp/eq/idx-after to the first command to rebuild the indexes
# with the new binary, so that index builds are compared too).
#
# Environment: HOPRAG_EQ_DATA (default: ../shared/data beside the checkout),
# HOPRAG_EQ_INDEXES (see above), HOPRAG_THREADS (passed through; recorded in meta.txt).
# Exit status: 0 success / identical, 1 runs differ or a command failed, 2 usage error.
set -euo pipefail

REPO="$(cd "$(dirname "$0")/.." && pwd)"
DATA="${HOPRAG_EQ_DATA:-$REPO/../shared/data}"
INDEXES="${HOPRAG_EQ_INDEXES:-/tmp/eq/idx}"
METHODS="bm25,dense,hybrid,ppr,auto,phasegraph,regime_router,naive_ge"
# eval's default cutoffs, spelled out so that a change of default does not change the
# run depth (the deepest cutoff, 15, is the depth of every run).
KS="2,5,10,15"
ALL_SETS=(musique-train hotpotqa-train musique-dev hotpotqa-dev 2wiki-dev 2wiki-hipporag)

usage() {
    sed -n '5,7p' "$0" | sed 's/^# \{0,1\}//' >&2
    [ $# -gt 0 ] && echo "trec_equivalence.sh: $*" >&2
    exit 2
}

# SET -> "CORPUS_DIR QUESTIONS_FILE" (relative to DATA).
set_files() {
    case "$1" in
        musique-train | hotpotqa-train | musique-dev | hotpotqa-dev | 2wiki-dev)
            echo "$1 $1/questions.json" ;;
        2wiki-hipporag) echo "2wiki-corpus 2wiki-hipporag/questions.jsonl" ;;
        *) return 1 ;;
    esac
}

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# Prints "differing_lines differing_questions lines_in_A" for two TREC (or qrels) files,
# comparing line by line by position.
count_diff() {
    awk -v B="$2" '
        { n++; if ((getline b < B) > 0) { if ($0 != b) { d++; q[$1] = 1 } } else { d++; q[$1] = 1 } }
        END {
            while ((getline b < B) > 0) { d++; split(b, f, " "); q[f[1]] = 1 }
            nq = 0; for (k in q) nq++
            print d + 0, nq + 0, n + 0
        }' "$1"
}

# DIR/SET/METHOD.trec and DIR/SET/qrels.txt, as SET/FILE lines.
list_runs() {
    (cd "$1" && find . -mindepth 2 -maxdepth 2 \( -name '*.trec' -o -name qrels.txt \) -not -path '*.partial.*' |
        sed 's|^\./||')
}

compare() {
    local a="$1" b="$2"
    [ -d "$a" ] || usage "--compare: $a is not a folder"
    [ -d "$b" ] || usage "--compare: $b is not a folder"
    local status=0 files=0 same=0
    local sets
    sets="$({ list_runs "$a"; list_runs "$b"; } | sort -u)"
    if [ -z "$sets" ]; then
        echo "no .trec files under $a or $b (expected DIR/SET/METHOD.trec)" >&2
        exit 1
    fi
    printf '%-16s %-15s %s\n' SET RUN RESULT
    local rel set run
    while IFS= read -r rel; do
        set="${rel%%/*}"
        run="${rel#*/}"
        run="${run%.trec}"
        files=$((files + 1))
        if [ ! -f "$a/$rel" ] || [ ! -f "$b/$rel" ]; then
            printf '%-16s %-15s MISSING in %s\n' "$set" "$run" "$([ -f "$a/$rel" ] && echo "$b" || echo "$a")"
            status=1
        elif cmp -s "$a/$rel" "$b/$rel"; then
            printf '%-16s %-15s identical (%s lines)\n' "$set" "$run" "$(wc -l <"$a/$rel" | tr -d ' ')"
            same=$((same + 1))
        else
            read -r lines questions total < <(count_diff "$a/$rel" "$b/$rel")
            printf '%-16s %-15s DIFFERENT: %s of %s lines differ, in %s question(s)\n' "$set" "$run" "$lines" "$total" "$questions"
            status=1
        fi
    done <<<"$sets"
    echo "$same of $files files identical"
    # The methods' own scores, for information (the .trec score column is the rank).
    if command -v python3 >/dev/null; then
        python3 - "$a" "$b" <<'EOF' || true
import json, os, sys
a, b = sys.argv[1:3]
for s in sorted(os.listdir(a)):
    pa, pb = os.path.join(a, s, "report.json"), os.path.join(b, s, "report.json")
    if not (os.path.isfile(pa) and os.path.isfile(pb)):
        continue
    ra, rb = json.load(open(pa)), json.load(open(pb))
    for m, x in ra.get("methods", {}).items():
        y = rb.get("methods", {}).get(m)
        if y is None:
            continue
        worst, same = 0.0, True
        for qa, qb in zip(x["per_query"], y["per_query"]):
            if qa["scores"] != qb["scores"] or qa["retrieved"] != qb["retrieved"]:
                same = False
            for sa, sb in zip(qa["scores"], qb["scores"]):
                worst = max(worst, abs(sa - sb))
        if not same:
            print(f"note: {s} {m}: the method's own scores differ (max |delta| {worst:.3g} by position)")
EOF
    fi
    exit "$status"
}

run_sets() {
    local bin="$1" out="$2"
    shift 2
    [ -x "$bin" ] || usage "$bin is not an executable file"
    [ -d "$DATA" ] || usage "no shared data at $DATA (set HOPRAG_EQ_DATA)"
    local sets=("$@")
    [ ${#sets[@]} -gt 0 ] || sets=("${ALL_SETS[@]}")
    local s
    for s in "${sets[@]}"; do
        set_files "$s" >/dev/null || usage "unknown set '$s' (one of: ${ALL_SETS[*]})"
    done
    bin="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"
    mkdir -p "$out" "$INDEXES"
    out="$(cd "$out" && pwd)"
    mkdir -p "$out/logs"

    # LLM-free methods only: no endpoint or local model can take part.
    unset HOPRAG_LLM_BASE_URL HOPRAG_LLM_MODEL HOPRAG_LLM_API_KEY HOPRAG_EMBED_BASE_URL HOPRAG_EMBED_API_KEY \
        HOPRAG_STORE HOPRAG_TOKEN
    export HOPRAG_LLM_LOCAL=/nonexistent/hoprag-eq-model.gguf

    {
        echo "binary: $bin"
        echo "sha256: $(sha256sum "$bin" | cut -d' ' -f1)"
        echo "version: $("$bin" --version)"
        echo "data: $DATA"
        echo "indexes: $INDEXES"
        echo "methods: $METHODS"
        echo "k: $KS"
        echo "HOPRAG_THREADS: ${HOPRAG_THREADS:-unset} (nproc $(nproc))"
        echo "started: $(date -u +%FT%TZ)"
    } >"$out/meta.txt"
    [ -f "$out/timings.tsv" ] || printf 'set\tstep\tseconds\tnote\n' >"$out/timings.tsv"

    local corpus_dir questions idx t partial secs n
    for s in "${sets[@]}"; do
        read -r corpus_dir questions < <(set_files "$s")
        [ -f "$DATA/$corpus_dir/corpus.json" ] || { echo "missing $DATA/$corpus_dir/corpus.json" >&2; exit 1; }
        [ -f "$DATA/$questions" ] || { echo "missing $DATA/$questions" >&2; exit 1; }
        idx="$INDEXES/$corpus_dir"
        if [ -d "$idx" ]; then
            echo "[$s] index: reusing $idx"
        else
            echo "[$s] index: building $idx"
            # Built beside and moved into place, so that an interrupted build is never reused.
            partial="$idx.partial.$$"
            rm -rf "$partial"
            t="$(now)"
            if ! "$bin" index -q --corpus "$DATA/$corpus_dir/corpus.json" --out "$partial" \
                >"$out/logs/$s.index.log" 2>&1; then
                echo "[$s] index build failed; see $out/logs/$s.index.log" >&2
                tail -n 20 "$out/logs/$s.index.log" >&2
                rm -rf "$partial"
                exit 1
            fi
            secs="$(elapsed "$t")"
            if [ -d "$idx" ]; then rm -rf "$partial"; else mv "$partial" "$idx"; fi
            printf '%s\tindex\t%s\t%s\n' "$s" "$secs" "$corpus_dir" >>"$out/timings.tsv"
            echo "[$s] index: ${secs}s"
        fi

        echo "[$s] eval: $METHODS"
        partial="$out/$s.partial.$$"
        rm -rf "$partial"
        t="$(now)"
        if ! "$bin" eval -q --index "$idx" --dataset "$DATA/$questions" --method "$METHODS" --k "$KS" \
            --run "$partial" --json "$partial/report.json" >"$out/logs/$s.eval.log" 2>&1; then
            echo "[$s] eval failed; see $out/logs/$s.eval.log" >&2
            tail -n 20 "$out/logs/$s.eval.log" >&2
            rm -rf "$partial"
            exit 1
        fi
        secs="$(elapsed "$t")"
        n="$(find "$partial" -maxdepth 1 -name '*.trec' | wc -l)"
        if [ "$n" -ne 8 ]; then
            echo "[$s] expected 8 .trec files in $partial, found $n" >&2
            exit 1
        fi
        rm -rf "${out:?}/$s"
        mv "$partial" "$out/$s"
        printf '%s\teval\t%s\t%s\n' "$s" "$secs" "$(wc -l <"$out/$s/bm25.trec" | tr -d ' ') lines per run" \
            >>"$out/timings.tsv"
        echo "[$s] eval: ${secs}s -> $out/$s"
    done
    echo "finished: $(date -u +%FT%TZ)" >>"$out/meta.txt"
}

case "${1:-}" in
    -h | --help) sed -n '2,36p' "$0" | sed 's/^# \{0,1\}//' ;;
    "") usage ;;
    --sets) printf '%s\n' "${ALL_SETS[@]}" ;;
    --compare)
        [ $# -eq 3 ] || usage "--compare takes two folders"
        compare "$2" "$3"
        ;;
    -*) usage "unknown option $1" ;;
    *)
        [ $# -ge 2 ] || usage "BIN and OUT_DIR are required"
        run_sets "$@"
        ;;
esac
