"""hoprag as a LlamaIndex retriever (needs ``llama-index-core``)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

try:
    from llama_index.core.base.base_retriever import BaseRetriever
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError("hoprag.integrations.llama_index needs llama-index-core: pip install hoprag[llama-index]") from e

from .. import Index

__all__ = ["HopragRetriever"]


class HopragRetriever(BaseRetriever):
    """Retrieves with a hoprag index: one ``NodeWithScore`` per passage, best first; the
    node's id is the passage id, its text the passage text, its metadata ``title``,
    ``rank``, ``method`` (and the method's ``trace`` with ``include_trace=True``)."""

    def __init__(
        self,
        index: Index,
        method: str = "auto",
        k: int = 5,
        params: Optional[Dict[str, Any]] = None,
        include_trace: bool = False,
        **kwargs: Any,
    ):
        if not isinstance(index, Index):
            raise TypeError(f"index: expected hoprag.Index, found {type(index).__name__}")
        self._index = index
        self._method = method
        self._k = k
        self._params = dict(params or {})
        self._include_trace = include_trace
        super().__init__(**kwargs)

    def _retrieve(self, query_bundle: QueryBundle) -> List[NodeWithScore]:
        results = self._index.retrieve(query_bundle.query_str, method=self._method, k=self._k, **self._params)
        nodes = []
        for r in results:
            metadata: Dict[str, Any] = {"title": r.title, "rank": r.rank, "method": r.method}
            if self._include_trace:
                metadata["trace"] = r.trace
            node = TextNode(id_=r.id, text=r.text, metadata=metadata)
            nodes.append(NodeWithScore(node=node, score=float(r.score)))
        return nodes
