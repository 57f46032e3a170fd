-- hoprag's PostgreSQL store, schema version 4: the passage seeds' walk stored with its
-- graph.
--
-- The split walk (graph/split_ppr.rs) needs the passage seeds' walk solved on the
-- entities: an iteration over every passage-entity edge until each of the vectors'
-- columns converges, minutes at a million passages. It depends on the graph and the
-- passage vectors only, so the build solves it once and every server loads it with the
-- graph instead of solving it on its first query. The bytes are
-- `split_ppr::Solved::to_bytes` (f64, little-endian), in parts (a bytea value holds at
-- most 1 GB; smaller parts keep a COPY's memory bounded). Graphs written before have no
-- rows here: their servers solve it on first use, as before.

CREATE TABLE graph_walks (
    graph bigint NOT NULL REFERENCES graphs (id) ON DELETE CASCADE,
    part int NOT NULL CHECK (part >= 0),
    bytes bytea NOT NULL,
    PRIMARY KEY (graph, part)
);
