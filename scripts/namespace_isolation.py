#!/usr/bin/env python3
"""Namespaces isolate exactly, on whole shared data sets: two namespaces in one store and
one server rank as two separate indexes, and an edit in one changes nothing in the other.

    scripts/namespace_isolation.py --bin target/release/hoprag --out /tmp/ns-iso [--sets musique-dev,2wiki-dev]

For each set: a separate index of its corpus (OUT/separate/SET), and the same corpus as
namespace SET of one store (OUT/store). Then, for the eight LLM-free methods at depth 15:
1. `hoprag eval --run` on each separate index and on each namespace: TREC runs, compared
   byte for byte (scripts/trec_equivalence.sh --compare);
2. one server on the store (all sets, at most `len(sets)` open) and one server per
   separate index, every question asked over HTTP (`/v1/retrieve/batch`), written as TREC
   runs in `hoprag eval --run`'s format, compared byte for byte (the CLI embeds questions
   in batches and the server one by one, so the two paths are compared each with itself);
3. a tenth of the first set's documents deleted over HTTP in its namespace, and every
   other set asked again on the same server: compared with the separate index's runs.
Prints what it compares and exits 1 on any difference.
"""
import argparse
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import urllib.request

METHODS = "bm25,dense,hybrid,ppr,auto,phasegraph,regime_router,naive_ge".split(",")
DEPTH = 15
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(cmd, **kw):
    print("+", " ".join(cmd), file=sys.stderr, flush=True)
    subprocess.run(cmd, check=True, **kw)


def questions(path):
    """(id, text) as `hoprag eval` reads them from the sets' JSON files."""
    with open(path) as f:
        data = json.load(f)
    return [(str(q.get("id", q.get("_id"))), q["question"]) for q in data]


def field(text):
    return "_".join(text.split())


def tag(method):
    return "".join(c if c.isalnum() or c in "-." else "_" for c in method)


class Server:
    def __init__(self, binary, index, extra=()):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.proc = subprocess.Popen([binary, "serve", "--index", index, "--addr", f"127.0.0.1:{port}", *extra],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("listening on "):
            sys.exit(f"serve {index} did not start: {line!r}")
        self.base = line.split()[-1]

    def post(self, path, body):
        req = urllib.request.Request(self.base + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=3600) as r:
            return json.load(r)

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


def http_runs(server, namespace, qs, out_dir, qrels):
    """Every method's run over HTTP, in `hoprag eval --run`'s format."""
    os.makedirs(out_dir, exist_ok=True)
    shutil.copy(qrels, os.path.join(out_dir, "qrels.txt"))
    for method in METHODS:
        lines = []
        for start in range(0, len(qs), 32):
            chunk = qs[start:start + 32]
            body = [{"query": text, "method": method, "k": DEPTH, **({"namespace": namespace} if namespace else {})}
                    for _, text in chunk]
            for (qid, _), answer in zip(chunk, server.post("/v1/retrieve/batch", body)):
                seen, docs = set(), []
                for p in answer["passages"]:
                    d = field(p["id"])
                    if d not in seen:
                        seen.add(d)
                        docs.append(d)
                for rank, d in enumerate(docs):
                    lines.append(f"{field(qid)} Q0 {d} {rank + 1} {len(docs) - rank} {tag(method)}\n")
        with open(os.path.join(out_dir, f"{tag(method)}.trec"), "w") as f:
            f.writelines(lines)


def compare(a, b):
    r = subprocess.run(["bash", os.path.join(REPO, "scripts/trec_equivalence.sh"), "--compare", a, b])
    return r.returncode == 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--sets", default="musique-dev,2wiki-dev")
    ap.add_argument("--data", default=os.path.join(REPO, "..", "shared", "data"))
    ap.add_argument("--reuse", action="store_true", help="keep OUT's indexes and runs where they are already made")
    args = ap.parse_args()
    sets = args.sets.split(",")
    out = args.out
    if not args.reuse:
        shutil.rmtree(out, ignore_errors=True)
    store = os.path.join(out, "store")
    for s in sets:
        corpus = os.path.join(args.data, s, "corpus.json")
        if not os.path.exists(os.path.join(out, "separate", s, "CURRENT")):
            run([args.bin, "index", "-q", "--force", "--corpus", corpus, "--out", os.path.join(out, "separate", s)])
        if not os.path.exists(os.path.join(store, "namespaces", s, "CURRENT")):
            run([args.bin, "index", "-q", "--force", "--corpus", corpus, "--out", store, "--namespace", s])
    ok = True
    qs = {s: questions(os.path.join(args.data, s, "questions.json")) for s in sets}
    for s in sets:
        dataset = os.path.join(args.data, s, "questions.json")
        common = ["eval", "--dataset", dataset, "--method", ",".join(METHODS), "--k", "2,5,10,15", "-q"]
        for side, where in (("cli-separate", ["--index", os.path.join(out, "separate", s)]),
                            ("cli-store", ["--index", store, "--namespace", s])):
            if not os.path.exists(os.path.join(out, side, s, "qrels.txt")):
                run([args.bin, *common, *where, "--run", os.path.join(out, side, s)], stdout=subprocess.DEVNULL)
    print("== CLI: each namespace against its separate index", flush=True)
    ok &= compare(os.path.join(out, "cli-separate"), os.path.join(out, "cli-store"))

    shared = Server(args.bin, store, ["--set", f"serve.max_open_namespaces={len(sets)}"])
    try:
        for s in sets:
            qrels = os.path.join(out, "cli-separate", s, "qrels.txt")
            if not os.path.exists(os.path.join(out, "http-separate", s, "naive_ge.trec")):
                alone = Server(args.bin, os.path.join(out, "separate", s))
                try:
                    http_runs(alone, None, qs[s], os.path.join(out, "http-separate", s), qrels)
                finally:
                    alone.stop()
            http_runs(shared, s, qs[s], os.path.join(out, "http-store", s), qrels)
        print("== HTTP: one server with every namespace against a server per separate index", flush=True)
        ok &= compare(os.path.join(out, "http-separate"), os.path.join(out, "http-store"))

        # An edit in the first set's namespace: a tenth of its passages deleted.
        first = sets[0]
        with open(os.path.join(args.data, first, "corpus.json")) as f:
            n = len(json.load(f))
        exported = subprocess.run([args.bin, "export", "documents", "--index", store, "--namespace", first, "--out", "-"],
                                  check=True, capture_output=True, text=True).stdout.splitlines()
        ids = [json.loads(line)["id"] for line in exported]
        random.Random(50).shuffle(ids)
        deleted = shared.post("/v1/delete", {"ids": ids[: max(1, n // 10)], "namespace": first})
        print(f"== deleted {deleted['documents_deleted']} documents ({deleted['passages_removed']} passages) "
              f"in namespace {first}; generation {deleted['generation']}", flush=True)
        for s in sets[1:]:
            qrels = os.path.join(out, "cli-separate", s, "qrels.txt")
            http_runs(shared, s, qs[s], os.path.join(out, "http-store-after-edit", s), qrels)
            os.makedirs(os.path.join(out, "http-separate-others"), exist_ok=True)
            dest = os.path.join(out, "http-separate-others", s)
            shutil.rmtree(dest, ignore_errors=True)
            shutil.copytree(os.path.join(out, "http-separate", s), dest)
        print("== HTTP after an edit of the first namespace: the others against their separate indexes", flush=True)
        ok &= compare(os.path.join(out, "http-separate-others"), os.path.join(out, "http-store-after-edit"))
    finally:
        shared.stop()
    print("all identical" if ok else "DIFFERENCES (above)")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
