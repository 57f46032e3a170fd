//! [`super::plan`] of an upsert or a delete of an index's passages, which are in
//! canonical order: a passage is found by binary search, the documents the request names
//! by one scan that hashes only passages with a `doc`, and the result is the old list
//! with the removed rows left out and the new passages merged in. Nothing hashes or sorts
//! the index's passages (at a million passages the rules as stated, [`super::general`],
//! took seconds in maps keyed by every id and document). The result is the general
//! rules' to the byte; the tests hold it to them.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use rustc_hash::FxHashSet;

use super::{document_is_passage, passage_and_document, twice, two_passages, unknown_ids, EditCounts, Plan, Request};
use crate::corpus::Passage;
use crate::error::Result;

/// The plan, where `old` is in canonical order and the request an upsert or a delete;
/// `None` otherwise (the general rules apply).
pub(super) fn plan(old: &[Passage], request: &Request) -> Option<Result<Plan>> {
    if !old.windows(2).all(|w| w[0].id < w[1].id) {
        return None;
    }
    let change = match request {
        Request::Upsert(rows) => upsert(old, rows),
        Request::Delete(ids) => delete(old, ids),
        Request::Sync { .. } => return None,
    };
    Some(change.and_then(|c| c.apply(old)))
}

/// What an edit does to the old list: rows it removes, passages it adds, and the old rows
/// of every document either touches.
struct Change<'a> {
    removed: BTreeSet<usize>,
    added: Vec<Passage>,
    touched: HashMap<&'a str, Vec<usize>>,
}

fn find(passages: &[Passage], id: &str) -> Option<usize> {
    passages.binary_search_by(|p| p.id.as_str().cmp(id)).ok()
}

/// The rows of `old` of each document in `docs` that has any (a passage's document is its
/// `doc`, or its own id), ascending.
fn rows_of<'a>(old: &[Passage], docs: &HashSet<&'a str>) -> HashMap<&'a str, Vec<usize>> {
    let mut rows: HashMap<&'a str, Vec<usize>> = HashMap::new();
    if docs.is_empty() {
        return rows;
    }
    for &d in docs {
        if let Some(i) = find(old, d).filter(|&i| old[i].doc.is_none()) {
            rows.entry(d).or_default().push(i);
        }
    }
    for (i, p) in old.iter().enumerate() {
        if let Some(&d) = p.doc.as_deref().and_then(|d| docs.get(d)) {
            rows.entry(d).or_default().push(i);
        }
    }
    rows.values_mut().for_each(|r| r.sort_unstable());
    rows
}

fn delete<'a>(old: &'a [Passage], ids: &'a [String]) -> Result<Change<'a>> {
    let by_id: Vec<Option<usize>> = ids.iter().map(|id| find(old, id)).collect();
    // The documents the ids name, and those of the passages they name (touched too),
    // found in one scan.
    let mut named: HashSet<&str> = ids.iter().map(String::as_str).collect();
    named.extend(by_id.iter().flatten().map(|&i| old[i].document()));
    let touched = rows_of(old, &named);
    let unknown: Vec<&str> = ids
        .iter()
        .zip(&by_id)
        .filter(|(id, row)| row.is_none() && !touched.contains_key(id.as_str()))
        .map(|(id, _)| id.as_str())
        .collect();
    if !unknown.is_empty() {
        return Err(unknown_ids(&unknown));
    }
    let mut removed: BTreeSet<usize> =
        ids.iter().filter_map(|id| touched.get(id.as_str())).flatten().copied().collect();
    removed.extend(by_id.iter().flatten());
    Ok(Change { removed, added: Vec::new(), touched })
}

fn upsert<'a>(old: &'a [Passage], rows: &'a [Passage]) -> Result<Change<'a>> {
    let existing: Vec<Option<usize>> = rows.iter().map(|r| find(old, &r.id)).collect();
    // Every document a row may touch: its own, the one of the passage it names, and the
    // document its id names.
    let mut named: HashSet<&str> = HashSet::new();
    for (row, at) in rows.iter().zip(&existing) {
        named.insert(row.doc.as_deref().unwrap_or(&row.id));
        if let Some(i) = at {
            named.insert(old[*i].document());
        }
    }
    let by_document = rows_of(old, &named);
    let mut seen = HashSet::new();
    // Rows by the document they replace whole, and rows replacing one passage in place
    // (by its row), as the general rules sort them.
    let mut whole: BTreeMap<&str, Vec<Passage>> = BTreeMap::new();
    let mut in_place: BTreeMap<usize, Passage> = BTreeMap::new();
    for (row, at) in rows.iter().zip(&existing) {
        if !seen.insert(row.id.as_str()) {
            return Err(twice(&row.id));
        }
        let document = at.map(|i| old[i].document());
        match (&row.doc, document, at) {
            (Some(d), _, _) => whole.entry(d.as_str()).or_default().push(row.clone()),
            (None, Some(d), Some(i)) if by_document.get(d).map_or(0, Vec::len) > 1 || d != row.id => {
                in_place.insert(*i, Passage { doc: old[*i].doc.clone(), ..row.clone() });
            }
            (None, _, _) => whole.entry(row.id.as_str()).or_default().push(row.clone()),
        }
    }
    if let Some(p) = in_place.values().find(|p| whole.contains_key(p.id.as_str())) {
        return Err(passage_and_document(&p.id));
    }
    let mut removed = BTreeSet::new();
    let mut added = Vec::new();
    for (d, passages) in whole {
        removed.extend(by_document.get(d).into_iter().flatten());
        added.extend(passages);
    }
    // A passage replaced in place within a document replaced whole goes with it.
    for (i, p) in in_place {
        if removed.insert(i) {
            added.push(p);
        }
    }
    Ok(Change { removed, added, touched: by_document })
}

impl Change<'_> {
    /// The passages after the change, in canonical order, checked and counted.
    fn apply(mut self, old: &[Passage]) -> Result<Plan> {
        self.added.sort_by(|a, b| a.id.cmp(&b.id));
        let mut passages = Vec::with_capacity(old.len() - self.removed.len() + self.added.len());
        let mut added = self.added.iter().peekable();
        let mut removed = self.removed.iter().copied().peekable();
        for (i, p) in old.iter().enumerate() {
            if removed.next_if_eq(&i).is_some() {
                continue;
            }
            // On an equal id the old passage goes first: the check names it first, as the
            // general rules (which list the old passages before the new) do.
            while let Some(a) = added.next_if(|a| a.id < p.id) {
                passages.push(a.clone());
            }
            passages.push(p.clone());
        }
        passages.extend(added.cloned());
        check_ids(&passages)?;
        let counts = self.count(old, &passages);
        Ok(Plan { passages, counts })
    }

    fn count(&self, old: &[Passage], new: &[Passage]) -> EditCounts {
        let mut c = EditCounts { passages_total: new.len(), ..Default::default() };
        let mut after: HashMap<&str, Vec<&Passage>> = HashMap::new();
        for (d, rows) in &self.touched {
            let kept = rows.iter().filter(|i| !self.removed.contains(i)).map(|&i| &old[i]);
            after.entry(d).or_default().extend(kept);
        }
        for p in &self.added {
            after.entry(p.document()).or_default().push(p);
        }
        for (d, now) in &mut after {
            let before: Vec<&Passage> = self.touched.get(d).into_iter().flatten().map(|&i| &old[i]).collect();
            now.sort_by(|a, b| a.id.cmp(&b.id));
            match (before.is_empty(), now.is_empty()) {
                (true, false) => c.documents_added += 1,
                (false, true) => c.documents_deleted += 1,
                (false, false) if before != *now => c.documents_replaced += 1,
                _ => {}
            }
        }
        let documents = document_count(old) - c.documents_deleted + c.documents_added;
        c.documents_unchanged = documents - c.documents_added - c.documents_replaced;
        let unchanged_in = |list: &[Passage], p: &Passage| find(list, &p.id).is_some_and(|i| list[i] == *p);
        c.passages_added = self.added.iter().filter(|p| !unchanged_in(old, p)).count();
        c.passages_removed = self.removed.iter().filter(|&&i| !unchanged_in(new, &old[i])).count();
        c
    }
}

/// Distinct documents among `passages` (each valid: [`check_ids`]).
fn document_count(passages: &[Passage]) -> usize {
    let named: FxHashSet<&str> = passages.iter().filter_map(|p| p.doc.as_deref()).collect();
    let alone = passages.iter().filter(|p| p.doc.is_none() && !named.contains(p.id.as_str())).count();
    named.len() + alone
}

/// One id space ([`super::check_ids`]), for passages in canonical order: a repeated id is
/// a neighbour, and a document's id is found by binary search.
fn check_ids(passages: &[Passage]) -> Result<()> {
    if let Some(w) = passages.windows(2).find(|w| w[0].id == w[1].id) {
        return Err(two_passages(&w[0].id, w[0].document(), w[1].document()));
    }
    for p in passages.iter().filter(|p| p.doc.is_some()) {
        if let Some(i) = find(passages, p.document()) {
            if passages[i].document() != p.document() {
                return Err(document_is_passage(p.document(), passages[i].document()));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::{general, plan, Request};
    use crate::corpus::Passage;

    /// A small deterministic stream (xorshift), so that a failure names its seed.
    fn stream(seed: u64) -> impl FnMut(u64) -> u64 {
        let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        move |n| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        }
    }

    /// Passages of a few documents (some of one passage named by its own id, some of
    /// several with `doc`), in canonical order.
    fn index(next: &mut impl FnMut(u64) -> u64) -> Vec<Passage> {
        let mut passages = Vec::new();
        for d in 0..next(12) {
            if next(2) == 0 {
                passages.push(Passage::new(format!("d{d}"), "", format!("t{}", next(3))));
            } else {
                for i in 0..1 + next(3) {
                    let mut p = Passage::new(format!("d{d}#{i}"), "", format!("t{}", next(3)));
                    p.doc = Some(format!("d{d}"));
                    passages.push(p);
                }
            }
        }
        crate::corpus::canonical_order(&mut passages);
        passages
    }

    /// A request touching ids that exist and ids that don't, with and without `doc`.
    fn request(next: &mut impl FnMut(u64) -> u64, old: &[Passage]) -> Request {
        let id = |next: &mut dyn FnMut(u64) -> u64| match next(4) {
            0 if !old.is_empty() => old[next(old.len() as u64) as usize].id.clone(),
            1 if !old.is_empty() => old[next(old.len() as u64) as usize].document().to_string(),
            2 => format!("d{}#{}", next(14), next(4)),
            _ => format!("d{}", next(14)),
        };
        if next(3) == 0 {
            return Request::Delete((0..1 + next(3)).map(|_| id(next)).collect());
        }
        let rows = (0..1 + next(3))
            .map(|_| {
                let mut p = Passage::new(id(next), "", format!("t{}", next(3)));
                if next(3) == 0 {
                    p.doc = Some(format!("d{}", next(14)));
                }
                p
            })
            .collect();
        Request::Upsert(rows)
    }

    #[test]
    fn the_sorted_plan_is_the_general_rules_plan() {
        let (mut planned, mut refused) = (0, 0);
        for seed in 0..4000 {
            let mut next = stream(seed);
            let old = index(&mut next);
            let request = request(&mut next, &old);
            let (fast, rules) = (plan(&old, &request), general(&old, &request));
            match (&fast, &rules) {
                (Ok(a), Ok(b)) => {
                    assert_eq!(a.passages, b.passages, "seed {seed}: {request:?}");
                    assert_eq!(a.counts, b.counts, "seed {seed}: {request:?}");
                    planned += 1;
                }
                (Err(_), Err(_)) => refused += 1,
                _ => panic!(
                    "seed {seed}: {request:?} on {old:?}: {:?} against the rules' {:?}",
                    fast.is_ok(),
                    rules.is_ok()
                ),
            }
        }
        assert!(planned > 1000 && refused > 100, "{planned} planned, {refused} refused: the cases cover both");
    }
}
