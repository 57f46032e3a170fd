"""Python and the CLI give the same numbers and the same passages on one index."""

from __future__ import annotations

import json

import pytest

import hoprag

from conftest import run_cli

METHODS = ["bm25", "dense", "hybrid"]


def test_evaluate_matches_cli_eval(musique_index, musique, cli):
    questions = musique / "questions.json"
    report = hoprag.evaluate(musique_index, questions, methods=METHODS, ks=[2, 5, 10, 15], baseline="dense")
    cli_report = run_cli(
        cli, "eval", "--index", str(musique_index.path), "--dataset", str(questions),
        "--method", ",".join(METHODS), "--baseline", "dense", "--json",
    )
    assert report.n == cli_report["n"] == 51
    for m in METHODS:
        for k in (2, 5, 10, 15):
            assert report.recall(m, k) == cli_report["methods"][m]["recall"][str(k)], (m, k)
        assert report.data["methods"][m]["full"] == cli_report["methods"][m]["full"], m
    # The paired tests against the baseline are the CLI's too: wins, losses, ties, the sign
    # tests (Holm-adjusted over the run) and the per-type comparisons, value for value.
    for m in ("bm25", "hybrid"):
        ours, theirs = report.data["methods"][m]["vs_baseline"], cli_report["methods"][m]["vs_baseline"]
        assert ours["baseline"] == "dense" and ours["wins"] + ours["losses"] + ours["ties"] == 51
        assert ours == theirs, m
    assert "vs_baseline" not in report.data["methods"]["dense"]
    assert "vs_baseline" not in cli_report["methods"]["dense"]
    # R@5 is a real retrieval result, not a constant: the methods differ.
    r5 = {m: report.recall(m, 5) for m in METHODS}
    assert len(set(r5.values())) > 1 and all(0 < v < 1 for v in r5.values()), r5


def test_report_to_pandas(musique_index, musique):
    pd = pytest.importorskip("pandas")
    report = hoprag.evaluate(musique_index, musique / "questions.json", methods="bm25,dense", ks=[5], limit=10)
    frame = report.to_pandas()
    assert isinstance(frame, pd.DataFrame)
    assert list(frame.index) == ["bm25", "dense"]
    assert frame.loc["dense", "R@5"] == report.recall("dense", 5)


def twenty_questions(musique):
    data = json.loads((musique / "questions.json").read_text())
    return [q["question"] for q in data[:20]]


@pytest.mark.parametrize("method", ["auto", "hybrid"])
def test_retrieve_matches_cli_query(musique_index, musique, cli, method):
    questions = twenty_questions(musique)
    batched = musique_index.retrieve(questions, method=method, k=5)
    assert len(batched) == 20
    for question, batch in zip(questions, batched):
        expected = run_cli(cli, "query", "--index", str(musique_index.path), "--method", method, "-k", "5",
                           "--json", question)
        single = musique_index.retrieve(question, method=method, k=5)
        for got in (single, batch):
            assert [r.id for r in got] == [p["id"] for p in expected["passages"]], question
            assert [r.rank for r in got] == [1, 2, 3, 4, 5]
            assert [r.score for r in got] == pytest.approx([p["score"] for p in expected["passages"]], rel=1e-5)
            assert [r.text for r in got] == [p["text"] for p in expected["passages"]]
        # The decision record is the CLI's: the same steps (timings aside).
        assert [s["name"] for s in single[0].trace["steps"]] == [s["name"] for s in expected["trace"]["steps"]]


def test_simulated_judge_only_in_evaluate(musique_index, musique, cli):
    """`evaluate(simulated_judge=P)` is `hoprag eval --set llm.simulated_judge=P`: the
    same judge, verdicts and header; opening an index with the setting is refused."""
    questions = musique / "questions.json"
    report = hoprag.evaluate(
        musique_index, questions, methods="dense,bridge_rag", ks=[5], limit=8, simulated_judge=0.8
    )
    cli_report = run_cli(
        cli, "eval", "--index", str(musique_index.path), "--dataset", str(questions), "--method",
        "dense,bridge_rag", "--k", "5", "--limit", "8", "--set", "llm.simulated_judge=0.8", "--json",
    )
    assert report.data["simulated"].startswith("SIMULATED judge, accuracy 0.8")
    assert report.data["simulated"] == cli_report["simulated"]
    agreement = report.data["methods"]["bridge_rag"]["judge_agreement"]
    assert agreement == cli_report["methods"]["bridge_rag"]["judge_agreement"]
    assert agreement["gold"] > 0 and agreement["other"] > 0, agreement
    for m in ("dense", "bridge_rag"):
        assert report.recall(m, 5) == cli_report["methods"][m]["recall"]["5"], m
    # Without the gold, nothing else may build it.
    with pytest.raises(hoprag.ConfigError, match="llm.simulated_judge"):
        hoprag.Index.open(musique_index.path, settings={"llm.simulated_judge": 0.8})
    with pytest.raises(hoprag.ConfigError, match="simulated_judge"):
        hoprag.evaluate(musique_index, questions, methods="bridge_rag", ks=[5], limit=1, simulated_judge=1.5)
