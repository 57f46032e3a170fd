"""Type stubs of the Rust extension module."""

import os
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union, overload

import numpy as np
import numpy.typing as npt

__version__: str

Passages = Union[str, "os.PathLike[str]", Sequence[str], Sequence[Dict[str, Any]]]

class HopragError(Exception): ...
class InputError(HopragError): ...
class IndexDirError(HopragError): ...
class ModelError(HopragError): ...
class EmbeddingError(HopragError): ...
class HttpError(HopragError): ...
class ConfigError(HopragError): ...
class UnsupportedError(HopragError): ...

class Result:
    id: str
    title: str
    text: str
    score: float
    rank: int
    method: str
    trace: Dict[str, Any]
    doc: Optional[str]  # the passage's document; None when the passage is a document of its own
    meta: Optional[Dict[str, Any]]

class Index:
    @staticmethod
    def build(
        passages: Passages,
        path: Union[str, "os.PathLike[str]"],
        embedder: str = "minilm",
        triples: Optional[Union[str, "os.PathLike[str]"]] = None,
        store: Optional[str] = None,  # "folder" (the default: the index in `path`) or a postgres:// URL
        graph: bool = True,
        overwrite: bool = False,
        settings: Optional[Dict[str, Any]] = None,
        namespace: Optional[str] = None,  # one of the store's indexes; None: the default one
    ) -> "Index": ...
    @staticmethod
    def open(
        path: Union[str, "os.PathLike[str]"],  # a folder or a postgres:// URL; an http(s) URL raises UnsupportedError
        embedder: Optional[str] = None,
        settings: Optional[Dict[str, Any]] = None,
        namespace: Optional[str] = None,  # must exist; None: the default one
    ) -> "Index": ...
    # Edits return the counts: documents_added, documents_replaced, documents_deleted,
    # documents_unchanged, passages_added, passages_removed, passages_total, and
    # changed, generation, dry_run.
    def add(self, passages: Passages, dry_run: bool = False) -> Dict[str, Any]: ...  # = upsert
    def upsert(self, passages: Passages, dry_run: bool = False) -> Dict[str, Any]: ...
    def delete(self, ids: Union[str, Sequence[str]], dry_run: bool = False) -> Dict[str, Any]: ...
    def sync(self, passages: Passages, allow_empty: bool = False, dry_run: bool = False) -> Dict[str, Any]: ...
    @overload
    def retrieve(self, query: str, method: str = "auto", k: int = 5, filter: Optional[Dict[str, Any]] = None, **params: Any) -> List[Result]: ...
    @overload
    def retrieve(
        self, query: Sequence[str], method: str = "auto", k: int = 5, **params: Any
    ) -> List[List[Result]]: ...
    def embed(self, texts: Union[str, Sequence[str]], kind: str = "passage") -> npt.NDArray[np.float32]: ...
    @property
    def path(self) -> Path: ...
    @property
    def embedder(self) -> str: ...
    @property
    def dim(self) -> int: ...
    @property
    def manifest(self) -> Dict[str, Any]: ...
    @property
    def ingest_report(self) -> Optional[Dict[str, Any]]: ...
    @property
    def graph_report(self) -> Optional[Dict[str, Any]]: ...
    def __len__(self) -> int: ...

def evaluate(
    index: Index,
    dataset: str,
    methods: List[str],
    ks: List[int],
    baseline: Optional[str] = None,
    limit: Optional[int] = None,
    simulated_judge: Optional[float] = None,
) -> Dict[str, Any]: ...
def fetch_model(name: str) -> str: ...
def methods() -> List[Tuple[str, str]]: ...
