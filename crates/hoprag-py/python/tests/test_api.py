"""The Python API on a small index: building from lists, adding, parameters, embeddings."""

from __future__ import annotations

import numpy as np
import pytest

import hoprag

from conftest import PASSAGES, need_model


def test_build_from_dicts_and_retrieve(small_index):
    assert len(small_index) == len(PASSAGES)
    assert small_index.embedder == "minilm" and small_index.dim == 384
    top = small_index.retrieve("Which river flows through Paris?", method="bm25", k=2)
    assert [r.id for r in top] == ["seine", "paris"]
    assert top[0].score > top[1].score and top[0].title == "Seine"
    dense = small_index.retrieve("What is the capital of Germany?", method="dense", k=1)
    assert dense[0].id == "berlin"


def test_build_from_strings_and_add(tmp_path):
    need_model("minilm")
    with pytest.warns(UserWarning, match=r"1 exact duplicates dropped.*passages\[2\]: the same passage as passages\[0\]"):
        index = hoprag.Index.build(["Cats purr when content.", "Dogs bark at strangers.", "Cats purr when content."],
                                   tmp_path / "i", graph=False)
    # The exact duplicate is dropped and reported, not silently.
    assert len(index) == 2
    assert len(index.ingest_report["duplicates"]) == 1
    stats = index.add([{"title": "Owls", "text": "Owls hunt at night."}])
    assert stats["passages_added"] == 1 and len(index) == 3
    assert index.retrieve("nocturnal birds hunting", method="dense", k=1)[0].title == "Owls"
    assert len(hoprag.Index.open(tmp_path / "i")) == 3


def test_method_parameters_are_applied(small_index):
    q = "capital city"
    default = small_index.retrieve(q, method="hybrid", k=5)
    # hybrid's RRF constant: a different k changes the fused scores.
    other = small_index.retrieve(q, method="hybrid", k=5, rrf_k=1)
    assert [r.score for r in default] != [r.score for r in other]


def test_embed_returns_numpy_and_matches_dense_scores(small_index):
    vectors = small_index.embed([p["title"] + "\n" + p["text"] for p in PASSAGES])
    assert isinstance(vectors, np.ndarray) and vectors.dtype == np.float32 and vectors.shape == (5, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    query = "Which river flows through Paris?"
    q = small_index.embed([query], kind="query")[0]
    results = small_index.retrieve(query, method="dense", k=5)
    ids = [p["id"] for p in PASSAGES]
    for r in results:
        assert r.score == pytest.approx(float(vectors[ids.index(r.id)] @ q), abs=1e-4)


def test_batched_retrieve_shapes(small_index):
    out = small_index.retrieve(["capital of France", "a hot drink"], method="dense", k=2)
    assert [len(x) for x in out] == [2, 2]
    assert out[0][0].id == "paris" and out[1][0].id == "tea"
    assert small_index.retrieve([], method="dense") == []


def test_methods_listed():
    m = hoprag.methods()
    assert {"auto", "bm25", "dense", "hybrid", "ppr"} <= set(m)
