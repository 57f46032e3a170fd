#!/usr/bin/env bash
# The whole test suite. Installs the default embedder first (tests check it against
# reference vectors) and the default local chat model (the LLM stages run on it
# offline); reads ../shared/data where present.
set -euo pipefail
cd "$(dirname "$0")/.."

# The local LLM's quantized kernels on one thread, as the hoprag binary runs them: they
# spin-wait for their workers, which stalls when anything else wants the cores.
export CANDLE_NUM_THREADS="${CANDLE_NUM_THREADS:-1}"

# trec_eval's own code, which a CLI test reads hoprag's TREC runs with (Debian packages
# no trec_eval).
python3 -m pip install --quiet --disable-pip-version-check pytrec-eval-terrier

cargo build --quiet -p hoprag-cli
./target/debug/hoprag models fetch minilm
./target/debug/hoprag models fetch mpnet     # the second local embedder (tests check it against reference vectors)
./target/debug/hoprag models fetch smollm2   # the local chat model the offline LLM tests run
cargo test --workspace
