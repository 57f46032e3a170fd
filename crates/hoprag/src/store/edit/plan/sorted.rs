//! [`super::plan`] of an upsert or a delete of an index's passages, which are in
//! canonical order: a passage is found by binary search, a document's passages through
//! the documents' rows each layer keeps ([`Passages::rows_of_document`]), and the result
//! is the old list spliced ([`Passages::splice`]): the removed rows left out and the new
//! passages merged in, layered on the old list's base. The ids are checked where the
//! edit put passages, and documents are counted from the old list's count. So nothing
//! reads every passage: at a million passages, copying the list and checking every id
//! took seconds. The result is the general rules' to the byte; the tests hold it to them.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use super::{document_is_passage, passage_and_document, twice, two_passages, unknown_ids, EditCounts, Plan, Request};
use crate::corpus::Passage;
use crate::error::Result;
use crate::index::Passages;

/// The plan, where `old` is in canonical order and the request an upsert or a delete;
/// `None` otherwise (the general rules apply).
pub(super) fn plan(old: &Passages, request: &Request) -> Option<Result<Plan>> {
    if !old.is_canonical() {
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

/// The rows of `old` of each document in `docs` that has any (a passage's document is its
/// `doc`, or its own id), ascending.
fn rows_of<'a>(old: &Passages, docs: &HashSet<&'a str>) -> HashMap<&'a str, Vec<usize>> {
    let mut rows: HashMap<&'a str, Vec<usize>> = HashMap::new();
    for &d in docs {
        let mut of_d = old.rows_of_document(d);
        if let Some(i) = old.find(d).filter(|&i| old[i].doc.is_none()) {
            of_d.push(i);
            of_d.sort_unstable();
        }
        if !of_d.is_empty() {
            rows.insert(d, of_d);
        }
    }
    rows
}

fn delete<'a>(old: &'a Passages, ids: &'a [String]) -> Result<Change<'a>> {
    let by_id: Vec<Option<usize>> = ids.iter().map(|id| old.find(id)).collect();
    // The documents the ids name, and those of the passages they name (touched too).
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

fn upsert<'a>(old: &'a Passages, rows: &'a [Passage]) -> Result<Change<'a>> {
    let existing: Vec<Option<usize>> = rows.iter().map(|r| old.find(&r.id)).collect();
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
    fn apply(mut self, old: &Passages) -> Result<Plan> {
        self.added.sort_by(|a, b| a.id.cmp(&b.id));
        // A passage put back as it was keeps its row (its base's, where it has one), so a
        // generation's delta holds what changed, not what a document's upsert rewrote.
        let mut removed = self.removed.clone();
        let mut added = Vec::with_capacity(self.added.len());
        for p in &self.added {
            match old.find(&p.id) {
                Some(i) if old[i] == *p && removed.remove(&i) => {}
                _ => added.push(p.clone()),
            }
        }
        let passages = old.splice(&removed, added);
        check_ids(&passages, &self.added)?;
        let counts = self.count(old, &passages);
        let passages = passages
            .with_document_count(counts.documents_unchanged + counts.documents_added + counts.documents_replaced);
        Ok(Plan { passages, counts })
    }

    fn count(&self, old: &Passages, new: &Passages) -> EditCounts {
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
        let documents = old.document_count() - c.documents_deleted + c.documents_added;
        c.documents_unchanged = documents - c.documents_added - c.documents_replaced;
        let unchanged_in = |list: &Passages, p: &Passage| list.find(&p.id).is_some_and(|i| list[i] == *p);
        c.passages_added = self.added.iter().filter(|p| !unchanged_in(old, p)).count();
        c.passages_removed = self.removed.iter().filter(|&&i| !unchanged_in(new, &old[i])).count();
        c
    }
}

/// One id space ([`super::check_ids`]) for `passages`, where the old list was one and
/// `added` are the passages the edit put in: a repeated id is one of theirs beside its
/// neighbour, and a document named by a passage's id is theirs to name or to be.
fn check_ids(passages: &Passages, added: &[Passage]) -> Result<()> {
    for a in added {
        let at = passages.position(&a.id);
        if let (Some(first), Some(second)) = (passages.get(at), passages.get(at + 1)) {
            if first.id == second.id {
                return Err(two_passages(&first.id, first.document(), second.document()));
            }
        }
        // A passage of this one's document names another document's passage.
        if let Some(i) = passages.find(a.document()) {
            if passages[i].document() != a.document() {
                return Err(document_is_passage(a.document(), passages[i].document()));
            }
        }
        // Another document's passages are named after this passage.
        if a.document() != a.id && !passages.rows_of_document(&a.id).is_empty() {
            return Err(document_is_passage(&a.id, a.document()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::{general, plan, Request};
    use crate::corpus::Passage;
    use crate::index::Passages;

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
        let (mut planned, mut refused, mut layered) = (0, 0, 0);
        for seed in 0..4000 {
            let mut next = stream(seed);
            // A few edits in a row: after the first, the old list is layered on the
            // first's (a splice of a splice), as a server's generations are.
            let mut old: Passages = index(&mut next).into();
            for step in 0..3 {
                let whole = old.to_vec();
                let request = request(&mut next, &whole);
                let (fast, rules) = (plan(&old, &request), general(&whole, &request));
                match (fast, rules) {
                    (Ok(a), Ok(b)) => {
                        assert_eq!(a.passages, b.passages, "seed {seed} step {step}: {request:?}");
                        assert_eq!(a.counts, b.counts, "seed {seed} step {step}: {request:?}");
                        assert_eq!(a.passages.document_count(), Passages::whole(a.passages.to_vec()).document_count());
                        planned += 1;
                        layered += usize::from(old.pieces().is_some());
                        old = a.passages;
                    }
                    (Err(_), Err(_)) => refused += 1,
                    (fast, rules) => panic!(
                        "seed {seed} step {step}: {request:?} on {old:?}: {:?} against the rules' {:?}",
                        fast.is_ok(),
                        rules.is_ok()
                    ),
                }
            }
        }
        assert!(
            planned > 3000 && refused > 300 && layered > 1000,
            "{planned} planned ({layered} on layered lists), {refused} refused: the cases cover all"
        );
    }
}
