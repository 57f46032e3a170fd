"""Per-query cost of the Python API next to `hoprag bench query`, on one index.

    python crates/hoprag-py/python/bench_query.py --index DIR --dataset QUESTIONS [--method dense]

Both ask the dataset's questions one at a time (question text in, passages out, the
question's embedding included), one untimed warm-up pass, then --repeat timed passes:

1. `hoprag bench query --json` (the CLI binary, --cli): the library's `retrieve` alone;
2. `index.retrieve(q)` in a Python loop: the same call plus what the binding adds (taking
   the string, the response with passage texts, the `Result` objects and the trace as a
   dict);
3. `index.retrieve(questions)`, one call per pass: the batched path (embedded in batches,
   retrieved on rayon's threads), per question.

The difference between 2 and 1 is the binding's overhead per query. Run on the same
build: scripts/python-dev.sh installs the workspace's target/debug extension, whose
profile the CLI in target/debug shares.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import time
from pathlib import Path

import hoprag

REPO = Path(__file__).resolve().parents[3]


def p50(ms: list) -> float:
    """The CLI's percentile: the sorted sample at round(0.5 * (n - 1))."""
    ms = sorted(ms)
    return ms[min(round(0.5 * (len(ms) - 1)), len(ms) - 1)]


def questions(path: Path) -> list:
    data = json.loads(path.read_text())
    return [q["question"] for q in data]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--index", required=True, type=Path)
    ap.add_argument("--dataset", required=True, type=Path, help="a JSON list of {question, ...}")
    ap.add_argument("--method", default="dense")
    ap.add_argument("-k", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cli", type=Path, default=REPO / "target" / "debug" / "hoprag")
    args = ap.parse_args()

    qs = questions(args.dataset)
    print(f"{args.index}: {len(qs)} questions, method {args.method}, k = {args.k}, {args.repeat} passes; "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}", flush=True)

    cli = [str(args.cli), "--quiet", "bench", "query", "--index", str(args.index), "--dataset", str(args.dataset),
           "--method", args.method, "-k", str(args.k), "--repeat", str(args.repeat), "--json"]
    print("$ " + " ".join(cli), flush=True)
    report = json.loads(subprocess.run(cli, check=True, capture_output=True, text=True).stdout)
    cli_ms = report["total_ms"]
    print(f"{'hoprag bench query (Rust retrieve)':<40} p50 {cli_ms['p50']:8.3f} ms   mean {report['mean_ms']:8.3f} ms")

    index = hoprag.Index.open(args.index)
    for q in qs:  # warm-up, as the CLI's untimed pass
        index.retrieve(q, method=args.method, k=args.k)
    single = []
    for _ in range(args.repeat):
        for q in qs:
            t = time.perf_counter()
            index.retrieve(q, method=args.method, k=args.k)
            single.append((time.perf_counter() - t) * 1e3)
    median, mean = p50(single), statistics.fmean(single)
    print(f"{'Python loop of index.retrieve(q)':<40} p50 {median:8.3f} ms   mean {mean:8.3f} ms")

    batched = []
    for _ in range(args.repeat):
        t = time.perf_counter()
        index.retrieve(qs, method=args.method, k=args.k)
        batched.append((time.perf_counter() - t) * 1e3 / len(qs))
    print(f"{'index.retrieve(questions), per question':<40} p50 {p50(batched):8.3f} ms   "
          f"mean {statistics.fmean(batched):8.3f} ms")
    print(f"binding overhead per query (Python loop - CLI): p50 {median - cli_ms['p50']:+.3f} ms, "
          f"mean {mean - report['mean_ms']:+.3f} ms; load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
