#!/usr/bin/env python3
"""Many namespaces on one server: memory with a limit on open namespaces, and the latency
of a first query to a closed one.

    scripts/namespaces_bench.py --bin target/release/hoprag --source IDX [--source IDX2 ...] \\
        [--count 20] [--open 5] [--out STORE] [--rounds 2]

Makes a store of COUNT namespaces, each a copy of one of the SOURCE index folders in turn
(hard links: a generation's files are never written after it is published; each copy gets
fresh lock files), starts `hoprag serve` on it with serve.max_open_namespaces=OPEN, and
then, ROUNDS times over, asks every namespace one `auto` question in turn: with more
namespaces than OPEN, each request finds its namespace closed (the least recently used was
closed to make room) and opens it. Reports the server's resident memory (VmRSS, and its
peak VmHWM) after each request, the latency of those first queries, and of a query to a
namespace already open. Prints JSON.
"""
import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def memory(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0]) / 1024  # MiB
    return out


def copy_index(source, dest):
    """A hard-linked copy of an index folder, with lock files of its own."""
    shutil.copytree(source, dest, copy_function=os.link)
    for root, _, files in os.walk(dest):
        for name in files:
            if name in ("LOCK", "readers.lock"):
                path = os.path.join(root, name)
                os.unlink(path)
                open(path, "w").close()


def passages(index):
    generation = open(os.path.join(index, "CURRENT")).read().strip()
    with open(os.path.join(index, generation, "manifest.json")) as f:
        return json.load(f)["counts"]["passages"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--source", action="append", required=True, help="an index folder to copy (repeatable)")
    ap.add_argument("--count", type=int, default=20)
    ap.add_argument("--open", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", default="/tmp/hoprag-namespaces-bench")
    args = ap.parse_args()

    shutil.rmtree(args.out, ignore_errors=True)
    os.makedirs(os.path.join(args.out, "namespaces"))
    sizes = {}
    for i in range(args.count):
        name = f"ns{i + 1:02d}"
        source = args.source[i % len(args.source)]
        copy_index(source, os.path.join(args.out, "namespaces", name))
        sizes[name] = passages(source)

    port = free_port()
    server = subprocess.Popen(
        [args.bin, "serve", "--index", args.out, "--addr", f"127.0.0.1:{port}",
         "--set", f"serve.max_open_namespaces={args.open}"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = server.stdout.readline()
        if not line.startswith("listening on "):
            sys.exit(f"hoprag serve did not start: {line!r}")
        base = line.split()[-1]
        idle = memory(server.pid)

        def ask(namespace, question):
            body = json.dumps({"query": question, "namespace": namespace, "k": 5}).encode()
            req = urllib.request.Request(base + "/v1/retrieve", data=body, headers={"Content-Type": "application/json"})
            started = time.perf_counter()
            with urllib.request.urlopen(req, timeout=600) as r:
                r.read()
            return (time.perf_counter() - started) * 1e3

        first, warm, rss = [], [], []
        names = sorted(sizes)
        for round_ in range(args.rounds):
            for name in names:
                q = f"Who founded the company that built the bridge? ({round_})"
                first.append(ask(name, q))
                warm.append(ask(name, q + " again"))
                rss.append(memory(server.pid)["VmRSS"])
        end = memory(server.pid)

        def q(values, p):
            values = sorted(values)
            return values[min(len(values) - 1, int(p * len(values)))]

        print(json.dumps({
            "namespaces": args.count,
            "passages_per_namespace": sorted(set(sizes.values())),
            "max_open": args.open,
            "rounds": args.rounds,
            "rss_mib": {"idle_at_start": round(idle["VmRSS"], 1), "median": round(statistics.median(rss), 1),
                        "max": round(max(rss), 1), "peak_hwm": round(end["VmHWM"], 1), "end": round(end["VmRSS"], 1)},
            "first_query_to_closed_namespace_ms": {"p50": round(q(first, 0.5), 1), "p90": round(q(first, 0.9), 1),
                                                   "max": round(max(first), 1)},
            "query_to_open_namespace_ms": {"p50": round(q(warm, 0.5), 1), "p90": round(q(warm, 0.9), 1)},
        }, indent=2))
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
