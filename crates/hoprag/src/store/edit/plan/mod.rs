//! What an index holds after an edit: the rules of upsert, delete and sync over
//! documents and passages, as a pure function of the passages before and the request.
//!
//! A passage belongs to a document ([`Passage::document`]); documents and passages share
//! one id space. The result is in canonical order (passages sorted by id, bytewise), the
//! order a fresh build puts the same passages in, so that an edited index and a fresh one
//! are the same index.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::corpus::{canonical_order, Passage};
use crate::error::{Error, Result};
use crate::index::Passages;

mod sorted;

/// What to change.
#[derive(Debug, Clone)]
pub enum Request {
    /// Rows with a `doc` replace all of that document's passages; a row without one
    /// replaces the passage with its id in place (keeping its document), or is a new
    /// document of its own.
    Upsert(Vec<Passage>),
    /// Documents, or single passages, by id; an unknown id is an error and nothing changes.
    Delete(Vec<String>),
    /// The index holds exactly these passages afterwards. An empty list deletes everything
    /// only with `allow_empty`.
    Sync { passages: Vec<Passage>, allow_empty: bool },
}

/// How the documents changed, counted the way `--dry-run` prints them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EditCounts {
    pub documents_added: usize,
    pub documents_replaced: usize,
    pub documents_deleted: usize,
    pub documents_unchanged: usize,
    /// Passages new to the index (a changed passage counts as removed and added).
    pub passages_added: usize,
    pub passages_removed: usize,
    /// Passages the index holds after the edit (would hold, for a dry run).
    pub passages_total: usize,
}

impl EditCounts {
    pub fn is_noop(&self) -> bool {
        self.passages_added == 0 && self.passages_removed == 0
    }
}

/// The passages after the edit, in canonical order, and the counts.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Layered on the old passages' base where the plan could ([`sorted`]): the
    /// generation then shares every passage it did not change.
    pub passages: Passages,
    pub counts: EditCounts,
}

/// Applies `request` to `old` (any order). An upsert or a delete of an index's passages
/// (canonical order) takes time in proportion to the request, not to `old`, beyond
/// copying it ([`sorted`]).
pub fn plan(old: &Passages, request: &Request) -> Result<Plan> {
    if let Some(plan) = sorted::plan(old, request) {
        return plan;
    }
    general(&old.contiguous(), request)
}

/// [`plan`] by the rules as stated, for passages in any order.
fn general(old: &[Passage], request: &Request) -> Result<Plan> {
    let mut docs: BTreeMap<&str, Vec<&Passage>> = BTreeMap::new();
    for p in old {
        docs.entry(p.document()).or_default().push(p);
    }
    let new: Vec<Passage> = match request {
        Request::Upsert(rows) => upsert(old, &docs, rows)?,
        Request::Delete(ids) => delete(old, &docs, ids)?,
        Request::Sync { passages, allow_empty } => {
            if passages.is_empty() && !allow_empty && !old.is_empty() {
                return Err(Error::Config(
                    "the corpus to sync holds no passages: that would delete every document of the index; \
                     pass --allow-empty (allow_empty) to mean it"
                        .into(),
                ));
            }
            passages.clone()
        }
    };
    let mut passages = new;
    check_ids(&passages)?;
    canonical_order(&mut passages);
    let counts = count(&docs, &passages);
    Ok(Plan { passages: passages.into(), counts })
}

fn upsert(old: &[Passage], docs: &BTreeMap<&str, Vec<&Passage>>, rows: &[Passage]) -> Result<Vec<Passage>> {
    let doc_of: HashMap<&str, &str> = old.iter().map(|p| (p.id.as_str(), p.document())).collect();
    let mut seen = HashSet::new();
    // Rows by the document they go to; whole documents are replaced, single passages
    // (rows without `doc` naming an existing passage) are replaced in place.
    let mut whole: BTreeMap<String, Vec<Passage>> = BTreeMap::new();
    let mut in_place: HashMap<String, Passage> = HashMap::new();
    for row in rows {
        if !seen.insert(row.id.as_str()) {
            return Err(twice(&row.id));
        }
        match (&row.doc, doc_of.get(row.id.as_str())) {
            (Some(d), _) => whole.entry(d.clone()).or_default().push(row.clone()),
            (None, Some(&d)) if docs[d].len() > 1 || d != row.id => {
                let doc = old.iter().find(|p| p.id == row.id).and_then(|p| p.doc.clone());
                in_place.insert(row.id.clone(), Passage { doc, ..row.clone() });
            }
            (None, _) => whole.entry(row.id.clone()).or_default().push(row.clone()),
        }
    }
    if let Some(id) = in_place.keys().find(|id| whole.contains_key(*id)) {
        return Err(passage_and_document(id));
    }
    let mut out = Vec::with_capacity(old.len() + rows.len());
    for (d, passages) in docs {
        if whole.contains_key(*d) {
            continue;
        }
        out.extend(passages.iter().map(|p| in_place.remove(&p.id).unwrap_or_else(|| (*p).clone())));
    }
    out.extend(whole.into_values().flatten());
    Ok(out)
}

fn delete(old: &[Passage], docs: &BTreeMap<&str, Vec<&Passage>>, ids: &[String]) -> Result<Vec<Passage>> {
    let passage_ids: HashSet<&str> = old.iter().map(|p| p.id.as_str()).collect();
    let unknown: Vec<&str> =
        ids.iter().map(String::as_str).filter(|id| !docs.contains_key(id) && !passage_ids.contains(id)).collect();
    if !unknown.is_empty() {
        return Err(unknown_ids(&unknown));
    }
    let gone: HashSet<&str> = ids.iter().map(String::as_str).collect();
    Ok(old.iter().filter(|p| !gone.contains(p.document()) && !gone.contains(p.id.as_str())).cloned().collect())
}

/// One id space: passage ids unique, and no document named by another document's passage.
fn check_ids(passages: &[Passage]) -> Result<()> {
    let mut owner: HashMap<&str, &str> = HashMap::with_capacity(passages.len());
    for p in passages {
        if let Some(other) = owner.insert(&p.id, p.document()) {
            return Err(two_passages(&p.id, other, p.document()));
        }
    }
    for p in passages {
        if let Some(&d) = owner.get(p.document()) {
            if d != p.document() {
                return Err(document_is_passage(p.document(), d));
            }
        }
    }
    Ok(())
}

fn twice(id: &str) -> Error {
    Error::Config(format!("id {id:?} appears twice among the rows to upsert"))
}

fn passage_and_document(id: &str) -> Error {
    Error::Config(format!("id {id:?} names both a passage and a document among the rows"))
}

fn unknown_ids(unknown: &[&str]) -> Error {
    let shown: Vec<String> = unknown.iter().take(10).map(|id| format!("{id:?}")).collect();
    let more = if unknown.len() > 10 { format!(" and {} more", unknown.len() - 10) } else { String::new() };
    Error::Config(format!("no document or passage has the id {}{more}; nothing was deleted", shown.join(", ")))
}

fn two_passages(id: &str, first: &str, second: &str) -> Error {
    Error::Config(format!("id {id:?} would name two passages (of documents {first:?} and {second:?})"))
}

fn document_is_passage(document: &str, of: &str) -> Error {
    Error::Config(format!("document id {document:?} is also the id of a passage of document {of:?}"))
}

fn count(old: &BTreeMap<&str, Vec<&Passage>>, new: &[Passage]) -> EditCounts {
    let mut new_docs: BTreeMap<&str, Vec<&Passage>> = BTreeMap::new();
    for p in new {
        new_docs.entry(p.document()).or_default().push(p);
    }
    let same = |a: &[&Passage], b: &[&Passage]| {
        let mut a: Vec<&Passage> = a.to_vec();
        let mut b: Vec<&Passage> = b.to_vec();
        a.sort_by(|x, y| x.id.cmp(&y.id));
        b.sort_by(|x, y| x.id.cmp(&y.id));
        a == b
    };
    let mut c = EditCounts { passages_total: new.len(), ..Default::default() };
    for (d, passages) in &new_docs {
        match old.get(d) {
            None => c.documents_added += 1,
            Some(before) if same(before, passages) => c.documents_unchanged += 1,
            Some(_) => c.documents_replaced += 1,
        }
    }
    c.documents_deleted = old.keys().filter(|d| !new_docs.contains_key(*d)).count();
    let before: HashMap<&str, &Passage> = old.values().flatten().map(|p| (p.id.as_str(), *p)).collect();
    let after: HashMap<&str, &Passage> = new.iter().map(|p| (p.id.as_str(), p)).collect();
    c.passages_added = after.iter().filter(|(id, p)| before.get(*id) != Some(*p)).count();
    c.passages_removed = before.iter().filter(|(id, p)| after.get(*id) != Some(*p)).count();
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(id: &str, doc: Option<&str>, text: &str) -> Passage {
        Passage { doc: doc.map(str::to_string), ..Passage::new(id, "", text) }
    }

    fn ids(plan: &Plan) -> Vec<(&str, &str)> {
        plan.passages.iter().map(|p| (p.id.as_str(), p.text.as_str())).collect()
    }

    fn old() -> Vec<Passage> {
        vec![p("b.md#0", Some("b.md"), "b0"), p("b.md#1", Some("b.md"), "b1"), p("x", None, "x"), p("a", None, "a")]
    }

    #[test]
    fn a_document_is_replaced_whole_and_a_passage_in_place() {
        let plan = plan(&old().into(), &Request::Upsert(vec![p("b.md#0", Some("b.md"), "B0")])).unwrap();
        assert_eq!(ids(&plan), [("a", "a"), ("b.md#0", "B0"), ("x", "x")]);
        assert_eq!(
            (plan.counts.documents_replaced, plan.counts.passages_removed, plan.counts.passages_added),
            (1, 2, 1)
        );
        let plan =
            super::plan(&old().into(), &Request::Upsert(vec![p("b.md#1", None, "B1"), p("x", None, "X")])).unwrap();
        assert_eq!(ids(&plan), [("a", "a"), ("b.md#0", "b0"), ("b.md#1", "B1"), ("x", "X")]);
        assert_eq!(plan.passages[2].doc.as_deref(), Some("b.md"), "in place keeps the document");
        assert_eq!(plan.counts.documents_replaced, 2);
    }

    #[test]
    fn the_same_upsert_twice_changes_nothing() {
        let rows = vec![p("n", None, "new")];
        let once = plan(&old().into(), &Request::Upsert(rows.clone())).unwrap();
        let twice = plan(&once.passages, &Request::Upsert(rows)).unwrap();
        assert_eq!(once.passages, twice.passages);
        assert!(twice.counts.is_noop());
        assert_eq!(twice.counts.documents_unchanged, 4);
    }

    #[test]
    fn deletes_take_documents_or_passages_and_refuse_unknown_ids() {
        let plan = plan(&old().into(), &Request::Delete(vec!["b.md".into(), "a".into()])).unwrap();
        assert_eq!(ids(&plan), [("x", "x")]);
        assert_eq!(plan.counts.documents_deleted, 2);
        let one = super::plan(&old().into(), &Request::Delete(vec!["b.md#1".into()])).unwrap();
        assert_eq!(one.passages.len(), 3);
        let err =
            super::plan(&old().into(), &Request::Delete(vec!["a".into(), "nope".into()])).unwrap_err().to_string();
        assert!(err.contains("\"nope\"") && !err.contains("\"a\""), "{err}");
    }

    #[test]
    fn one_id_space() {
        let err = plan(&old().into(), &Request::Upsert(vec![p("x", Some("c"), "c")])).unwrap_err().to_string();
        assert!(err.contains("\"x\""), "{err}");
        let err = plan(&old().into(), &Request::Upsert(vec![p("n", Some("b.md#0"), "c")])).unwrap_err();
        assert!(err.to_string().contains("\"b.md#0\""), "{err}");
        // A document of one passage may become a document of other passages.
        let plan = plan(&old().into(), &Request::Upsert(vec![p("c#0", Some("a"), "c")])).unwrap();
        assert!(plan.passages.iter().all(|p| p.id != "a"));
    }

    #[test]
    fn sync_refuses_to_empty_an_index_unless_asked() {
        assert!(plan(&old().into(), &Request::Sync { passages: vec![], allow_empty: false }).is_err());
        let all_gone = plan(&old().into(), &Request::Sync { passages: vec![], allow_empty: true }).unwrap();
        assert_eq!(all_gone.counts.documents_deleted, 3);
    }

    #[test]
    fn the_result_is_in_canonical_order_whatever_the_order_before() {
        let mut shuffled = old();
        shuffled.reverse();
        let rows = vec![p("m", None, "m")];
        let a = plan(&old().into(), &Request::Upsert(rows.clone())).unwrap();
        let b = plan(&shuffled.into(), &Request::Upsert(rows)).unwrap();
        assert_eq!(a.passages, b.passages);
    }
}
