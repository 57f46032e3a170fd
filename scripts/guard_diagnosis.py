#!/usr/bin/env python3
"""What `auto`'s dense guard does to `ppr`'s top k, question by question.

Reads the TREC runs and qrels that `hoprag eval --method dense,ppr,auto --run DIR` writes
(dense.trec, ppr.trec, auto.trec, qrels.txt) and prints, per DIR: the questions whose top k
the guard changed, the gold passages it brought in and pushed out, the questions it won and
lost at R@k against ppr, and for each loss the dense rank of the passages it put in and the
ppr rank of the gold passages it pushed out.

    python3 scripts/guard_diagnosis.py [--k 5] RUN_DIR...
"""
import argparse
import collections
import os

from trec_runs import read_qrels, read_run


def diagnose(run_dir, k):
    dense, ppr, auto = (read_run(os.path.join(run_dir, f"{m}.trec")) for m in ("dense", "ppr", "auto"))
    gold = read_qrels(os.path.join(run_dir, "qrels.txt"))
    tally = collections.Counter()
    wins, losses = [], []
    for q, gold_q in gold.items():
        if not gold_q:
            continue
        p, a = ppr.get(q, [])[:k], auto.get(q, [])[:k]
        put_in = [x for x in a if x not in p]
        pushed_out = [x for x in p if x not in a]
        tally["questions"] += 1
        if not put_in:
            continue
        tally["changed"] += 1
        tally["gold in"] += sum(x in gold_q for x in put_in)
        tally["gold out"] += sum(x in gold_q for x in pushed_out)
        recall = lambda top: len(gold_q & set(top)) / len(gold_q)
        dense_q = dense.get(q, [])
        dense_ranks = [dense_q.index(x) + 1 if x in dense_q else None for x in put_in]
        if recall(a) > recall(p):
            tally["won"] += 1
            wins.append(dense_ranks)
        elif recall(a) < recall(p):
            tally["lost"] += 1
            losses.append((dense_ranks, [p.index(x) + 1 for x in pushed_out if x in gold_q]))
    return tally, wins, losses


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("run_dirs", nargs="+")
    args = ap.parse_args()
    results = [(d, *diagnose(d, args.k)) for d in args.run_dirs]
    print(
        f"| run | questions | top {args.k} changed | gold in / out | won / lost vs ppr "
        "| wins: dense rank put in | losses: dense rank put in -> ppr rank of the gold pushed out |"
    )
    print("|---|---|---|---|---|---|---|")
    for d, t, wins, losses in results:
        won = "; ".join(",".join(map(str, i)) for i in wins)
        lost = "; ".join(f"{','.join(map(str, i))} -> {','.join(map(str, o))}" for i, o in losses)
        print(
            f"| {d} | {t['questions']} | {t['changed']} | {t['gold in']} / {t['gold out']} "
            f"| {t['won']} / {t['lost']} | {won} | {lost} |"
        )


if __name__ == "__main__":
    main()
