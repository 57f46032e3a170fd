"""Bad input from Python raises a clear exception, never crashes the interpreter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import hoprag

from conftest import PASSAGES, need_model


def test_wrong_types(small_index, tmp_path):
    with pytest.raises(TypeError, match="passages: expected a path to a corpus"):
        hoprag.Index.build(42, tmp_path / "a")
    with pytest.raises(TypeError, match=r"passages\[1\]: expected str or dict"):
        hoprag.Index.build(["fine", 3.5], tmp_path / "b")
    with pytest.raises(TypeError, match=r"query\[1\]: expected str, found int"):
        small_index.retrieve(["ok", 7])
    with pytest.raises(TypeError, match="query: expected str or a list of str"):
        small_index.retrieve({"q": 1})
    with pytest.raises(TypeError):
        small_index.retrieve("q", k="five")
    with pytest.raises(TypeError, match="index: expected hoprag.Index"):
        hoprag.evaluate("not an index", "questions.json")
    # A passage whose fields have the wrong type is skipped and reported (as in a corpus
    # file), with its location.
    with pytest.warns(UserWarning, match=r"passages\[1\]: field `text` must be a string"):
        index = hoprag.Index.build(["fine", {"title": "T", "text": 5}], tmp_path / "c", graph=False)
    assert len(index) == 1


def test_missing_files(small_index, tmp_path):
    missing = tmp_path / "nope" / "corpus.json"
    with pytest.raises(hoprag.InputError, match=str(missing)) as e:
        hoprag.Index.build(missing, tmp_path / "a")
    assert isinstance(e.value, hoprag.HopragError)
    with pytest.raises(hoprag.IndexDirError, match="no index here"):
        hoprag.Index.open(tmp_path / "no-index")
    with pytest.raises(hoprag.InputError, match="missing.json"):
        hoprag.evaluate(small_index, tmp_path / "missing.json", methods=["dense"])
    with pytest.raises(hoprag.InputError, match="openie.json"):
        hoprag.Index.build(PASSAGES, tmp_path / "d", triples=tmp_path / "openie.json")


def test_index_from_another_embedder(small_index, tmp_path):
    need_model("mpnet")
    with pytest.raises(hoprag.IndexDirError, match="built with embedder minilm .* embedded with mpnet"):
        hoprag.Index.open(small_index.path, embedder="mpnet")


def test_corrupt_manifest_embedder(tmp_path):
    need_model("minilm")
    hoprag.Index.build(PASSAGES, tmp_path / "i", graph=False)
    generation = tmp_path / "i" / (tmp_path / "i" / "CURRENT").read_text().strip()
    manifest = json.loads((generation / "manifest.json").read_text())
    manifest["embedder"]["id"] = "word2vec-42"
    (generation / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(hoprag.ConfigError, match='unknown embedder "word2vec-42"'):
        hoprag.Index.open(tmp_path / "i")


def test_bad_method_and_parameters(small_index):
    with pytest.raises(hoprag.ConfigError, match='unknown method "nope"'):
        small_index.retrieve("q", method="nope")
    with pytest.raises(hoprag.ConfigError):
        small_index.retrieve("q", method="hybrid", no_such_parameter=1)


def test_method_needing_a_graph(tmp_path):
    need_model("minilm")
    index = hoprag.Index.build(PASSAGES, tmp_path / "i", graph=False)
    with pytest.raises(hoprag.IndexDirError, match="needs an entity graph"):
        index.retrieve("q", method="ppr")


def test_unsupported_store_and_embedder(tmp_path):
    with pytest.raises(hoprag.UnsupportedError, match="PostgreSQL URL"):
        hoprag.Index.build(PASSAGES, tmp_path / "a", store="sqlite://db")
    # A PostgreSQL store that is not there: the error names where it looked.
    with pytest.raises(hoprag.HopragError, match=r"cannot connect to PostgreSQL at 127\.0\.0\.1:1"):
        hoprag.Index.build(PASSAGES, tmp_path / "a", store="postgresql://postgres@127.0.0.1:1/db")
    with pytest.raises(hoprag.UnsupportedError, match=r"http://127\.0\.0\.1:8080/idx: opening an index by URL"):
        hoprag.Index.open("http://127.0.0.1:8080/idx")
    with pytest.raises(hoprag.ConfigError, match="unknown embedder"):
        hoprag.Index.build(PASSAGES, tmp_path / "b", embedder="bogus")


def test_existing_index_is_not_overwritten(small_index):
    with pytest.raises(hoprag.IndexDirError, match="already exists"):
        hoprag.Index.build(PASSAGES, small_index.path)


def test_openie_entries_that_cannot_be_used_are_reported(tmp_path):
    """An OpenIE file with a malformed triple, an empty entity and a document that is no
    passage of the index: the graph is built from the rest, and each is counted, named in
    a warning and listed in Index.graph_report."""
    need_model("minilm")
    openie = tmp_path / "openie.json"
    openie.write_text(json.dumps({"docs": [
        {"passage": "Paris\n" + PASSAGES[0]["text"], "extracted_entities": ["Paris", "France", ""],
         "extracted_triples": [["Paris", "capital of", "France"], ["Paris", "Seine"]]},
        {"passage": "Atlantis\nAtlantis sank into the sea.", "extracted_entities": ["Atlantis"],
         "extracted_triples": [["Atlantis", "sank into", "the sea"]]},
    ]}))
    with pytest.warns(UserWarning, match=r"1 malformed triples and 1 malformed entities skipped; 1 documents matched "
                                         r"no passage; .*openie\.json: docs\[1\]"):
        index = hoprag.Index.build(PASSAGES, tmp_path / "i", triples=openie)
    report = index.graph_report
    assert report["source"] == str(openie)
    extraction = report["extraction"]
    assert (extraction["docs"], extraction["malformed_triples"], extraction["malformed_entities"]) == (1, 1, 1)
    assert extraction["unmatched_docs"] == [f"{openie}: docs[1]"]
    assert report["stats"]["triples"] == 1
    assert index.manifest["graph"]["source"] == str(openie)
    assert index.retrieve("capital of France", method="ppr", k=1)[0].id == "paris"
