"""hoprag: multi-hop retrieval for retrieval-augmented generation, in-process.

The engine is Rust (the ``hoprag._hoprag`` extension); this package re-exports it and
adds what only Python has: the evaluation report as a pandas DataFrame, and retrievers
for LangChain and LlamaIndex (``hoprag.integrations``).

    >>> import hoprag
    >>> index = hoprag.Index.build(["Paris is the capital of France.", ...], "my-index")
    >>> for r in index.retrieve("What is the capital of France?", k=3):
    ...     print(r.rank, r.score, r.title, r.text)
"""

from __future__ import annotations

import os
from typing import Iterable, Optional, Sequence, Union

from . import models
from ._hoprag import (
    ConfigError,
    EmbeddingError,
    HopragError,
    HttpError,
    Index,
    IndexDirError,
    InputError,
    ModelError,
    Result,
    UnsupportedError,
    __version__,
)
from ._hoprag import evaluate as _evaluate
from ._hoprag import methods as _methods
from .report import Report

__all__ = [
    "Index",
    "Result",
    "Report",
    "evaluate",
    "methods",
    "models",
    "HopragError",
    "InputError",
    "IndexDirError",
    "ModelError",
    "EmbeddingError",
    "HttpError",
    "ConfigError",
    "UnsupportedError",
    "__version__",
]

DEFAULT_KS = (2, 5, 10, 15)


def methods() -> dict:
    """The retrieval methods, name to one-line description (as ``hoprag methods``)."""
    return dict(_methods())


def evaluate(
    index: Index,
    dataset: Union[str, "os.PathLike[str]"],
    methods: Union[str, Sequence[str]] = ("bm25", "dense", "hybrid"),
    ks: Iterable[int] = DEFAULT_KS,
    baseline: Optional[str] = "dense",
    limit: Optional[int] = None,
    simulated_judge: Optional[float] = None,
) -> Report:
    """Evaluates ``methods`` on the questions of ``dataset`` against ``index``: the
    report ``hoprag eval --json`` writes (R@k, Full@k, LastHop@k, latency, paired tests
    against ``baseline``), as a :class:`Report`.

    ``simulated_judge`` (an accuracy in [0, 1]) is ``hoprag eval --set
    llm.simulated_judge=P``: BridgeRAG's judge is replaced by one that knows this
    evaluation's gold passages and is right about each candidate with that probability
    (docs/bridgerag.md); the report's header says so. No other call accepts it."""
    if not isinstance(index, Index):
        raise TypeError(f"index: expected hoprag.Index, found {type(index).__name__}")
    if isinstance(methods, str):
        methods = [m for m in methods.split(",") if m.strip()]
    return Report(_evaluate(index, os.fspath(dataset), list(methods), list(ks), baseline, limit, simulated_judge))
