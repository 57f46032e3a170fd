"""hoprag as a LangChain retriever (needs ``langchain-core``)."""

from __future__ import annotations

from typing import Any, Dict, List

try:
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError("hoprag.integrations.langchain needs langchain-core: pip install hoprag[langchain]") from e

from pydantic import ConfigDict, Field

from .. import Index

__all__ = ["HopragRetriever"]


class HopragRetriever(BaseRetriever):
    """Retrieves with a hoprag index: one ``Document`` per passage, best first, its
    ``page_content`` the passage text and its metadata ``id``, ``title``, ``score``,
    ``rank``, ``method`` (and the method's ``trace`` with ``include_trace=True``)."""

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
            metadata = {"id": r.id, "title": r.title, "score": r.score, "rank": r.rank, "method": r.method}
            if self.include_trace:
                metadata["trace"] = r.trace
            docs.append(Document(page_content=r.text, metadata=metadata, id=r.id))
        return docs
