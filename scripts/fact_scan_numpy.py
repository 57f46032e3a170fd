"""The peer for fact matching: numpy's exact query-to-fact scan, as HippoRAG 2 scores it
(one matrix-vector product over every fact vector, min-max over all facts, the top facts),
one question at a time, on an index's fact vectors.

Setup: any Python with numpy (the peers' environment, ~/.cache/hoprag-peers, has it).
Threads: set OPENBLAS_NUM_THREADS (and OMP_NUM_THREADS) to hoprag's thread count.

    hoprag embed -q --query --batch 1 --out questions.npy < questions.txt
    OPENBLAS_NUM_THREADS=2 python scripts/fact_scan_numpy.py \
        IDX/$(cat IDX/CURRENT)/graph/triples.f32 questions.npy [top]
"""

import sys
import time

import numpy as np


def main() -> None:
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    facts_path, queries_path = sys.argv[1], sys.argv[2]
    top = int(sys.argv[3]) if len(sys.argv) == 4 else 10
    queries = np.load(queries_path).astype(np.float32)
    dim = queries.shape[1]
    raw = np.fromfile(facts_path, dtype=np.float32)
    if raw.size % dim:
        sys.exit(f"{facts_path}: {raw.size} floats is not a whole number of {dim}-dimensional rows")
    facts = raw.reshape(-1, dim)
    # An edited index shares its vector file with the generations before it: its rows are
    # where the `.rows` list (the file's length in rows, then each row's place) says.
    try:
        listed = np.fromfile(facts_path + ".rows", dtype="<u4")
        facts = facts[: listed[0]][listed[1:]]
    except FileNotFoundError:
        pass
    times = []
    # The first pass warms the caches and is not timed.
    for rep in range(6):
        for q in queries:
            start = time.perf_counter()
            scores = facts @ q
            lo, hi = scores.min(), scores.max()
            best = np.argpartition(-scores, top)[:top]
            best = best[np.argsort(-scores[best], kind="stable")]
            _normalised = (scores[best] - lo) / (hi - lo)
            if rep > 0:
                times.append((time.perf_counter() - start) * 1e3)
    print(
        f"numpy fact scan: {len(facts)} facts, {len(queries)} questions x 5 passes, "
        f"p50 {np.median(times):.2f} ms, mean {np.mean(times):.2f} ms"
    )


if __name__ == "__main__":
    main()
