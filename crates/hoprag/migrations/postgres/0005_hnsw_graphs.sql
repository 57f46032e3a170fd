-- hoprag's PostgreSQL store, schema version 5: the HNSW graph built in the process, as
-- on the folder store, and kept here.
--
-- Dense HNSW search went through pgvector's index (`ORDER BY embedding <=> q`): a round
-- trip and a graph walk over 8 kB pages per query, 25 ms p50 at a million passages
-- (docs/scale.md), where the folder store's usearch graph answers in about 4 ms, its
-- candidates re-scored exactly on the f32 vectors every server loads anyway. So a build now makes
-- the same usearch graph (the manifest's `hnsw` settings and quantization), stores its
-- serialized bytes here, and every server loads them when it opens a generation.
-- pgvector's HNSW index is no longer built; the `embedding` column stays, for SQL.
--
-- An append extends the base's graph and stores the whole graph again (usearch rewrites
-- its neighbour lists in place, so nothing is shared between generations): the rows are
-- keyed by the build and the passages the graph holds, which a generation names in
-- `generations.hnsw`. The writer drops graphs no kept generation names. A file is
-- stored in parts (a bytea value holds at most 1 GB; smaller parts keep a COPY's memory
-- bounded).

CREATE TABLE hnsw_graphs (
    build bigint NOT NULL REFERENCES builds (id) ON DELETE CASCADE,
    passages int NOT NULL CHECK (passages >= 0),
    part int NOT NULL CHECK (part >= 0),
    bytes bytea NOT NULL,
    PRIMARY KEY (build, passages, part)
);

-- The generation's graph: {"passages": n, "bytes": size}, the hnsw_graphs rows of its
-- build it reads. NULL for generations without HNSW and for those written before
-- version 5, which pgvector's index still serves.
ALTER TABLE generations ADD COLUMN hnsw jsonb NULL;
