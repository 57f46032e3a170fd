"""Reading the TREC runs and qrels that `hoprag eval --run DIR` writes (and the peer's
run.py): ranked document ids per question, gold document ids per question. A line of the
wrong shape stops the reader with its file and line number."""
import collections
import sys


def _records(path, fields, shape):
    try:
        with open(path) as f:
            for n, line in enumerate(f, 1):
                parts = line.split()
                if len(parts) != fields:
                    sys.exit(f"{path}:{n}: expected {fields} fields ({shape}), got {len(parts)}")
                yield parts
    except FileNotFoundError:
        sys.exit(f"{path}: not found (written by `hoprag eval --run DIR`)")


def read_run(path):
    """Question id -> document ids, best first."""
    ranked = collections.defaultdict(list)
    for q, _, doc, rank, _score, _tag in _records(path, 6, "qid Q0 docid rank score tag"):
        ranked[q].append((int(rank), doc))
    return {q: [d for _, d in sorted(v)] for q, v in ranked.items()}


def read_qrels(path):
    """Question id -> the set of relevant document ids."""
    gold = collections.defaultdict(set)
    for q, _, doc, rel in _records(path, 4, "qid 0 docid relevance"):
        if int(rel) > 0:
            gold[q].add(doc)
    return gold
