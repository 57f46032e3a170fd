#!/usr/bin/env python3
"""Two `hoprag eval --json` reports of the same questions side by side, one row per method.

    scripts/compare_embedders.py minilm.json embeddinggemma.json [--names minilm,embeddinggemma]

For each method both reports ran: R@5, R@10 and LastHop@5 of each, the R@5 difference, and
the per-question wins and losses of the second report against the first at R@5 with the
two-sided sign test (ties dropped). Standard library only.
"""
import argparse
import json
import math
import sys


def sign_p(wins, losses):
    """Two-sided exact sign test."""
    n = wins + losses
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(wins, losses) + 1)) / 2**n
    return min(1.0, 2 * tail)


def pct(x):
    return "–" if x is None else f"{100 * x:.1f}"


def per_question(method):
    return {q["id"]: q["recall"].get("5", 0.0) for q in method["per_query"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("first")
    ap.add_argument("second")
    ap.add_argument("--names", default="first,second", help="column names, comma-separated")
    ap.add_argument("--title", default=None)
    args = ap.parse_args()
    a, b = (json.load(open(p)) for p in (args.first, args.second))
    na, nb = args.names.split(",")
    if a["n"] != b["n"]:
        sys.exit(f"the reports cover different questions: {a['n']} and {b['n']}")
    hop = next(iter(a["methods"].values()))["last_hop_n"]
    title = args.title or a["dataset"]
    print(f"**{title}** — {a['n']} questions" + (f" ({hop} with hop order)" if hop else " (no hop order)"))
    print()
    head = ["method", f"R@5 {na}", f"R@5 {nb}", "Δ R@5", f"W/L {nb} vs {na}", "sign p", f"R@10 {na}", f"R@10 {nb}"]
    if hop:
        head += [f"LastHop@5 {na}", f"LastHop@5 {nb}"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for name, ma in a["methods"].items():
        mb = b["methods"].get(name)
        if mb is None:
            continue
        qa, qb = per_question(ma), per_question(mb)
        if qa.keys() != qb.keys():
            sys.exit(f"{name}: the reports cover different question ids")
        wins = sum(qb[q] > qa[q] for q in qa)
        losses = sum(qb[q] < qa[q] for q in qa)
        r5a, r5b = ma["recall"].get("5"), mb["recall"].get("5")
        row = [name, pct(r5a), pct(r5b), f"{100 * (r5b - r5a):+.1f}", f"{wins}/{losses}", f"{sign_p(wins, losses):.3f}",
               pct(ma["recall"].get("10")), pct(mb["recall"].get("10"))]
        if hop:
            row += [pct(ma["last_hop"].get("5")), pct(mb["last_hop"].get("5"))]
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
