-- hoprag's PostgreSQL store, schema version 8: an edit written as a delta on the last
-- whole generation (crates/hoprag/src/store/delta.rs), so that it writes rows in
-- proportion to what it changed, not to the corpus.
--
-- A whole generation's passages, vectors, HNSW graph and entity graph are rows of its
-- build (passages_b<N>, hnsw_graphs, hnsw_slots) and of its graph (graphs and the
-- tables keyed by graph id). A delta generation is a build of its own with no passages
-- table: its tantivy files (lexical_files, as every edit writes them), one `deltas` row
-- naming the whole generation it is a delta on (its base: build, passage count, HNSW
-- graph record, graph) with the base rows it no longer holds, and the passages it holds
-- that the base does not, with their vectors (`delta_passages`). Readers apply the
-- delta in memory: the base's passages less the removed rows, merged with the added
-- ones in canonical order; the base's HNSW graph updated as an edit updates it; the
-- entity graph derived from the base's, unless the generation stores one of its own
-- (generations.graph, set by a graph written for it: a walk stored, `hoprag graph`).
--
-- The delta is net: an edit of a delta generation writes a new delta on the same base.
-- Generations of a delta build (a graph attached to it) share its `deltas` row. The
-- writer keeps the base's build, HNSW rows and graph while a kept generation's delta
-- names them (the foreign keys below refuse to drop them otherwise).

CREATE TABLE deltas (
    build bigint PRIMARY KEY REFERENCES builds (id) ON DELETE CASCADE,
    -- the whole generation the delta is on: its build (rows idx < base_passages of
    -- passages_b<base_build>), its analysed tokens, HNSW graph record (the hnsw_graphs
    -- rows of base_build keyed by its "passages"; NULL without HNSW) and graph
    base_build bigint NOT NULL REFERENCES builds (id),
    base_passages int NOT NULL CHECK (base_passages >= 0),
    base_tokens bigint NOT NULL,
    base_hnsw jsonb NULL,
    base_graph bigint NULL REFERENCES graphs (id),
    -- rows of the base the generation no longer holds, ascending
    removed int[] NOT NULL
);
CREATE INDEX deltas_base_build ON deltas (base_build);
CREATE INDEX deltas_base_graph ON deltas (base_graph);

-- The passages a delta adds, in canonical order (ord), each with its row in the
-- generation (idx) and its vector (untyped: builds of any dimension share the table).
CREATE TABLE delta_passages (
    build bigint NOT NULL REFERENCES deltas (build) ON DELETE CASCADE,
    ord int NOT NULL CHECK (ord >= 0),
    idx int NOT NULL CHECK (idx >= 0),
    id text NOT NULL,
    title text NOT NULL,
    text text NOT NULL,
    tokens int NOT NULL,
    embedding vector NOT NULL,
    doc text NULL,
    meta json NULL,
    PRIMARY KEY (build, ord)
);
