#!/usr/bin/env python3
"""Derives an `embeddinggemma` index with other settings from one already embedded, without
embedding again: for measurements only (docs/embeddinggemma.md).

  python3 scripts/derive_gemma_index.py SRC DST EMBEDDER_ID

SRC is a folder index (no graph) built with `--embedder embeddinggemma[:...]`; DST gets a copy whose
manifest names EMBEDDER_ID. Two settings can be derived because they do not change what a
*passage* vector is computed from:
- the query prompt (`query=qa|retrieval`): only questions are embedded with it;
- the Matryoshka dimension (`dim=512|256|128`): the embedder takes the first `dim` values of the
  768-d vector and normalises them again, which this script does to the stored vectors (so the
  result equals `hoprag index --embedder ...,dim=N` up to float rounding).
`title=` changes the passages' text, so it cannot be derived: index again for that.
"""
import json, os, shutil, struct, sys


def main():
    src, dst, new_id = sys.argv[1], sys.argv[2], sys.argv[3]
    settings = dict(s.split("=", 1) for s in new_id.partition(":")[2].split(",") if s)
    dim = int(settings.get("dim", 768))
    if os.path.exists(dst):
        shutil.rmtree(dst)
    shutil.copytree(src, dst)
    gen = os.path.join(dst, open(os.path.join(dst, "CURRENT")).read().strip())
    manifest_path = os.path.join(gen, "manifest.json")
    manifest = json.load(open(manifest_path))
    if not manifest["embedder"]["id"].startswith("embeddinggemma") or manifest.get("graph"):
        sys.exit("SRC must be an embeddinggemma index without a graph")
    old_settings = dict(s.split("=", 1) for s in manifest["embedder"]["id"].partition(":")[2].split(",") if s)
    if old_settings.get("title", "passage") != settings.get("title", "passage"):
        sys.exit("title= changes the passage vectors: index again")
    old_dim = manifest["embedder"]["dim"]
    if dim > old_dim:
        sys.exit(f"cannot widen {old_dim} to {dim}")
    vec_path = os.path.join(gen, "vectors.f32")
    raw = open(vec_path, "rb").read()
    n = len(raw) // (4 * old_dim)
    out = bytearray()
    for i in range(n):
        v = struct.unpack_from(f"<{dim}f", raw, i * 4 * old_dim)
        norm = sum(x * x for x in v) ** 0.5 or 1.0
        out += struct.pack(f"<{dim}f", *(x / norm for x in v))
    # The file is a hard link shared with SRC's generation: replace it, never write through it.
    os.remove(vec_path)
    open(vec_path, "wb").write(out)
    manifest["embedder"] = {"id": new_id, "dim": dim}
    json.dump(manifest, open(manifest_path, "w"), indent=2)
    print(f"{dst}: {n} passages, {new_id} ({dim} dimensions)")


if __name__ == "__main__":
    main()
