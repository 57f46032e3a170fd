"""hoprag as a LlamaIndex retriever (needs ``llama-index-core``)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

try:
    from llama_index.core.base.base_retriever import BaseRetriever
    from llama_index.core.schema import (
        BaseNode,
        MetadataMode,
        NodeRelationship,
        NodeWithScore,
        QueryBundle,
        RelatedNodeInfo,
        TextNode,
    )
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError("hoprag.integrations.llama_index needs llama-index-core: pip install hoprag[llama-index]") from e

from .. import Index

__all__ = ["HopragRetriever"]

# Metadata keys hoprag sets on the nodes it returns; not stored as a passage's meta.
RESULT_KEYS = ("title", "rank", "method", "trace", "doc")


class HopragRetriever(BaseRetriever):
    """Retrieves with a hoprag index: one ``NodeWithScore`` per passage, best first; the
    node's id is the passage id, its ``ref_doc_id`` the passage's document, its text the
    passage text, its metadata the passage's ``meta`` plus ``title``, ``doc``, ``rank``,
    ``method`` (and the method's ``trace`` with ``include_trace=True``).

    Edits follow LlamaIndex's index API: ``insert(document)``, ``insert_nodes(nodes)``,
    ``delete_ref_doc(ref_doc_id)`` and ``delete_nodes(node_ids)``."""

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
            doc = r.doc or r.id
            metadata: Dict[str, Any] = dict(r.meta or {})
            metadata.update({"title": r.title, "doc": doc, "rank": r.rank, "method": r.method})
            if self._include_trace:
                metadata["trace"] = r.trace
            node = TextNode(id_=r.id, text=r.text, metadata=metadata,
                            relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=doc)})
            nodes.append(NodeWithScore(node=node, score=float(r.score)))
        return nodes

    def insert(self, document: BaseNode, **kwargs: Any) -> None:
        """Upserts a LlamaIndex ``Document`` as one passage whose id is the document's id
        (so ``delete_ref_doc(document.doc_id)`` removes it); its metadata is stored as the
        passage's ``meta`` (``title`` as its title)."""
        self.insert_nodes([document])

    def insert_nodes(self, nodes: Sequence[BaseNode], **kwargs: Any) -> None:
        """Upserts one passage per node (its ``node_id``); a node with a source document
        (``ref_doc_id``) is a passage of that document, and a document's passages are
        replaced together by the nodes of it given here."""
        rows = []
        for n in nodes:
            metadata = dict(n.metadata or {})
            row: Dict[str, Any] = {"id": n.node_id, "title": str(metadata.get("title") or ""),
                                   "text": n.get_content(metadata_mode=MetadataMode.NONE)}
            ref = n.ref_doc_id if n.source_node is not None else None
            if ref and ref != n.node_id:
                row["doc"] = ref
            meta = {k: v for k, v in metadata.items() if k not in RESULT_KEYS}
            if meta:
                row["meta"] = meta
            rows.append(row)
        self._index.upsert(rows)

    def delete_ref_doc(self, ref_doc_id: str, delete_from_docstore: bool = False, **kwargs: Any) -> None:
        """Deletes a document (all its passages). An unknown id raises ``hoprag.ConfigError``."""
        self._index.delete([ref_doc_id])

    def delete_nodes(self, node_ids: List[str], **kwargs: Any) -> None:
        """Deletes passages by id. An unknown id raises ``hoprag.ConfigError``, nothing deleted."""
        self._index.delete(list(node_ids))
