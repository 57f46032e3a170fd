//! The entity graph in tables keyed by graph id: written with binary COPY, read back
//! whole (PPR runs in the hoprag process).

use std::sync::Arc;

use postgres::binary_copy::{BinaryCopyInWriter, BinaryCopyOutIter, BinaryCopyOutRow};
use postgres::fallible_iterator::FallibleIterator;
use postgres::types::{ToSql, Type};
use postgres::GenericClient;

use super::{db_err, vector_type};
use crate::error::{Error, Result};
use crate::graph::split_ppr::Solved;
use crate::graph::{Edge, EdgeKind, EntityGraph, GraphOptions, GraphParts, GraphStats, Name, Triple};
use crate::index::Matrix;

/// Writes `graph` under a new graph id and returns the id.
pub(crate) fn write(
    client: &mut impl GenericClient,
    graph: &EntityGraph,
    walk: Option<&Solved>,
    vector: &Type,
    location: &str,
) -> Result<i64> {
    let err = db_err(location, "writing the graph");
    let bad = |m: String| Error::index(location, format!("the graph to store is inconsistent: {m}"));
    if graph.labels.len() != graph.entities.len() || graph.entity_vectors.rows() != graph.entities.len() {
        return Err(bad(format!(
            "{} entities, {} labels, {} entity vectors",
            graph.entities.len(),
            graph.labels.len(),
            graph.entity_vectors.rows()
        )));
    }
    if graph.triple_facts.len() != graph.triples.len() || graph.triple_entities.len() != graph.triples.len() {
        return Err(bad(format!(
            "{} triples, {} triple facts, {} triple entity pairs",
            graph.triples.len(),
            graph.triple_facts.len(),
            graph.triple_entities.len()
        )));
    }
    let stats = serde_json::to_string(&graph.stats).map_err(|e| Error::Other(e.to_string()))?;
    let options = serde_json::to_string(&graph.options).map_err(|e| Error::Other(e.to_string()))?;
    let id: i64 = client
        .query_one(
            "INSERT INTO graphs (passages, entities, triples, stats, mentions, options) \
             VALUES ($1, $2, $3, $4::text::jsonb, $5, $6::text::jsonb) RETURNING id",
            &[
                &(graph.passage_entities.len() as i32),
                &(graph.entities.len() as i32),
                &(graph.triples.len() as i32),
                &stats,
                &(graph.mentions.len() as i32),
                &options,
            ],
        )
        .map_err(&err)?
        .get(0);

    let copy = "COPY entities (graph, id, name, label, vector) FROM STDIN (FORMAT binary)";
    let types = [Type::INT8, Type::INT4, Type::TEXT, Type::TEXT, vector.clone()];
    let mut w = BinaryCopyInWriter::new(client.copy_in(copy).map_err(&err)?, &types);
    for (i, (name, label)) in graph.entities.iter().zip(&graph.labels).enumerate() {
        let v = pgvector::Vector::from(graph.entity_vectors.row(i as u32).to_vec());
        let row: [&(dyn ToSql + Sync); 5] = [&id, &(i as i32), name, label, &v];
        w.write(&row).map_err(&err)?;
    }
    w.finish().map_err(&err)?;

    let copy = "COPY facts (graph, id, vector) FROM STDIN (FORMAT binary)";
    let mut w = BinaryCopyInWriter::new(client.copy_in(copy).map_err(&err)?, &[Type::INT8, Type::INT4, vector.clone()]);
    for f in 0..graph.fact_vectors.rows() as u32 {
        let v = pgvector::Vector::from(graph.fact_vectors.row(f).to_vec());
        let row: [&(dyn ToSql + Sync); 3] = [&id, &(f as i32), &v];
        w.write(&row).map_err(&err)?;
    }
    w.finish().map_err(&err)?;

    let copy = "COPY triples (graph, id, passage, subject, predicate, object, subject_entity, object_entity, fact) \
                FROM STDIN (FORMAT binary)";
    let types =
        [Type::INT8, Type::INT4, Type::INT4, Type::TEXT, Type::TEXT, Type::TEXT, Type::INT4, Type::INT4, Type::INT4];
    let mut w = BinaryCopyInWriter::new(client.copy_in(copy).map_err(&err)?, &types);
    for (i, ((t, ends), &fact)) in graph.triples.iter().zip(&graph.triple_entities).zip(&graph.triple_facts).enumerate()
    {
        let (s, o) = (ends.map(|e| e.0 as i32), ends.map(|e| e.1 as i32));
        let row: [&(dyn ToSql + Sync); 9] = [
            &id,
            &(i as i32),
            &(t.passage as i32),
            &t.subject.as_str(),
            &t.predicate.as_str(),
            &t.object.as_str(),
            &s,
            &o,
            &(fact as i32),
        ];
        w.write(&row).map_err(&err)?;
    }
    w.finish().map_err(&err)?;

    let copy = "COPY edges (graph, ord, a, b, weight, kind) FROM STDIN (FORMAT binary)";
    let types = [Type::INT8, Type::INT4, Type::INT4, Type::INT4, Type::FLOAT4, Type::TEXT];
    let mut w = BinaryCopyInWriter::new(client.copy_in(copy).map_err(&err)?, &types);
    for (i, e) in graph.edges.iter().enumerate() {
        let kind = match e.kind {
            EdgeKind::Relation => "relation",
            EdgeKind::Synonym => "synonym",
        };
        let row: [&(dyn ToSql + Sync); 6] = [&id, &(i as i32), &(e.a as i32), &(e.b as i32), &e.weight, &kind];
        w.write(&row).map_err(&err)?;
    }
    w.finish().map_err(&err)?;

    let copy = "COPY passage_entities (graph, passage, ord, entity) FROM STDIN (FORMAT binary)";
    let types = [Type::INT8, Type::INT4, Type::INT4, Type::INT4];
    let mut w = BinaryCopyInWriter::new(client.copy_in(copy).map_err(&err)?, &types);
    for (p, ents) in graph.passage_entities.iter().enumerate() {
        for (k, &e) in ents.iter().enumerate() {
            let row: [&(dyn ToSql + Sync); 4] = [&id, &(p as i32), &(k as i32), &(e as i32)];
            w.write(&row).map_err(&err)?;
        }
    }
    w.finish().map_err(&err)?;

    // Passages without mentions have no row.
    let copy = "COPY passage_mentions (graph, passage, mentions) FROM STDIN (FORMAT binary)";
    let types = [Type::INT8, Type::INT4, Type::TEXT_ARRAY];
    let mut w = BinaryCopyInWriter::new(client.copy_in(copy).map_err(&err)?, &types);
    for (p, mentions) in graph.mentions.iter().enumerate().filter(|(_, m)| !m.is_empty()) {
        let mentions: Vec<&str> = mentions.iter().map(Name::as_str).collect();
        let row: [&(dyn ToSql + Sync); 3] = [&id, &(p as i32), &mentions];
        w.write(&row).map_err(&err)?;
    }
    w.finish().map_err(&err)?;

    if let Some(walk) = walk {
        let mut w = super::parts::WALKS.writer(client, location)?;
        w.put(&[&id], &walk.to_bytes())?;
        w.finish()?;
    }
    Ok(id)
}

/// Graph `id`'s stored walk, if it has one.
fn read_walk(client: &mut impl GenericClient, id: i64, location: &str) -> Result<Option<Solved>> {
    let what = format!("graph {id}'s walk");
    let Some(bytes) = super::parts::WALKS.read(client, &[&id], &what, None, location)? else { return Ok(None) };
    Solved::from_bytes(&bytes).map(Some).map_err(|e| Error::index(location, format!("{what}: {e}")))
}

/// Reads graph `id` back (vectors of dimension `dim`).
pub(crate) fn read(client: &mut impl GenericClient, id: i64, dim: usize, location: &str) -> Result<EntityGraph> {
    let err = db_err(location, "reading the graph");
    let bad = |m: String| Error::index(location, format!("graph {id}: {m}"));
    let row = client
        .query_opt(
            "SELECT passages, entities, triples, stats::text, mentions, options::text FROM graphs WHERE id = $1",
            &[&id],
        )
        .map_err(&err)?
        .ok_or_else(|| bad("missing (a newer index replaced it); reload".into()))?;
    let (passages, n_entities, n_triples) =
        (row.get::<_, i32>(0) as usize, row.get::<_, i32>(1) as usize, row.get::<_, i32>(2) as usize);
    let stats: GraphStats =
        serde_json::from_str(&row.get::<_, String>(3)).map_err(|e| bad(format!("invalid statistics: {e}")))?;
    // Graphs written before schema version 6 kept no mentions (an empty list, as a folder
    // graph of that age reads) and no options (the defaults).
    let mentioned = row.get::<_, Option<i32>>(4).map_or(0, |n| n as usize);
    let options: GraphOptions = match row.get::<_, Option<String>>(5) {
        Some(o) => serde_json::from_str(&o).map_err(|e| bad(format!("invalid options: {e}")))?,
        None => GraphOptions::default(),
    };
    let vector = vector_type(client, location)?;
    let vec_of = |row: &BinaryCopyOutRow, i: usize, what: &str| -> Result<Vec<f32>> {
        let v: pgvector::Vector = row.try_get(i).map_err(&err)?;
        let v = v.to_vec();
        if v.len() != dim {
            return Err(bad(format!("a {what} vector has dimension {}, the index {dim}", v.len())));
        }
        Ok(v)
    };

    let mut entities = Vec::with_capacity(n_entities);
    let mut labels = Vec::with_capacity(n_entities);
    let mut entity_vectors = Vec::with_capacity(n_entities * dim);
    let sql = format!(
        "COPY (SELECT id, name, label, vector FROM entities WHERE graph = {id} ORDER BY id) TO STDOUT (FORMAT binary)"
    );
    {
        let mut rows = BinaryCopyOutIter::new(
            client.copy_out(sql.as_str()).map_err(&err)?,
            &[Type::INT4, Type::TEXT, Type::TEXT, vector.clone()],
        );
        while let Some(row) = rows.next().map_err(&err)? {
            if row.try_get::<i32>(0).map_err(&err)? as usize != entities.len() {
                return Err(bad(format!("entity {} is missing", entities.len())));
            }
            entities.push(row.try_get::<String>(1).map_err(&err)?);
            labels.push(row.try_get::<String>(2).map_err(&err)?);
            entity_vectors.extend(vec_of(&row, 3, "entity")?);
        }
    }

    // Facts read so far, and their vectors, concatenated.
    let (mut facts, mut fact_vectors) = (0usize, Vec::new());
    let sql = format!("COPY (SELECT id, vector FROM facts WHERE graph = {id} ORDER BY id) TO STDOUT (FORMAT binary)");
    {
        let mut rows =
            BinaryCopyOutIter::new(client.copy_out(sql.as_str()).map_err(&err)?, &[Type::INT4, vector.clone()]);
        while let Some(row) = rows.next().map_err(&err)? {
            if row.try_get::<i32>(0).map_err(&err)? as usize != facts {
                return Err(bad(format!("fact {facts} is missing")));
            }
            fact_vectors.extend(vec_of(&row, 1, "fact")?);
            facts += 1;
        }
    }

    // A graph written before facts were shared holds each triple's vector in its row
    // (and no facts): each triple is then its own fact.
    let mut triples = Vec::with_capacity(n_triples);
    let mut triple_entities = Vec::with_capacity(n_triples);
    let mut triple_facts = Vec::with_capacity(n_triples);
    let sql = format!(
        "COPY (SELECT id, passage, subject, predicate, object, subject_entity, object_entity, fact, vector \
         FROM triples WHERE graph = {id} ORDER BY id) TO STDOUT (FORMAT binary)"
    );
    let types =
        [Type::INT4, Type::INT4, Type::TEXT, Type::TEXT, Type::TEXT, Type::INT4, Type::INT4, Type::INT4, vector];
    {
        let mut rows = BinaryCopyOutIter::new(client.copy_out(sql.as_str()).map_err(&err)?, &types);
        while let Some(row) = rows.next().map_err(&err)? {
            if row.try_get::<i32>(0).map_err(&err)? as usize != triples.len() {
                return Err(bad(format!("triple {} is missing", triples.len())));
            }
            triples.push(Triple {
                passage: row.try_get::<i32>(1).map_err(&err)? as u32,
                subject: Name::new(row.try_get(2).map_err(&err)?),
                predicate: Name::new(row.try_get(3).map_err(&err)?),
                object: Name::new(row.try_get(4).map_err(&err)?),
            });
            let s: Option<i32> = row.try_get(5).map_err(&err)?;
            let o: Option<i32> = row.try_get(6).map_err(&err)?;
            triple_entities.push(s.zip(o).map(|(s, o)| (s as u32, o as u32)));
            match row.try_get::<Option<i32>>(7).map_err(&err)? {
                Some(f) => triple_facts.push(f as u32),
                None => {
                    triple_facts.push(facts as u32);
                    fact_vectors.extend(vec_of(&row, 8, "triple")?);
                    facts += 1;
                }
            }
        }
    }

    let mut edges = Vec::new();
    let sql = format!(
        "COPY (SELECT a, b, weight, kind FROM edges WHERE graph = {id} ORDER BY ord) TO STDOUT (FORMAT binary)"
    );
    let types = [Type::INT4, Type::INT4, Type::FLOAT4, Type::TEXT];
    {
        let mut rows = BinaryCopyOutIter::new(client.copy_out(sql.as_str()).map_err(&err)?, &types);
        while let Some(row) = rows.next().map_err(&err)? {
            let kind = match row.try_get::<&str>(3).map_err(&err)? {
                "relation" => EdgeKind::Relation,
                "synonym" => EdgeKind::Synonym,
                k => return Err(bad(format!("unknown edge kind {k:?}"))),
            };
            edges.push(Edge {
                a: row.try_get::<i32>(0).map_err(&err)? as u32,
                b: row.try_get::<i32>(1).map_err(&err)? as u32,
                weight: row.try_get(2).map_err(&err)?,
                kind,
            });
        }
    }

    let mut passage_entities: Vec<Vec<u32>> = vec![Vec::new(); passages];
    let sql = format!(
        "COPY (SELECT passage, entity FROM passage_entities WHERE graph = {id} ORDER BY passage, ord) \
         TO STDOUT (FORMAT binary)"
    );
    {
        let mut rows = BinaryCopyOutIter::new(client.copy_out(sql.as_str()).map_err(&err)?, &[Type::INT4, Type::INT4]);
        while let Some(row) = rows.next().map_err(&err)? {
            let p = row.try_get::<i32>(0).map_err(&err)? as usize;
            let e = row.try_get::<i32>(1).map_err(&err)? as u32;
            passage_entities
                .get_mut(p)
                .ok_or_else(|| bad(format!("entities for passage {p} beyond its {passages}")))?
                .push(e);
        }
    }

    let mut mentions: Vec<Vec<Name>> = vec![Vec::new(); mentioned];
    let sql = format!(
        "COPY (SELECT passage, mentions FROM passage_mentions WHERE graph = {id} ORDER BY passage) \
         TO STDOUT (FORMAT binary)"
    );
    {
        let mut rows =
            BinaryCopyOutIter::new(client.copy_out(sql.as_str()).map_err(&err)?, &[Type::INT4, Type::TEXT_ARRAY]);
        while let Some(row) = rows.next().map_err(&err)? {
            let p = row.try_get::<i32>(0).map_err(&err)? as usize;
            let names: Vec<&str> = row.try_get(1).map_err(&err)?;
            *mentions.get_mut(p).ok_or_else(|| bad(format!("mentions for passage {p} beyond its {mentioned}")))? =
                names.into_iter().map(Name::new).collect();
        }
    }

    if entities.len() != n_entities || triples.len() != n_triples {
        return Err(bad(format!(
            "{} entities and {} triples stored, {n_entities} and {n_triples} recorded",
            entities.len(),
            triples.len()
        )));
    }
    let (entity_vectors, fact_vectors) = (matrix(dim, entity_vectors), matrix(dim, fact_vectors));
    let mut graph = EntityGraph::from_parts(GraphParts {
        entities,
        labels,
        passage_entities,
        edges,
        triples,
        triple_entities,
        triple_facts,
        mentions,
        options,
        stats,
        entity_vectors: Arc::new(entity_vectors),
        fact_vectors: Arc::new(fact_vectors),
    })
    .map_err(bad)?;
    graph.walk = read_walk(client, id, location)?.map(Arc::new);
    Ok(graph)
}

fn matrix(dim: usize, data: Vec<f32>) -> Matrix {
    if dim == 0 {
        Matrix::default()
    } else {
        Matrix::from_flat(dim, data)
    }
}
