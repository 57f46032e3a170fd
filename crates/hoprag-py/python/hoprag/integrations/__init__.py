"""Retrievers for RAG frameworks, each an optional extra:

- :mod:`hoprag.integrations.langchain`: ``HopragRetriever``, a LangChain ``BaseRetriever``
  (``pip install hoprag[langchain]``);
- :mod:`hoprag.integrations.llama_index`: ``HopragRetriever``, a LlamaIndex
  ``BaseRetriever`` (``pip install hoprag[llama-index]``).
"""
