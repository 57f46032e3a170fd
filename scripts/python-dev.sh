#!/usr/bin/env bash
# Installs the hoprag Python package from this checkout into a virtual environment, for
# the tests: the extension is the workspace's own build (target/debug, dev profile), so
# nothing is compiled twice.
#
# Why not `maturin develop`: maturin builds `-p hoprag-py` alone, and cargo resolves the
# features of shared dependencies per invocation; without the CLI in the same build, `log`
# and `rustix` get fewer features and every crate above them (tantivy, reqwest, tokenizers,
# llama.cpp's bindings, the library) would be compiled a second time. Built together with
# the CLI, the extension uses exactly the artifacts `cargo test --workspace` uses. An
# editable install is then what maturin's is: the compiled module next to the Python
# sources, and a .pth file naming that folder.
#
# Usage: scripts/python-dev.sh [VENV]   (default: $HOPRAG_PY_VENV or ~/.cache/hoprag-py-venv)
# Wheels for users: `pip install ./crates/hoprag-py` (maturin, release profile).
set -euo pipefail
cd "$(dirname "$0")/.."

VENV="${1:-${HOPRAG_PY_VENV:-$HOME/.cache/hoprag-py-venv}}"
if [ ! -x "$VENV/bin/python" ]; then
    # Debian's Python has venv in a package of its own.
    if ! python3 -m venv "$VENV" 2>/dev/null; then
        SUDO=""
        if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-venv >/dev/null
        python3 -m venv "$VENV"
    fi
fi
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    numpy pytest pandas langchain-core llama-index-core mcp networkx

# HOPRAG_CARGO_FEATURES: the features scripts/test.sh builds with, so that this build is
# the same one.
cargo build --quiet -p hoprag-cli -p hoprag-py ${HOPRAG_CARGO_FEATURES:+--features "$HOPRAG_CARGO_FEATURES"}
PKG=crates/hoprag-py/python
# The stable-ABI name CPython looks for; a copy, not a link, so a later build does not
# change a running interpreter's module under it.
cp target/debug/lib_hoprag.so "$PKG/hoprag/_hoprag.abi3.so"
SITE=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$(pwd)/$PKG" > "$SITE/hoprag_dev.pth"
"$VENV/bin/python" -c 'import hoprag; print("hoprag", hoprag.__version__, "from", hoprag.__file__)'
