-- hoprag's PostgreSQL store, schema version 7: an edit updates the HNSW graph in place.
--
-- Passages are kept in canonical order, so an edit that adds or removes one shifts the
-- rows of every later passage; a graph keyed by row had to be rebuilt from scratch by
-- every edit (minutes at a million passages). The graph is now keyed by slot: an edit
-- removes the removed passages' slots, inserts only the new passages (under free
-- slots), and stores the slot → row table beside the graph, here, in parts keyed as the
-- graph is. `generations.hnsw` gains "slots": the table's size in bytes; a generation
-- without it (every one written before, and any whose graph was built from scratch)
-- reads its graph with slot = row.

CREATE TABLE hnsw_slots (
    build bigint NOT NULL REFERENCES builds (id) ON DELETE CASCADE,
    passages int NOT NULL CHECK (passages >= 0),
    part int NOT NULL CHECK (part >= 0),
    bytes bytea NOT NULL,
    PRIMARY KEY (build, passages, part)
);
