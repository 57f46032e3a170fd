"""The local model cache (as ``hoprag models``)."""

from __future__ import annotations

from pathlib import Path

from ._hoprag import fetch_model as _fetch

__all__ = ["fetch"]


def fetch(name: str) -> Path:
    """Installs model ``name`` (``minilm``, ``mpnet``, ``smollm2``, ...) into the local
    cache if it is not there, and returns its folder."""
    if not isinstance(name, str):
        raise TypeError(f"name: expected str, found {type(name).__name__}")
    return Path(_fetch(name))
