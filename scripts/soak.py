#!/usr/bin/env python3
"""Soak test of `hoprag serve` on loopback: sustained mixed load, bounded in time.

    scripts/soak.py --index DIR | --store URL [--duration 600] [--clients 4]
                    [--add-every 20] [--questions FILE] [--bin target/debug/hoprag] [--json OUT]

Starts `hoprag serve` on 127.0.0.1 (a port the OS picks) over the index, then for
`--duration` seconds runs `--clients` client threads, each sending POST /v1/retrieve with
the next LLM-free method in turn and a question drawn (fixed seed) from `--questions`,
while one more thread edits every `--add-every` seconds, in turn: adds a document of two
passages (PUT /v1/documents), rewrites an earlier one, deletes an earlier one (DELETE
/v1/documents/{id}), and checks with GET /v1/documents/{id} that the edit is served. The server's resident memory is read from /proc every 5 s.

Prints (and with --json writes) the requests served by method, the errors (must be 0),
latency p50/p99/max by method, the longest request, the edits by kind, and the
server's resident memory at start (ready, before any request), after the first minute,
at the end, and its peak. Exits 1 if any request failed. Uses the standard library only.
The index is written to (documents are added, rewritten and deleted): point it at a copy.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

METHODS = ["bm25", "dense", "hybrid", "ppr", "auto", "phasegraph", "regime_router", "naive_ge"]
REPO = Path(__file__).resolve().parents[1]
LIMIT = 3600  # seconds: the longest soak this script runs


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def post(url: str, body: dict, timeout: float) -> tuple[int, bytes]:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--index", help="folder store (a copy: passages are added to it)")
    where.add_argument("--store", help="PostgreSQL store URL (passages are added to it)")
    ap.add_argument("--duration", type=float, default=600)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--add-every", type=float, default=20, help="seconds between edits")
    ap.add_argument("--questions", default=str(REPO.parent / "shared/data/musique-train/questions.json"))
    ap.add_argument("--bin", default=str(REPO / "target/debug/hoprag"))
    ap.add_argument("--json", help="write the summary here too")
    args = ap.parse_args()
    if not 0 < args.duration <= LIMIT:
        ap.error(f"--duration must be in (0, {LIMIT}] seconds")
    questions = [q.get("question") or q["text"] for q in load_questions(Path(args.questions))]

    target = ["--index", args.index] if args.index else ["--store", args.store]
    server = subprocess.Popen(
        [args.bin, "serve", *target, "--addr", "127.0.0.1:0", "--set", f"serve.workers={args.clients}"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    try:
        line = server.stdout.readline().strip()
        if not line.startswith("listening on http://127.0.0.1:"):
            raise SystemExit(f"hoprag serve did not start: {line!r}")
        base = line.removeprefix("listening on ")
        return soak(args, base, server.pid, questions)
    finally:
        server.terminate()
        server.wait(timeout=30)


def load_questions(path: Path) -> list[dict]:
    text = path.read_text()
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    return json.loads(text)


def soak(args, base: str, pid: int, questions: list[str]) -> int:
    memory = {"start_mib": rss_mib(pid)}
    deadline = time.monotonic() + args.duration
    lock = threading.Lock()
    latencies: dict[str, list[float]] = {m: [] for m in METHODS}
    errors: list[str] = []
    edits = {"add": 0, "update": 0, "delete": 0}
    longest = [0.0, ""]

    def client(seed: int) -> None:
        rng = random.Random(seed)
        i = seed
        while time.monotonic() < deadline:
            method, question = METHODS[i % len(METHODS)], rng.choice(questions)
            i += 1
            start = time.monotonic()
            try:
                status, body = post(f"{base}/v1/retrieve", {"query": question, "method": method, "k": 5}, 300)
                ok = status == 200 and len(json.loads(body)["passages"]) == 5
                problem = None if ok else f"{method} {question!r}: {status} {body[:300]!r}"
            except Exception as e:  # a timeout or a dropped connection is an error too
                problem = f"{method} {question!r}: {e!r}"
            took = time.monotonic() - start
            with lock:
                latencies[method].append(took)
                if took > longest[0]:
                    longest[:] = [took, f"{method}: {question}"]
                if problem:
                    errors.append(problem)

    def request(method: str, path: str, body: dict | None) -> tuple[int, bytes]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(f"{base}{path}", data=data, method=method, headers={"content-type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=300) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def editor() -> None:
        # A cycle of edits, one every --add-every seconds: add a document of two passages,
        # rewrite an earlier one, delete an earlier one. Each must be visible to the next
        # query: GET /v1/documents/{id} after it answers from the generation it served.
        n, live = 0, []
        while time.monotonic() + args.add_every < deadline:
            time.sleep(args.add_every)
            kind = ("add", "update", "delete")[n % 3] if live else "add"
            doc = f"soak/{n}" if kind == "add" else live[0]
            text = f"written at {time.time():.3f} by the soak test ({kind})."
            rows = [{"id": f"{doc}#{j}", "doc": doc, "title": f"Soak document {doc}", "text": f"Soak passage {j} {text}",
                     "meta": {"kind": kind, "n": n}} for j in range(2)]
            n += 1
            try:
                if kind == "delete":
                    status, body = request("DELETE", f"/v1/documents/{urllib.parse.quote(doc, safe='')}", None)
                else:
                    status, body = request("PUT", "/v1/documents", {"passages": rows})
                ok = status == 200 and json.loads(body)["changed"]
                if ok:
                    status, body = request("GET", f"/v1/documents/{urllib.parse.quote(doc, safe='')}", None)
                    seen = status == 200 and all(p["text"].endswith(text) for p in json.loads(body)["passages"])
                    ok = (status == 404) if kind == "delete" else seen
                problem = None if ok else f"{kind} {doc}: {status} {body[:300]!r}"
            except Exception as e:
                problem = f"{kind} {doc}: {e!r}"
            with lock:
                if problem:
                    errors.append(problem)
                else:
                    edits[kind] += 1
                    if kind == "add":
                        live.append(doc)
                    elif kind == "update":
                        live.append(live.pop(0))
                    else:
                        live.pop(0)

    threads = [threading.Thread(target=client, args=(s,)) for s in range(args.clients)]
    threads.append(threading.Thread(target=editor))
    for t in threads:
        t.start()
    peak, started = memory["start_mib"], time.monotonic()
    # One sample a minute, to tell growth that levels off (caches, allocator arenas)
    # from growth that keeps on (a leak).
    memory["by_minute_mib"] = []
    while any(t.is_alive() for t in threads):
        time.sleep(5)
        now = rss_mib(pid)
        peak = max(peak, now)
        if time.monotonic() - started >= 60 * (len(memory["by_minute_mib"]) + 1):
            memory["by_minute_mib"].append(round(now))
            memory.setdefault("after_1min_mib", now)
    for t in threads:
        t.join()
    memory["end_mib"], memory["peak_mib"] = rss_mib(pid), peak

    q = lambda xs, p: sorted(xs)[min(len(xs) - 1, int(p * len(xs)))] * 1e3 if xs else None
    summary = {
        "target": args.index or args.store,
        "duration_s": args.duration,
        "clients": args.clients,
        "requests": sum(len(v) for v in latencies.values()) + 2 * sum(edits.values()),
        "retrievals": {m: len(v) for m, v in latencies.items()},
        "edits": edits,
        "errors": len(errors),
        "first_errors": errors[:10],
        "latency_ms": {
            m: {"p50": q(v, 0.5), "p99": q(v, 0.99), "max": max(v) * 1e3 if v else None,
                "mean": statistics.fmean(v) * 1e3 if v else None}
            for m, v in latencies.items()
        },
        "longest_request": {"ms": longest[0] * 1e3, "what": longest[1]},
        "memory": memory,
    }
    text = json.dumps(summary, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
