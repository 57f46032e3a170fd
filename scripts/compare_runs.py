#!/usr/bin/env python3
"""Compare two `hoprag eval --json` reports of the same questions (e.g. one index built
two ways), method by method: R@5 and LastHop@5 of each, questions won/lost on R@5 and
the exact two-sided sign test; then every method pooled over all the pairs given.

    scripts/compare_runs.py NAME=BEFORE.json,AFTER.json [NAME=BEFORE.json,AFTER.json ...]

Pooled figures are means over all the questions of all the pairs (each question counts
once), with the sign test on the pooled wins and losses.
"""
import json
import math
import sys


def sign_test(wins, losses):
    """Exact two-sided sign test (ties dropped)."""
    n = wins + losses
    if n == 0:
        return 1.0
    k = min(wins, losses)
    p = 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, p)


def per_query(report, method):
    out = {}
    for q in report["methods"][method]["per_query"]:
        lh = q.get("last_hop") or {}
        out[q["id"]] = (q["recall"]["5"], lh.get("5"))
    return out


def main(args):
    pooled = {}
    for arg in args:
        name, files = arg.split("=", 1)
        before, after = (json.load(open(f)) for f in files.split(","))
        print(f"\n### {name}\n")
        print("| method | R@5 before | R@5 after | Δ | W/L | p (sign) | LastHop@5 before | LastHop@5 after |")
        print("|---|---|---|---|---|---|---|---|")
        for method in before["methods"]:
            if method not in after["methods"]:
                continue
            b, a = per_query(before, method), per_query(after, method)
            ids = [i for i in b if i in a]
            rb = [b[i][0] for i in ids]
            ra = [a[i][0] for i in ids]
            wins = sum(x > y for x, y in zip(ra, rb))
            losses = sum(x < y for x, y in zip(ra, rb))
            lb = [b[i][1] for i in ids if b[i][1] is not None and a[i][1] is not None]
            la = [a[i][1] for i in ids if b[i][1] is not None and a[i][1] is not None]
            p = pooled.setdefault(method, {"rb": [], "ra": [], "lb": [], "la": []})
            p["rb"] += rb
            p["ra"] += ra
            p["lb"] += lb
            p["la"] += la
            mean = lambda v: 100 * sum(v) / len(v) if v else float("nan")
            lh = f"{mean(lb):.1f} | {mean(la):.1f}" if lb else "– | –"
            print(
                f"| {method} | {mean(rb):.1f} | {mean(ra):.1f} | {mean(ra) - mean(rb):+.1f} | {wins}/{losses} "
                f"| {sign_test(wins, losses):.3f} | {lh} |"
            )
    print("\n### pooled (every question of every set once)\n")
    print("| method | questions | R@5 before | R@5 after | Δ | W/L | p (sign) | LastHop@5 before | LastHop@5 after | Δ |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for method, p in pooled.items():
        mean = lambda v: 100 * sum(v) / len(v) if v else float("nan")
        wins = sum(x > y for x, y in zip(p["ra"], p["rb"]))
        losses = sum(x < y for x, y in zip(p["ra"], p["rb"]))
        print(
            f"| {method} | {len(p['rb'])} | {mean(p['rb']):.1f} | {mean(p['ra']):.1f} | {mean(p['ra']) - mean(p['rb']):+.1f} "
            f"| {wins}/{losses} | {sign_test(wins, losses):.3f} | {mean(p['lb']):.1f} | {mean(p['la']):.1f} "
            f"| {mean(p['la']) - mean(p['lb']):+.1f} |"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
