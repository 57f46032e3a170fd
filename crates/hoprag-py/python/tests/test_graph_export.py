"""`hoprag export graph` on the musique-train index: the GraphML reads back in networkx,
and it, the JSONL and the CSV files hold the nodes and edges the graph reports
(docs/export.md)."""

from __future__ import annotations

import collections
import csv
import json

import pytest

from conftest import need_model, required, run_cli


@pytest.fixture(scope="module")
def exported(cli, musique, tmp_path_factory):
    """The index `hoprag index` builds (with its heuristic graph), the graph's stats as
    `hoprag index --json` reports them, and the folder the exports go to."""
    need_model("minilm")
    folder = tmp_path_factory.mktemp("graph-export")
    built = run_cli(cli, "index", "--corpus", str(musique / "corpus.json"), "--out", str(folder / "index"), "--json")
    return folder, built["graph"]["stats"]


def export(cli, folder, fmt: str, out) -> dict:
    return run_cli(cli, "export", "graph", "--index", str(folder / "index"), "--format", fmt, "--out", str(out), "--json")


def test_graphml_reads_back_in_networkx_with_the_graphs_counts(cli, exported):
    try:
        import networkx as nx
    except ImportError:
        if required():
            pytest.fail("networkx is missing: scripts/python-dev.sh installs it")
        pytest.skip("networkx is not installed")
    folder, stats = exported
    summary = export(cli, folder, "graphml", folder / "graph.graphml")
    graph = nx.read_graphml(folder / "graph.graphml")

    nodes = collections.Counter(kind for _, kind in graph.nodes(data="kind"))
    assert nodes == {"entity": stats["entities"], "passage": stats["passages"]}
    assert graph.number_of_nodes() == stats["entities"] + stats["passages"]

    edges = collections.Counter(kind for *_, kind in graph.edges(data="kind"))
    assert edges["passage_entity"] == stats["passage_entity_edges"]
    assert edges["synonym"] == stats["synonym_edges"]
    # The graph's relation edges are the entity pairs its facts link, whichever way.
    fact_pairs = {frozenset((u, v)) for u, v, kind in graph.edges(data="kind") if kind == "fact"}
    assert len(fact_pairs) == stats["relation_edges"]
    # Every fact is an edge but those without two distinct entities as its ends.
    counts = summary["counts"]
    assert edges["fact"] == counts["fact_edges"] == stats["facts"] - counts["facts_without_edge"]
    assert 0 < edges["fact"] <= stats["facts"]
    assert graph.number_of_edges() == summary["edges"] == sum(edges.values())

    # Attributes as docs/export.md describes them.
    entity = next(data for _, data in graph.nodes(data=True) if data["kind"] == "entity")
    assert entity["name"] and entity["passage_count"] >= 1
    passage = next(data for _, data in graph.nodes(data=True) if data["kind"] == "passage")
    assert passage["passage"] and "title" in passage and passage["doc"]
    fact = next(data for *_, data in graph.edges(data=True) if data["kind"] == "fact")
    assert fact["relation"] and json.loads(fact["passages"]) and fact["weight"] == len(json.loads(fact["passages"]))


def test_jsonl_and_csv_hold_the_same_nodes_and_edges(cli, exported):
    folder, stats = exported
    jsonl = export(cli, folder, "jsonl", folder / "graph.jsonl")
    with open(folder / "graph.jsonl", encoding="utf-8") as f:
        lines = [json.loads(line) for line in f]
    kinds = collections.Counter((line["type"], line["kind"]) for line in lines)
    assert kinds[("node", "entity")] == stats["entities"]
    assert kinds[("node", "passage")] == stats["passages"]
    assert kinds[("edge", "passage_entity")] == stats["passage_entity_edges"]
    assert kinds[("edge", "synonym")] == stats["synonym_edges"]
    assert kinds[("edge", "fact")] == jsonl["counts"]["fact_edges"]

    csv_summary = export(cli, folder, "csv", folder / "csv")
    assert csv_summary["counts"] == jsonl["counts"]
    rows = {}
    for name in ["entity_nodes", "passage_nodes", "fact_edges", "synonym_edges", "passage_entity_edges"]:
        with open(folder / "csv" / f"{name}.csv", newline="", encoding="utf-8") as f:
            rows[name] = list(csv.DictReader(f))
    assert len(rows["entity_nodes"]) == stats["entities"]
    assert len(rows["passage_nodes"]) == stats["passages"]
    assert len(rows["fact_edges"]) == jsonl["counts"]["fact_edges"]
    assert len(rows["synonym_edges"]) == stats["synonym_edges"]
    assert len(rows["passage_entity_edges"]) == stats["passage_entity_edges"]
    # A title with a comma or a quote survives the quoting.
    titles = {line["title"] for line in lines if line["kind"] == "passage"}
    assert {row["title"] for row in rows["passage_nodes"]} == titles
