#!/usr/bin/env python3
"""The slices the local-LLM measurements run on (README, "Local models").

    llm_slice.py make OUT N      the first N MuSiQue questions and their passages:
                                 OUT/questions.json, OUT/corpus.json (title, text)
    llm_slice.py agree OUT INDEX...
                                 per index (built on OUT/corpus.json, with a graph): its
                                 triples per passage and their entity agreement with
                                 GPT-3.5's OpenIE on the same passages

Agreement is entity overlap per passage: the entities (subjects and objects of the
triples, lower-cased, whitespace collapsed) of an index's graph against GPT-3.5's
`extracted_entities` (ner) and against the subjects and objects of GPT-3.5's triples
(triple_args); precision, recall and F1 are averaged over passages.
"""
import json
import os
import re
import subprocess
import sys

DATA = "../shared/data/musique-train"
HOPRAG = os.environ.get("HOPRAG", "target/release/hoprag")


def norm(s):
    return re.sub(r"\s+", " ", str(s)).strip().lower()


def make(out, n):
    questions = json.load(open(f"{DATA}/questions.json"))[:n]
    seen, corpus = set(), []
    for q in questions:
        for p in q["paragraphs"]:
            key = (p["title"], p["paragraph_text"])
            if key not in seen:
                seen.add(key)
                corpus.append({"title": p["title"], "text": p["paragraph_text"]})
    json.dump(questions, open(f"{out}/questions.json", "w"))
    json.dump(corpus, open(f"{out}/corpus.json", "w"))
    print(f"{len(questions)} questions, {len(corpus)} passages")


def export(what, index):
    rows = subprocess.run([HOPRAG, "export", what, "--index", index, "--out", "-"],
                          check=True, capture_output=True, text=True).stdout.splitlines()
    return [json.loads(r) for r in rows]


def agree(out, indexes):
    corpus = json.load(open(f"{out}/corpus.json"))
    ner, arg = {}, {}
    for d in json.load(open(f"{DATA}/openie_gpt-3.5-turbo-1106.json"))["docs"]:
        key = (norm(d["title"]), norm(d["text"]))
        ner[key] = {norm(e) for e in d.get("extracted_entities", []) if norm(e)}
        arg[key] = {norm(x) for t in d.get("extracted_triples", []) if len(t) == 3 for x in (t[0], t[2]) if norm(x)}
    for index in indexes:
        report = {"index": index}
        for name, gpt in (("ner", ner), ("triple_args", arg)):
            report.update(overlap(corpus, index, gpt, name))
        print(json.dumps(report))


def overlap(corpus, index, gpt, name):
    if True:
        triples = export("triples", index)
        id_of = {(norm(p["title"]), norm(p["text"])): p["id"] for p in export("documents", index)}
        local = {}
        for t in triples:
            local.setdefault(t["passage"], set()).update(x for x in (norm(t["subject"]), norm(t["object"])) if x)
        rows, missing = [], 0
        for p in corpus:
            key = (norm(p["title"]), norm(p["text"]))
            ref = gpt.get(key)
            if ref is None:
                missing += 1
                continue
            mine = local.get(id_of.get(key), set())
            inter = len(mine & ref)
            prec = inter / len(mine) if mine else 0.0
            rec = inter / len(ref) if ref else 0.0
            f1 = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
            rows.append((prec, rec, f1))
        n = len(rows)
        return {
            "passages": len(corpus),
            "passages_without_gpt_reference": missing,
            "passages_without_triples": sum(1 for p in corpus if id_of.get((norm(p["title"]), norm(p["text"]))) not in local),
            "triples_per_passage": round(len(triples) / len(corpus), 2),
            f"p_vs_gpt35_{name}": round(sum(r[0] for r in rows) / n, 3),
            f"r_vs_gpt35_{name}": round(sum(r[1] for r in rows) / n, 3),
            f"f1_vs_gpt35_{name}": round(sum(r[2] for r in rows) / n, 3),
        }


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2], int(sys.argv[3]))
    else:
        agree(sys.argv[2], sys.argv[3:])
