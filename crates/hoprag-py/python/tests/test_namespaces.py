"""Namespaces and metadata filters from Python: an index per namespace in one folder,
each ranking as a separate index would, and `retrieve(filter=...)` returning only the
passages whose meta matches."""

from __future__ import annotations

import pytest

import hoprag

from conftest import PASSAGES, need_model

YEARS = [{**p, "meta": {"year": 1990 + i, "lang": "en" if i % 2 else "fr"}} for i, p in enumerate(PASSAGES)]


def test_namespaces_are_separate_indexes(tmp_path):
    need_model("minilm")
    store = tmp_path / "store"
    a = hoprag.Index.build(PASSAGES, store, namespace="a")
    b = hoprag.Index.build(PASSAGES[:2], store, namespace="b.2")
    alone = hoprag.Index.build(PASSAGES, tmp_path / "alone")
    assert (len(a), len(b)) == (len(PASSAGES), 2)
    for method in ("bm25", "dense", "hybrid", "ppr", "auto"):
        got = [(r.id, r.score) for r in hoprag.Index.open(store, namespace="a").retrieve("capital of France", method=method, k=3)]
        want = [(r.id, r.score) for r in alone.retrieve("capital of France", method=method, k=3)]
        assert got == want, method
    b.delete("paris")
    assert [r.id for r in hoprag.Index.open(store, namespace="a").retrieve("capital of France", method="bm25", k=1)] == ["paris"]
    with pytest.raises(hoprag.IndexDirError, match='no namespace "zz"'):
        hoprag.Index.open(store, namespace="zz")
    with pytest.raises(hoprag.ConfigError, match="not allowed"):
        hoprag.Index.open(store, namespace="../a")


def test_filters_keep_matching_passages_in_the_methods_order(tmp_path):
    need_model("minilm")
    index = hoprag.Index.build(YEARS, tmp_path / "index")
    lang = {p["id"]: p["meta"]["lang"] for p in YEARS}
    for method in ("bm25", "dense", "ppr", "auto"):
        ranked = [r.id for r in index.retrieve("capital city river", method=method, k=len(YEARS))]
        # The method's order: what it ranks, then (BM25's unmatched) the rest by id.
        order = ranked + sorted(set(lang) - set(ranked))
        kept = [i for i in order if lang[i] == "en"][:2]
        got = index.retrieve("capital city river", method=method, k=2, filter={"lang": "en"})
        assert [r.id for r in got] == kept, method
    late = index.retrieve("capital", k=10, filter={"year": {"$gte": 1990 + len(YEARS) - 2}})
    assert sorted(r.meta["year"] for r in late) == [1990 + len(YEARS) - 2, 1990 + len(YEARS) - 1]
    with pytest.raises(hoprag.ConfigError, match=r"year\.\$gte"):
        index.retrieve("capital", filter={"year": {"$gte": "soon"}})
    with pytest.raises(hoprag.ConfigError, match="yaer"):
        index.retrieve("capital", filter={"yaer": 1})
