"""Queries/s of hoprag's Python API against its HTTP server.

    python crates/hoprag-py/python/bench_retrieve.py --index DIR [--method dense] [--n 1000]

On one index and one method, with N queries (the first 12 words of N passages of the
index, so every query has an answer in it):

1. ``index.retrieve(queries)``: one call; embedded in batches, retrieved on rayon's
   threads with the GIL released;
2. a Python loop of ``index.retrieve(q)``, one query per call;
3. ``hoprag serve`` on the same index: single ``POST /v1/retrieve`` requests from
   ``--clients`` threads over keep-alive connections, and ``POST /v1/retrieve/batch``
   with batches of 64 (the server's ``max_batch``).

For each: queries/s and the cores the engine's process used (its CPU time over the wall
time: 2.0 means both cores of a two-core machine were busy throughout). The server's
cores are read from /proc, the client's are not counted.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import hoprag

REPO = Path(__file__).resolve().parents[3]


def cpu_self() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def cpu_pid(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(label: str, n: int, run, cpu=cpu_self) -> dict:
    c0, t0 = cpu(), time.perf_counter()
    run()
    wall, used = time.perf_counter() - t0, cpu() - c0
    row = {"how": label, "queries": n, "secs": round(wall, 3), "qps": round(n / wall, 1), "cores": round(used / wall, 2)}
    print(f"{label:<44} {row['qps']:>9.1f} q/s  {wall:7.2f} s  cores used {row['cores']:.2f}", flush=True)
    return row


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(conn: http.client.HTTPConnection, path: str, body) -> object:
    conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    resp = conn.getresponse()
    data = resp.read()
    if resp.status != 200:
        raise RuntimeError(f"{path}: HTTP {resp.status}: {data[:200]!r}")
    return json.loads(data)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--index", required=True, type=Path)
    ap.add_argument("--method", default="dense")
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("-k", type=int, default=5)
    ap.add_argument("--clients", type=int, default=4, help="client threads sending single requests to the server")
    ap.add_argument("--cli", type=Path, default=REPO / "target" / "debug" / "hoprag")
    ap.add_argument("--json", type=Path, help="also write the rows as JSON here")
    args = ap.parse_args()

    index = hoprag.Index.open(args.index)
    passages = [json.loads(line) for line in (args.index / (args.index / "CURRENT").read_text().strip() / "passages.jsonl").open()]
    queries = [" ".join(p["text"].split()[:12]) for p in passages[: args.n]]
    n = len(queries)
    print(f"{args.index}: {len(index)} passages; {n} queries; method {args.method}, k = {args.k}; "
          f"{os.cpu_count()} cores; load {os.getloadavg()[0]:.2f}", flush=True)
    index.retrieve(queries[:8], method=args.method, k=args.k)  # warm-up: model and graph loaded

    rows = []
    batched = []
    rows.append(measure("index.retrieve(list), one call", n,
                        lambda: batched.extend(index.retrieve(queries, method=args.method, k=args.k))))
    looped = []
    rows.append(measure("Python loop of index.retrieve(q)", n,
                        lambda: looped.extend(index.retrieve(q, method=args.method, k=args.k) for q in queries)))
    same = sum([r.id for r in a] == [r.id for r in b] for a, b in zip(batched, looped))
    print(f"  same passages in both: {same} of {n} queries")

    port = free_port()
    # The server logs every request on stderr: into a file, as an undrained pipe fills up
    # after a few hundred requests and then blocks the server.
    log = tempfile.TemporaryFile()
    server = subprocess.Popen([str(args.cli), "--quiet", "serve", "--index", str(args.index), "--addr", f"127.0.0.1:{port}"],
                              stdout=subprocess.DEVNULL, stderr=log)
    try:
        for _ in range(600):
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                c.request("GET", "/health")
                if c.getresponse().status == 200:
                    break
            except OSError:
                time.sleep(0.1)
        else:
            log.seek(0)
            raise RuntimeError(f"server did not start: {log.read()[-2000:]!r}")
        warm = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        post(warm, "/v1/retrieve/batch", [{"query": q, "method": args.method, "k": args.k} for q in queries[:8]])
        server_cpu = lambda: cpu_pid(server.pid)  # noqa: E731

        def singles():
            def worker(chunk):
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                for q in chunk:
                    post(conn, "/v1/retrieve", {"query": q, "method": args.method, "k": args.k})
            chunks = [queries[i :: args.clients] for i in range(args.clients)]
            with ThreadPoolExecutor(args.clients) as pool:
                list(pool.map(worker, chunks))

        rows.append(measure(f"server: single requests, {args.clients} clients", n, singles, server_cpu))

        def batches():
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
            for i in range(0, n, 64):
                post(conn, "/v1/retrieve/batch", [{"query": q, "method": args.method, "k": args.k} for q in queries[i : i + 64]])

        rows.append(measure("server: /v1/retrieve/batch of 64, 1 client", n, batches, server_cpu))
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            # Graceful shutdown waits for idle keep-alive connections; the numbers are in.
            server.kill()
            server.wait()
    if args.json:
        args.json.write_text(json.dumps({"index": str(args.index), "method": args.method, "rows": rows}, indent=2))


if __name__ == "__main__":
    sys.exit(main())
