-- Facts: a triple text stated in many passages is embedded once. A graph written from
-- now on keeps one vector per fact in `facts` and names it in `triples.fact`; a graph
-- written before keeps its vectors in `triples.vector` (each triple its own fact).
CREATE TABLE facts (
    graph bigint NOT NULL REFERENCES graphs (id) ON DELETE CASCADE,
    id int NOT NULL,
    vector vector NOT NULL,
    PRIMARY KEY (graph, id)
);

ALTER TABLE triples ADD COLUMN fact int NULL;
ALTER TABLE triples ALTER COLUMN vector DROP NOT NULL;
ALTER TABLE triples ADD CHECK ((fact IS NULL) <> (vector IS NULL));
