#!/usr/bin/env bash
# The whole test suite. Installs the default embedder first (tests check it against
# reference vectors) and the default local chat model (the LLM stages run on it
# offline); reads ../shared/data where present.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --quiet -p hoprag-cli
./target/debug/hoprag models fetch minilm
./target/debug/hoprag models fetch smollm2
cargo test --workspace
