"""hoprag as a LangChain retriever (needs ``langchain-core``)."""

from __future__ import annotations

import uuid
from typing import Any, Dict, Iterable, List, Optional, Sequence

try:
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError("hoprag.integrations.langchain needs langchain-core: pip install hoprag[langchain]") from e

from pydantic import ConfigDict, Field

from .. import Index

__all__ = ["HopragRetriever"]

# Metadata keys hoprag sets on the Documents it returns; not stored as a passage's meta.
RESULT_KEYS = ("id", "doc", "title", "score", "rank", "method", "trace")


class HopragRetriever(BaseRetriever):
    """Retrieves with a hoprag index: one ``Document`` per passage, best first, its
    ``page_content`` the passage text and its metadata the passage's ``meta`` plus ``id``,
    ``doc`` (its document: the id to delete it by), ``title``, ``score``, ``rank``,
    ``method`` (and the method's ``trace`` with ``include_trace=True``).

    Edits follow LangChain's ``VectorStore`` API: ``add_documents(documents, ids=None)``,
    ``add_texts(texts, metadatas=None, ids=None)`` and ``delete(ids)``."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    index: Index
    method: str = "auto"
    k: int = 5
    params: Dict[str, Any] = Field(default_factory=dict)
    include_trace: bool = False

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> List[Document]:
        results = self.index.retrieve(query, method=self.method, k=self.k, **self.params)
        docs = []
        for r in results:
            metadata = dict(r.meta or {})
            metadata.update(
                {"id": r.id, "doc": r.doc or r.id, "title": r.title, "score": r.score, "rank": r.rank,
                 "method": r.method}
            )
            if self.include_trace:
                metadata["trace"] = r.trace
            docs.append(Document(page_content=r.text, metadata=metadata, id=r.id))
        return docs

    def add_documents(self, documents: Sequence[Document], ids: Optional[Sequence[str]] = None,
                      **kwargs: Any) -> List[str]:
        """Upserts one passage per ``Document`` and returns their ids: ``ids[i]``, else the
        Document's ``id``, else its ``metadata["id"]``, else a new UUID. A passage with an
        existing id replaces it. ``metadata["title"]`` is the title, ``metadata["doc"]``
        the document it belongs to (a document's passages are replaced together); the
        rest of the metadata is stored as the passage's ``meta`` (without the keys hoprag
        sets on results: score, rank, method, trace)."""
        if ids is not None and len(ids) != len(documents):
            raise ValueError(f"ids: {len(ids)} ids for {len(documents)} documents")
        rows, out = [], []
        for i, d in enumerate(documents):
            metadata = dict(d.metadata or {})
            pid = (ids[i] if ids is not None else None) or d.id or metadata.get("id") or str(uuid.uuid4())
            pid = str(pid)
            row: Dict[str, Any] = {"id": pid, "title": str(metadata.get("title") or ""), "text": d.page_content}
            doc = metadata.get("doc")
            if doc and str(doc) != pid:
                row["doc"] = str(doc)
            meta = {k: v for k, v in metadata.items() if k not in RESULT_KEYS}
            if meta:
                row["meta"] = meta
            rows.append(row)
            out.append(pid)
        self.index.upsert(rows)
        return out

    def add_texts(self, texts: Iterable[str], metadatas: Optional[List[Dict[str, Any]]] = None,
                  ids: Optional[Sequence[str]] = None, **kwargs: Any) -> List[str]:
        """As ``add_documents``, for texts with their metadata."""
        texts = list(texts)
        metadatas = metadatas or [{} for _ in texts]
        if len(metadatas) != len(texts):
            raise ValueError(f"metadatas: {len(metadatas)} for {len(texts)} texts")
        return self.add_documents([Document(page_content=t, metadata=m) for t, m in zip(texts, metadatas)], ids=ids)

    def delete(self, ids: Optional[Sequence[str]] = None, **kwargs: Any) -> Optional[bool]:
        """Deletes documents or passages by id (``Document.id`` or ``metadata["doc"]`` of a
        result). An unknown id raises ``hoprag.ConfigError`` and nothing is deleted."""
        if ids is None:
            raise ValueError("ids: name the documents or passages to delete (hoprag does not delete everything "
                             "without ids; Index.sync([], allow_empty=True) does)")
        self.index.delete(list(ids))
        return True
