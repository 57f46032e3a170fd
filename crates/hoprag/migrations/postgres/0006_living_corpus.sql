-- hoprag's PostgreSQL store, schema version 6: a living corpus (edits: upsert, delete,
-- sync), which every generation now writes as a new build.
--
-- Passages carry the document they belong to and the metadata their source gave them.
-- Each build's passages table gets two columns, NULL for the passages of builds made
-- before (a passage that is a document of its own, without metadata, as they were):
--   doc   text  the document's id
--   meta  json  a JSON object. `json`, not `jsonb`: kept as written (key order,
--               numbers), so a passage reads back exactly as its source gave it, as on
--               the folder store (the corpus checksum hashes the object in its order).
-- New builds create their tables with both columns (store/postgres/writer.rs).
DO $$
DECLARE
    b bigint;
BEGIN
    FOR b IN SELECT id FROM builds ORDER BY id LOOP
        IF to_regclass('passages_b' || b) IS NOT NULL THEN
            EXECUTE format('ALTER TABLE %I ADD COLUMN doc text NULL, ADD COLUMN meta json NULL',
                           'passages_b' || b);
        END IF;
    END LOOP;
END
$$;

-- A graph keeps each passage's entity mentions (also those in no triple) and the
-- options it was built with: with its triples, all an edit needs to rebuild the graph
-- of the passages it keeps without extracting them again, as a fresh build would.
--   graphs.mentions  how many passages the mention lists cover; NULL for graphs
--                    written before, which kept none (an edit then extracts a
--                    heuristic graph's passages again, and refuses any other graph
--                    until it is rebuilt, as for a folder graph of that age)
--   graphs.options   GraphOptions as JSON; NULL before (the defaults, as a folder graph
--                    of that age reads)
--   passage_mentions one row per passage with mentions, in the extraction's order
ALTER TABLE graphs ADD COLUMN mentions int NULL CHECK (mentions >= 0);
ALTER TABLE graphs ADD COLUMN options jsonb NULL;

CREATE TABLE passage_mentions (
    graph bigint NOT NULL REFERENCES graphs (id) ON DELETE CASCADE,
    passage int NOT NULL CHECK (passage >= 0),
    mentions text[] NOT NULL,
    PRIMARY KEY (graph, passage)
);
