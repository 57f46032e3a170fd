#!/usr/bin/env bash
# What the `local-llm` cargo feature's build needs besides Rust: llama.cpp is compiled
# from source with cmake, and its bindings are generated with bindgen, which loads
# libclang. Installs both from Debian's packages when missing (as root, or with sudo).
set -euo pipefail

have_libclang() {
    # libclang itself (libclang-14.so, libclang.so), not libclang-cpp, which bindgen
    # cannot load. Not `grep -q`: under pipefail its early exit fails the pipe.
    ldconfig -p 2>/dev/null | grep -E 'libclang(-[0-9.]+)?\.so' >/dev/null
}

if command -v cmake >/dev/null && have_libclang; then
    exit 0
fi
if ! command -v apt-get >/dev/null; then
    echo "the local-llm feature needs cmake and libclang; install them with your package manager" >&2
    exit 1
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
echo "installing cmake and libclang (for llama.cpp's build)..." >&2
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq cmake libclang-dev >/dev/null
