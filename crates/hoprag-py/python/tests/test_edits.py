"""Edits from Python: upsert, delete and sync with their counts, all or nothing, and the
passages' document and metadata on every result; then the same through the LangChain
and LlamaIndex edit methods."""

from __future__ import annotations

import pytest

import hoprag

from conftest import PASSAGES, need_model

MILL = [
    {"id": "notes/a.md#0", "doc": "notes/a.md", "title": "Grelwick Mill",
     "text": "The Grelwick mill on the Pardle stream ground oats for the abbey of Sunwold.",
     "meta": {"url": "https://example.org/a", "year": 1803}},
    {"id": "notes/a.md#1", "doc": "notes/a.md", "title": "Grelwick Mill",
     "text": "Its miller, Ossian Threave, kept bees beside the Grelwick mill race."},
]
COUNTS = ("documents_added", "documents_replaced", "documents_deleted", "documents_unchanged",
          "passages_added", "passages_removed", "passages_total")


def fresh(tmp_path) -> hoprag.Index:
    need_model("minilm")
    return hoprag.Index.build(PASSAGES, tmp_path / "index")


def texts(index, query, methods=("bm25", "dense", "ppr", "auto"), k=7):
    return [r.text for m in methods for r in index.retrieve(query, method=m, k=k)]


def test_upsert_delete_and_sync_with_counts(tmp_path):
    index = fresh(tmp_path)
    generation = index.manifest

    dry = index.upsert(MILL, dry_run=True)
    assert set(COUNTS) <= set(dry) and dry["dry_run"] and not dry["changed"] and dry["generation"] is None
    assert (dry["documents_added"], dry["passages_added"], dry["passages_total"]) == (1, 2, 7)
    assert len(index) == 5 and index.manifest == generation, "a dry run writes nothing"

    added = index.upsert(MILL)
    assert added["changed"] and added["generation"] and (added["documents_added"], added["passages_total"]) == (1, 7)
    assert len(index) == 7
    top = index.retrieve("Who kept bees beside the mill race?", method="bm25", k=2)
    assert top[0].id == "notes/a.md#1" and top[0].doc == "notes/a.md" and top[0].meta is None
    first = index.retrieve("What did the Grelwick mill grind for the abbey?", method="dense", k=1)[0]
    assert first.id == "notes/a.md#0" and first.meta == {"url": "https://example.org/a", "year": 1803}
    plain = index.retrieve("Which river flows through Paris?", method="bm25", k=1)[0]
    assert plain.id == "seine" and plain.doc is None and plain.meta is None
    # The graph methods see the new document at once.
    for method in ("ppr", "phasegraph", "auto"):
        assert "notes/a.md#1" in [r.id for r in index.retrieve("Who kept bees at Grelwick?", method=method, k=3)]

    # An update in place: the old text is gone from every method's answers.
    new_seine = "The Seine is a river that reaches the English Channel at Le Havre."
    updated = index.upsert([{"id": "seine", "title": "Seine", "text": new_seine}])
    assert (updated["documents_replaced"], updated["passages_total"]) == (1, 7)
    served = texts(index, "Which river flows through northern France and Paris?")
    assert new_seine in served and not any("northern France that flows" in t for t in served)
    assert index.add([{"id": "seine", "title": "Seine", "text": new_seine}])["changed"] is False, "add = upsert"

    # All or nothing: an unusable entry names itself, and nothing changes.
    with pytest.raises(hoprag.InputError, match=r"passages\[1\]: passage has no text"):
        index.upsert([{"id": "x", "text": "Fine."}, {"text": "   "}])
    with pytest.raises(hoprag.InputError, match=r"passages\[0\]: field `doc` is empty"):
        index.upsert([{"doc": "", "text": "Fine."}])
    assert len(index) == 7

    # Deletes: an unknown id is named and nothing goes; a passage, then a document.
    with pytest.raises(hoprag.ConfigError, match='"no/such#id"'):
        index.delete(["seine", "no/such#id"])
    assert len(index) == 7
    assert index.delete("notes/a.md#1", dry_run=True)["passages_removed"] == 1 and len(index) == 7
    assert index.delete(["notes/a.md#1"])["passages_total"] == 6
    gone = index.delete(["notes/a.md"])
    assert (gone["documents_deleted"], gone["passages_total"]) == (1, 5)
    assert not any("Grelwick" in t for t in texts(index, "Grelwick mill oats bees"))
    with pytest.raises(TypeError, match="ids"):
        index.delete([1, 2])

    # Sync: an empty corpus is refused unless allowed; back to the original passages.
    with pytest.raises(hoprag.ConfigError, match="allow_empty"):
        index.sync([])
    dry = index.sync(PASSAGES, dry_run=True)
    assert (dry["documents_replaced"], dry["documents_unchanged"], dry["changed"]) == (1, 4, False)
    synced = index.sync(PASSAGES + [{"id": "owl", "title": "Owls", "text": "Owls hunt at night."}])
    assert (synced["documents_replaced"], synced["documents_added"], synced["passages_total"]) == (1, 1, 6)
    reopened = hoprag.Index.open(index.path)
    assert len(reopened) == 6
    assert reopened.retrieve("Which river flows through Paris?", method="bm25", k=1)[0].text == PASSAGES[2]["text"]


def test_langchain_edits(tmp_path):
    pytest.importorskip("langchain_core")
    from langchain_core.documents import Document

    from hoprag.integrations.langchain import HopragRetriever

    index = fresh(tmp_path)
    retriever = HopragRetriever(index=index, method="bm25", k=2)
    ids = retriever.add_documents([
        Document(page_content="Owls hunt small rodents at night.", metadata={"title": "Owls", "source": "zoo.md"}),
        Document(page_content="Bats find insects by echolocation.", metadata={"title": "Bats"}, id="bats"),
    ])
    assert ids[1] == "bats" and len(ids[0]) == 36 and len(index) == 7
    owl = retriever.invoke("Which bird hunts rodents at night?")[0]
    assert owl.id == ids[0] and owl.page_content.startswith("Owls hunt")
    assert owl.metadata["source"] == "zoo.md" and owl.metadata["title"] == "Owls"
    assert owl.metadata["id"] == owl.metadata["doc"] == ids[0] and owl.metadata["score"] > 0
    # A retrieved Document written back is unchanged: result keys are not stored as meta.
    retriever.add_documents([owl])
    again = index.retrieve("Which bird hunts rodents at night?", method="bm25", k=1)[0]
    assert again.meta == {"source": "zoo.md"} and len(index) == 7
    # Updated by id, then deleted by id.
    retriever.add_texts(["Bats sleep upside down in caves."], metadatas=[{"title": "Bats"}], ids=["bats"])
    assert "bats" not in [r.id for r in index.retrieve("echolocation insects", method="bm25", k=7)]
    assert index.retrieve("Where do bats sleep?", method="bm25", k=1)[0].text == "Bats sleep upside down in caves."
    assert retriever.delete([ids[0], "bats"]) is True and len(index) == 5
    with pytest.raises(hoprag.ConfigError, match="bats"):
        retriever.delete(["bats"])
    with pytest.raises(ValueError):
        retriever.delete()


def test_llama_index_edits(tmp_path):
    pytest.importorskip("llama_index.core")
    from llama_index.core import Document
    from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode

    from hoprag.integrations.llama_index import HopragRetriever

    index = fresh(tmp_path)
    retriever = HopragRetriever(index, method="bm25", k=2)
    retriever.insert(Document(text="Owls hunt small rodents at night.", doc_id="owls", metadata={"title": "Owls", "n": 1}))
    source = {NodeRelationship.SOURCE: RelatedNodeInfo(node_id="bats.md")}
    retriever.insert_nodes([
        TextNode(id_="bats.md#0", text="Bats find insects by echolocation.", relationships=source),
        TextNode(id_="bats.md#1", text="Bats sleep upside down in caves.", relationships=source),
    ])
    assert len(index) == 8
    owl = retriever.retrieve("Which bird hunts rodents at night?")[0]
    assert owl.node.node_id == "owls" and owl.node.ref_doc_id == "owls"
    assert owl.node.metadata["n"] == 1 and owl.node.metadata["title"] == "Owls"
    bat = retriever.retrieve("Where do bats sleep?")[0]
    assert bat.node.node_id == "bats.md#1" and bat.node.ref_doc_id == "bats.md" and bat.node.metadata["doc"] == "bats.md"
    retriever.delete_nodes(["bats.md#0"])
    assert len(index) == 7
    retriever.delete_ref_doc("bats.md")
    retriever.delete_ref_doc("owls")
    assert len(index) == 5
    with pytest.raises(hoprag.ConfigError, match="owls"):
        retriever.delete_ref_doc("owls")
