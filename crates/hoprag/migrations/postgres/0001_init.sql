-- hoprag's PostgreSQL store, schema version 1. Run by the store's migration runner
-- inside one transaction with search_path set to the store's schema (then public,
-- where the `vector` type usually lives).
--
-- A generation is one row of `generations`; `current` points at the live one and a
-- writer flips it in the same transaction that wrote the generation's rows, so a
-- reader sees a whole generation or the previous one.
--
-- Passages, vectors and postings live in tables per *build* (passages_b<N>,
-- postings_b<N>), created by the writer: the vector column is typed with the
-- embedder's dimension (pgvector's HNSW index needs a fixed dimension, and a
-- partitioned table cannot give its partitions different column types). A Replace
-- makes a new build; an Append adds rows to the base's build, and a generation of n
-- passages reads rows with idx < n only. The graph is stored per graph id in shared
-- tables (its vectors are never searched in SQL, so an untyped vector column does).

CREATE TABLE builds (
    id bigserial PRIMARY KEY,
    dim int NOT NULL CHECK (dim > 0),
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE graphs (
    id bigserial PRIMARY KEY,
    -- passages the graph covers (the passage_entities lists), entities and triples
    passages int NOT NULL,
    entities int NOT NULL,
    triples int NOT NULL,
    stats jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE generations (
    id bigserial PRIMARY KEY,
    build bigint NOT NULL REFERENCES builds (id) ON DELETE CASCADE,
    passages int NOT NULL CHECK (passages >= 0),
    -- analysed tokens over the generation's passages: BM25's average document length
    tokens bigint NOT NULL,
    graph bigint NULL REFERENCES graphs (id) ON DELETE CASCADE,
    manifest jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE current (
    singleton bool PRIMARY KEY DEFAULT true CHECK (singleton),
    generation bigint NOT NULL REFERENCES generations (id)
);

CREATE TABLE entities (
    graph bigint NOT NULL REFERENCES graphs (id) ON DELETE CASCADE,
    id int NOT NULL,
    name text NOT NULL,
    label text NOT NULL,
    vector vector NOT NULL,
    PRIMARY KEY (graph, id)
);

CREATE TABLE triples (
    graph bigint NOT NULL REFERENCES graphs (id) ON DELETE CASCADE,
    id int NOT NULL,
    passage int NOT NULL,
    subject text NOT NULL,
    predicate text NOT NULL,
    object text NOT NULL,
    -- both set or both null: the entities of subject and object
    subject_entity int NULL,
    object_entity int NULL,
    vector vector NOT NULL,
    PRIMARY KEY (graph, id),
    CHECK ((subject_entity IS NULL) = (object_entity IS NULL))
);

CREATE TABLE edges (
    graph bigint NOT NULL REFERENCES graphs (id) ON DELETE CASCADE,
    -- the position in the graph's edge list, kept so that PPR sums in the same order
    ord int NOT NULL,
    a int NOT NULL,
    b int NOT NULL,
    weight real NOT NULL,
    kind text NOT NULL CHECK (kind IN ('relation', 'synonym')),
    PRIMARY KEY (graph, ord)
);

CREATE TABLE passage_entities (
    graph bigint NOT NULL REFERENCES graphs (id) ON DELETE CASCADE,
    passage int NOT NULL,
    ord int NOT NULL,
    entity int NOT NULL,
    PRIMARY KEY (graph, passage, ord)
);
