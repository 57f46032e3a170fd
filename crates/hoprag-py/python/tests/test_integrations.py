"""The LangChain and LlamaIndex retrievers, against the real packages."""

from __future__ import annotations

import pytest


def test_langchain_retriever(small_index):
    pytest.importorskip("langchain_core")
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever

    from hoprag.integrations.langchain import HopragRetriever

    retriever = HopragRetriever(index=small_index, method="bm25", k=2)
    assert isinstance(retriever, BaseRetriever)
    docs = retriever.invoke("Which river flows through Paris?")
    assert all(isinstance(d, Document) for d in docs)
    assert [d.metadata["id"] for d in docs] == ["seine", "paris"]
    assert docs[0].page_content.startswith("The Seine is a river")
    assert docs[0].metadata["title"] == "Seine" and docs[0].metadata["rank"] == 1
    assert docs[0].metadata["score"] > docs[1].metadata["score"]
    # Batched through the framework's own API, with the trace on request.
    traced = HopragRetriever(index=small_index, method="dense", k=1, include_trace=True)
    batch = traced.batch(["capital of Germany", "a hot drink"])
    assert [b[0].metadata["id"] for b in batch] == ["berlin", "tea"]
    assert batch[0][0].metadata["trace"]["steps"]


def test_llama_index_retriever(small_index):
    pytest.importorskip("llama_index.core")
    from llama_index.core.base.base_retriever import BaseRetriever
    from llama_index.core.schema import NodeWithScore

    from hoprag.integrations.llama_index import HopragRetriever

    retriever = HopragRetriever(small_index, method="bm25", k=2)
    assert isinstance(retriever, BaseRetriever)
    nodes = retriever.retrieve("Which river flows through Paris?")
    assert all(isinstance(n, NodeWithScore) for n in nodes)
    assert [n.node.node_id for n in nodes] == ["seine", "paris"]
    assert nodes[0].node.get_content().startswith("The Seine is a river")
    assert nodes[0].node.metadata["title"] == "Seine"
    assert nodes[0].score > nodes[1].score
    expected = small_index.retrieve("Which river flows through Paris?", method="bm25", k=2)
    assert [n.score for n in nodes] == pytest.approx([r.score for r in expected])
