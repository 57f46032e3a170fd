-- hoprag's PostgreSQL store, schema version 3: BM25 through tantivy on both stores.
--
-- BM25 in SQL (postings_b<N>, version 1) aggregates every posting of every query term:
-- fine at thousands of passages, 627 ms a query at a million (docs/scale.md), where
-- tantivy's block-max WAND skips most postings and answers in a few milliseconds. So a
-- build now keeps its tantivy index's files here, and every server loads them into
-- memory when it opens a generation: the lexical index is searched where it is fast,
-- and the database is still the one place an index lives.
--
-- Segment files never change once written (each segment's files are named by its id),
-- so an append stores only its new segments; a generation lists the files it reads.
-- A file is stored in parts (a bytea value holds at most 1 GB, and smaller parts keep
-- a COPY's memory bounded).

CREATE TABLE lexical_files (
    build bigint NOT NULL REFERENCES builds (id) ON DELETE CASCADE,
    name text NOT NULL,
    part int NOT NULL CHECK (part >= 0),
    bytes bytea NOT NULL,
    PRIMARY KEY (build, name, part)
);

-- The generation's tantivy index: {"meta": tantivy's meta.json (it differs per
-- generation, so it is kept here whole), "files": [{"name": …, "bytes": …}, …]}, the
-- build's lexical_files it reads. NULL for generations written before version 3, which
-- BM25 in SQL over postings_b<N> still serves.
ALTER TABLE generations ADD COLUMN lexical jsonb NULL;
