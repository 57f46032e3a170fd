#!/usr/bin/env python3
"""How long a one-document edit takes to reach every method on a running server.

Serves a copy of an index (the original is never written), then repeats: PUT a new
document, rewrite it, DELETE it. Each edit is timed from the request until every
LLM-free method's first query after the response ranks the document (or, after the
delete, no longer returns it): `visible_ms`, the eight queries one after another
included. `acknowledged_ms` is the request alone (every query sent after it sees the
edit, which the eight check). Prints JSON with p50/p99 per kind and overall.

    scripts/edit_latency.py --index /tmp/w2 --bin target/release/hoprag --cycles 5
"""

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

METHODS = ["bm25", "dense", "hybrid", "ppr", "auto", "phasegraph", "regime_router", "naive_ge"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(base, token, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, method=method)
    req.add_header("Authorization", f"Bearer {token}")
    if data is not None:
        req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read() or b"null")


def quantile(values, q):
    v = sorted(values)
    return v[round((len(v) - 1) * q)] if v else None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", required=True)
    ap.add_argument("--bin", default="target/release/hoprag")
    ap.add_argument("--cycles", type=int, default=5)
    ap.add_argument("--keep", action="store_true", help="keep the copy and the server's log")
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="hoprag-edit-latency-")
    copy = os.path.join(work, "index")
    shutil.copytree(args.index, copy)
    port, token = free_port(), "edit-latency"
    server = subprocess.Popen(
        [args.bin, "serve", "--index", copy, "--addr", f"127.0.0.1:{port}"],
        env={"RUST_LOG": "info", **os.environ, "HOPRAG_TOKEN": token},
        stdout=subprocess.DEVNULL,
        stderr=open(os.path.join(work, "serve.log"), "w"),
    )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(1200):
            try:
                urllib.request.urlopen(base + "/health", timeout=2)
                break
            except OSError:
                time.sleep(0.5)
        else:
            sys.exit("the server did not come up; see " + os.path.join(work, "serve.log"))

        def retrieve(question, method):
            return call(base, token, "POST", "/v1/retrieve", {"query": question, "method": method, "k": 10})["passages"]

        for m in METHODS:  # warm: the served generation's structures are built
            retrieve("warm up", m)
        times = {"add": [], "update": [], "delete": []}
        acknowledged = []
        misses = []
        for cycle in range(args.cycles):
            doc = f"edit-latency-{cycle}"
            title = f"Trelkin Foundry {cycle}"
            text = f"Zorblat Quenneville{cycle} founded the Trelkin Foundry {cycle}."
            question = f"Who founded the Trelkin Foundry {cycle}?"
            steps = [
                ("add", "PUT", "/v1/documents", {"passages": [{"id": doc, "title": title, "text": text}]}),
                ("update", "PUT", "/v1/documents",
                 {"passages": [{"id": doc, "title": title, "text": text + " It still casts bells."}]}),
                ("delete", "DELETE", "/v1/documents/" + urllib.parse.quote(doc, safe=""), None),
            ]
            for kind, verb, path, body in steps:
                started = time.perf_counter()
                call(base, token, verb, path, body)
                acknowledged.append((time.perf_counter() - started) * 1e3)
                for m in METHODS:
                    found = any(h["id"] == doc for h in retrieve(question, m))
                    if found == (kind == "delete"):
                        misses.append(f"{kind} {m}")
                times[kind].append((time.perf_counter() - started) * 1e3)
        every = [t for v in times.values() for t in v]
        report = {
            "edits": len(every),
            "visible_ms": {"p50": quantile(every, 0.5), "p99": quantile(every, 0.99),
                           "mean": statistics.mean(every)},
            "acknowledged_ms": {"p50": quantile(acknowledged, 0.5), "p99": quantile(acknowledged, 0.99),
                                "mean": statistics.mean(acknowledged)},
            "by_kind_ms": times,
            "acknowledged_each_ms": [round(t, 1) for t in acknowledged],
            "not_visible": misses,
        }
        print(json.dumps(report, indent=2))
    finally:
        server.terminate()
        server.wait(timeout=60)
        if args.keep:
            print("kept " + work, file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
