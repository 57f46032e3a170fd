#!/usr/bin/env python3
"""The slices the local-LLM measurements run on (README, "Local models").

    llm_slice.py make OUT N      the first N MuSiQue questions and their passages:
                                 OUT/questions.json, OUT/corpus.json (title, text)
    llm_slice.py agree OUT EXTRACTION.json
                                 OpenIE agreement of `hoprag graph --extract llm --json`'s
                                 triples with GPT-3.5's on the slice's passages

Agreement is entity overlap per passage: the entities (subjects and objects of the
triples, lower-cased, whitespace collapsed) of the local model against GPT-3.5's
`extracted_entities`; precision, recall and F1 are averaged over passages.
"""
import json
import re
import sys

DATA = "../shared/data/musique-train"


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


def agree(out, extraction):
    corpus = json.load(open(f"{out}/corpus.json"))
    gpt = {}
    for d in json.load(open(f"{DATA}/openie_gpt-3.5-turbo-1106.json"))["docs"]:
        gpt[(norm(d["title"]), norm(d["text"]))] = {norm(e) for e in d.get("extracted_entities", []) if norm(e)}
    local = {}
    for t in json.load(open(extraction)):
        p = t["passage"]
        local.setdefault(p, set()).update(x for x in (norm(t["subject"]), norm(t["object"])) if x)
    rows, missing = [], 0
    for i, p in enumerate(corpus):
        ref = gpt.get((norm(p["title"]), norm(p["text"])))
        if ref is None:
            missing += 1
            continue
        mine = local.get(i, set())
        inter = len(mine & ref)
        prec = inter / len(mine) if mine else 0.0
        rec = inter / len(ref) if ref else 0.0
        f1 = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
        rows.append((prec, rec, f1))
    n = len(rows)
    triples = sum(1 for _ in json.load(open(extraction)))
    print(json.dumps({
        "passages": len(corpus),
        "passages_without_gpt_reference": missing,
        "local_triples_per_passage": triples / len(corpus),
        "entity_precision": sum(r[0] for r in rows) / n,
        "entity_recall": sum(r[1] for r in rows) / n,
        "entity_f1": sum(r[2] for r in rows) / n,
    }, indent=1))


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2], int(sys.argv[3]))
    else:
        agree(sys.argv[2], sys.argv[3])
