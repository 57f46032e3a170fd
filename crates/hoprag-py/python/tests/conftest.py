"""Shared fixtures: the CLI binary the Python results are compared with, the benchmark
data, and indexes built through Python."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

import hoprag

REPO = Path(__file__).resolve().parents[4]
DATA = Path(os.environ.get("HOPRAG_DATA", REPO.parent / "shared" / "data"))
MUSIQUE = DATA / "musique-train"


def required() -> bool:
    """scripts/test.sh installs the models and the data's absence is the only reason to
    skip; there (and on CI) a missing model is a failure, not a skip."""
    return bool(os.environ.get("HOPRAG_REQUIRE_MODELS") or os.environ.get("CI"))


def need_model(name: str) -> None:
    """Installs the model if it is missing (a no-op when it is there); where it cannot be
    installed, the test is skipped, or fails under scripts/test.sh and CI."""
    try:
        hoprag.models.fetch(name)
    except hoprag.HopragError as e:
        if required():
            pytest.fail(f"model {name}: {e}")
        pytest.skip(f"model {name} is not installed and could not be: {e}")


@pytest.fixture(scope="session")
def cli() -> Path:
    """The `hoprag` binary of this checkout (scripts/test.sh builds it first)."""
    path = Path(os.environ.get("HOPRAG_CLI", REPO / "target" / "debug" / "hoprag"))
    if not path.is_file():
        if required():
            pytest.fail(f"{path} is missing: build it with `cargo build -p hoprag-cli`")
        pytest.skip(f"{path} is missing: build it with `cargo build -p hoprag-cli`")
    return path


def run_cli(cli: Path, *args: str) -> dict:
    out = subprocess.run([str(cli), "--quiet", *args], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


@pytest.fixture(scope="session")
def musique() -> Path:
    if not (MUSIQUE / "corpus.json").is_file() or not (MUSIQUE / "questions.json").is_file():
        pytest.skip(f"benchmark data not found at {MUSIQUE} (the repository's ../shared/data)")
    return MUSIQUE


@pytest.fixture(scope="session")
def musique_index(musique: Path, tmp_path_factory) -> hoprag.Index:
    """The musique-train corpus indexed through Python (with the default heuristic graph,
    as `hoprag index` builds it)."""
    need_model("minilm")
    return hoprag.Index.build(musique / "corpus.json", tmp_path_factory.mktemp("musique") / "index")


PASSAGES = [
    {"id": "paris", "title": "Paris", "text": "Paris is the capital and largest city of France, on the Seine."},
    {"id": "berlin", "title": "Berlin", "text": "Berlin is the capital of Germany and its largest city."},
    {"id": "seine", "title": "Seine", "text": "The Seine is a river in northern France that flows through Paris."},
    {"id": "rust", "title": "Rust", "text": "Rust is a programming language focused on safety and speed."},
    {"id": "tea", "title": "Tea", "text": "Tea is an aromatic drink made by steeping cured leaves in hot water."},
]


@pytest.fixture(scope="session")
def small_index(tmp_path_factory) -> hoprag.Index:
    need_model("minilm")
    return hoprag.Index.build(PASSAGES, tmp_path_factory.mktemp("small") / "index")
