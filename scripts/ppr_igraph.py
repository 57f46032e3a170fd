#!/usr/bin/env python3
"""Peer timing for `hoprag bench ppr`: python-igraph's personalized_pagerank (PRPACK, the
call HippoRAG makes) on the same graph and seeds that hoprag timed.

Usage: ppr_igraph.py EDGES.tsv SEEDS.json DAMPING OUT.json
EDGES.tsv: first line the node count, then "a b weight" per undirected edge.
SEEDS.json: a list of queries, each a list of [node, weight].
"""
import json
import sys
import time

import igraph


def main() -> None:
    edges_path, seeds_path, damping, out_path = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
    with open(edges_path) as f:
        n = int(f.readline())
        edges, weights = [], []
        for line in f:
            a, b, w = line.split()
            edges.append((int(a), int(b)))
            weights.append(float(w))
    graph = igraph.Graph(n=n, edges=edges, directed=False)
    graph.es["weight"] = weights
    with open(seeds_path) as f:
        queries = json.load(f)
    times, tops = [], []
    for seeds in queries:
        reset = [0.0] * n
        for node, weight in seeds:
            reset[node] += weight
        start = time.perf_counter()
        scores = graph.personalized_pagerank(
            directed=False, damping=damping, reset=reset, weights="weight", implementation="prpack"
        )
        times.append((time.perf_counter() - start) * 1e3)
        tops.append(sorted(range(n), key=lambda i: -scores[i])[:10])
    with open(out_path, "w") as f:
        json.dump({"times_ms": times, "top10": tops}, f)


if __name__ == "__main__":
    main()
