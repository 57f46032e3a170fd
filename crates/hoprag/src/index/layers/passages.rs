//! A generation's passages: held whole, or layered on a full generation's
//! ([`super`]).

use std::collections::BTreeSet;
use std::sync::Arc;

use rustc_hash::{FxHashMap, FxHashSet};
use sha2::{Digest, Sha256};

use super::{Pieces, Run, Source};
use crate::corpus::{Passage, PassageIdx};
use crate::lazy::Lazy;

/// A generation's passages in canonical order. Cloning shares them.
#[derive(Clone)]
pub struct Passages {
    base: Arc<Layer>,
    /// `None`: the generation is its base, whole.
    overlay: Option<Arc<Overlay>>,
}

/// Passages held together, with what is computed over them on first use and shared by
/// every generation holding them.
struct Layer {
    passages: Vec<Passage>,
    /// Each passage's [`passage_digest`], for [`Passages::checksum`].
    digests: Lazy<Vec<[u8; 32]>>,
    /// The rows of each document named by a passage's `doc`, ascending.
    documents: Lazy<FxHashMap<String, Vec<PassageIdx>>>,
    canonical: Lazy<bool>,
    /// How many documents the passages make, where they are a generation's.
    document_count: Lazy<usize>,
}

struct Overlay {
    pieces: Pieces,
    added: Layer,
    document_count: Lazy<usize>,
    /// Every row in one list, made where a caller asks for a slice
    /// ([`Passages::as_slice`]).
    flat: Lazy<Vec<Passage>>,
}

impl Layer {
    fn new(passages: Vec<Passage>) -> Layer {
        Layer {
            passages,
            digests: Lazy::new(),
            documents: Lazy::new(),
            canonical: Lazy::new(),
            document_count: Lazy::new(),
        }
    }

    fn digests(&self) -> &[[u8; 32]] {
        use rayon::prelude::*;
        self.digests.get_or_compute(|| self.passages.par_iter().map(passage_digest).collect())
    }

    fn documents(&self) -> &FxHashMap<String, Vec<PassageIdx>> {
        self.documents.get_or_compute(|| {
            let mut rows: FxHashMap<String, Vec<PassageIdx>> = FxHashMap::default();
            for (i, p) in self.passages.iter().enumerate() {
                if let Some(d) = &p.doc {
                    rows.entry(d.clone()).or_default().push(i as PassageIdx);
                }
            }
            rows
        })
    }
}

impl From<Vec<Passage>> for Passages {
    fn from(passages: Vec<Passage>) -> Self {
        Passages::whole(passages)
    }
}

impl Passages {
    /// Passages held whole (a full generation, or a list of any order).
    pub fn whole(passages: Vec<Passage>) -> Passages {
        Passages { base: Arc::new(Layer::new(passages)), overlay: None }
    }

    pub fn len(&self) -> usize {
        match &self.overlay {
            Some(o) => o.pieces.len(),
            None => self.base.passages.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn get(&self, row: usize) -> Option<&Passage> {
        match &self.overlay {
            None => self.base.passages.get(row),
            Some(_) if row >= self.len() => None,
            Some(o) => Some(match o.pieces.locate(row) {
                (Source::Base, i) => &self.base.passages[i],
                (Source::Added, i) => &o.added.passages[i],
            }),
        }
    }

    pub fn iter(&self) -> Iter<'_> {
        match &self.overlay {
            None => Iter { passages: self, runs: [].iter(), current: self.base.passages.iter(), left: self.len() },
            Some(o) => Iter { passages: self, runs: o.pieces.runs.iter(), current: [].iter(), left: self.len() },
        }
    }

    /// The rows as one slice: the list itself where it is whole; a layered one is
    /// copied into one list on the first call and kept (for callers that read every
    /// passage anyway, never on an edit's path).
    pub fn as_slice(&self) -> &[Passage] {
        match &self.overlay {
            None => &self.base.passages,
            Some(o) => o.flat.get_or_compute(|| self.iter().cloned().collect()),
        }
    }

    /// The rows as one slice for the caller alone: borrowed where the list is whole, a
    /// copy dropped with it where it is layered (for a pass that needs a slice once,
    /// without keeping a copy for the generation's life as [`Passages::as_slice`] does).
    pub fn contiguous(&self) -> std::borrow::Cow<'_, [Passage]> {
        match (&self.overlay, self.overlay.as_ref().and_then(|o| o.flat.get())) {
            (None, _) => std::borrow::Cow::Borrowed(&self.base.passages),
            (Some(_), Some(flat)) => std::borrow::Cow::Borrowed(flat),
            (Some(_), None) => std::borrow::Cow::Owned(self.to_vec()),
        }
    }

    pub fn to_vec(&self) -> Vec<Passage> {
        self.iter().cloned().collect()
    }

    /// The full generation the rows are layered on: the list itself where it is whole.
    pub fn base(&self) -> Passages {
        Passages { base: self.base.clone(), overlay: None }
    }

    /// Whether both are layered on (or are) the same full generation in memory.
    pub fn same_base(&self, other: &Passages) -> bool {
        Arc::ptr_eq(&self.base, &other.base)
    }

    /// Where each row lives, where the list is layered.
    pub fn pieces(&self) -> Option<&Pieces> {
        self.overlay.as_ref().map(|o| &o.pieces)
    }

    /// The rows not held by the base as they are, in order (none where the list is
    /// whole).
    pub fn added(&self) -> &[Passage] {
        self.overlay.as_ref().map_or(&[], |o| &o.added.passages)
    }

    /// Each row's row of the base, `None` for an added row.
    pub fn of_base(&self) -> Vec<Option<PassageIdx>> {
        match &self.overlay {
            Some(o) => o.pieces.of_base(),
            None => (0..self.len() as PassageIdx).map(Some).collect(),
        }
    }

    /// The first row whose id is not below `id`: where a passage of that id is, or goes.
    pub fn position(&self, id: &str) -> usize {
        self.partition_point(|p| p.id.as_str() < id)
    }

    /// The row of passage `id` (canonical order: a binary search).
    pub fn find(&self, id: &str) -> Option<usize> {
        let i = self.position(id);
        self.get(i).filter(|p| p.id == id).map(|_| i)
    }

    fn partition_point(&self, below: impl Fn(&Passage) -> bool) -> usize {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if below(&self[mid]) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Whether the rows are in canonical order with no id twice (a layered list is:
    /// [`Passages::splice`] keeps it so).
    pub fn is_canonical(&self) -> bool {
        self.overlay.is_some()
            || *self.base.canonical.get_or_compute(|| self.base.passages.windows(2).all(|w| w[0].id < w[1].id))
    }

    /// The rows of the passages whose `doc` is `document`, ascending.
    pub fn rows_of_document(&self, document: &str) -> Vec<usize> {
        let base_rows = self.base.documents().get(document).map_or(&[][..], Vec::as_slice);
        let Some(o) = &self.overlay else { return base_rows.iter().map(|&r| r as usize).collect() };
        let mut rows: Vec<usize> = base_rows.iter().filter_map(|&r| o.pieces.row_of_base(r as usize)).collect();
        // The added layer is an edit's few rows: scanned, not indexed.
        let added = o.pieces.added_rows().zip(&o.added.passages);
        rows.extend(added.filter(|(_, p)| p.doc.as_deref() == Some(document)).map(|(row, _)| row));
        rows.sort_unstable();
        rows
    }

    /// SHA-256 over every passage's [`passage_digest`], in order: the corpus checksum a
    /// manifest records. The base's digests are computed once and shared, so a layered
    /// list's checksum costs a pass over 32 bytes a passage.
    pub fn checksum(&self) -> String {
        let mut h = Sha256::new();
        match &self.overlay {
            None => self.base.digests().iter().for_each(|d| h.update(d)),
            Some(o) => {
                let (base, added) = (self.base.digests(), o.added.digests());
                for (_, run) in o.pieces.runs() {
                    let layer = if run.source == Source::Base { base } else { added };
                    layer[run.start as usize..(run.start + run.len) as usize].iter().for_each(|d| h.update(d));
                }
            }
        }
        hex::encode(h.finalize())
    }

    /// The list with rows `removed` left out and `added` (in canonical order, ids not
    /// held by the rows kept) merged in, layered on the same base: it copies the added
    /// rows and the runs, never the base. Requires a canonical list.
    pub fn splice(&self, removed: &BTreeSet<usize>, added: Vec<Passage>) -> Passages {
        debug_assert!(self.is_canonical() && added.windows(2).all(|w| w[0].id < w[1].id));
        if removed.is_empty() && added.is_empty() {
            return self.clone();
        }
        // On an equal id the old row goes first, as the rules' check names it.
        let at: Vec<usize> = added.iter().map(|a| self.partition_point(|p| p.id <= a.id)).collect();
        let mut added = added.into_iter().zip(at).peekable();
        let mut removed = removed.iter().copied().peekable();
        let mut pieces = Pieces::default();
        let mut own: Vec<Passage> = Vec::with_capacity(self.added().len() + added.len());
        let runs: Vec<(std::ops::Range<usize>, Run)> = match &self.overlay {
            Some(o) => o.pieces.runs().collect(),
            None => vec![(0..self.len(), Run { source: Source::Base, start: 0, len: self.len() as u32 })],
        };
        let mut take_own = |pieces: &mut Pieces, p: Passage| {
            own.push(p);
            pieces.push(Source::Added, own.len() as u32 - 1, 1);
        };
        for (rows, run) in runs {
            let mut r = rows.start;
            while r < rows.end {
                while let Some((p, _)) = added.next_if(|(_, at)| *at == r) {
                    take_own(&mut pieces, p);
                }
                if removed.next_if_eq(&r).is_some() {
                    r += 1;
                    continue;
                }
                let next_removed = removed.peek().copied().unwrap_or(usize::MAX);
                let next_added = added.peek().map_or(usize::MAX, |(_, at)| *at);
                let end = rows.end.min(next_removed).min(next_added).max(r + 1);
                let start = run.start as usize + (r - rows.start);
                match run.source {
                    Source::Base => pieces.push(Source::Base, start as u32, (end - r) as u32),
                    Source::Added => {
                        for p in &self.added()[start..start + (end - r)] {
                            take_own(&mut pieces, p.clone());
                        }
                    }
                }
                r = end;
            }
        }
        for (p, _) in added {
            take_own(&mut pieces, p);
        }
        Passages {
            base: self.base.clone(),
            overlay: Some(Arc::new(Overlay {
                pieces,
                added: Layer::new(own),
                document_count: Lazy::new(),
                flat: Lazy::new(),
            })),
        }
    }

    /// How many distinct documents the passages make (each valid: one id space), counted
    /// once and kept.
    pub fn document_count(&self) -> usize {
        let count = || {
            let named: FxHashSet<&str> = self.iter().filter_map(|p| p.doc.as_deref()).collect();
            let alone = self.iter().filter(|p| p.doc.is_none() && !named.contains(p.id.as_str())).count();
            named.len() + alone
        };
        match &self.overlay {
            Some(o) => *o.document_count.get_or_compute(count),
            None => *self.base.document_count.get_or_compute(count),
        }
    }

    /// The same passages, known to make `count` documents (an edit counts them from the
    /// old list's count and what it changed), where they are freshly layered.
    pub fn with_document_count(mut self, count: usize) -> Passages {
        if let Some(o) = self.overlay.as_mut().and_then(Arc::get_mut) {
            o.document_count = Lazy::with_value(count);
        }
        self
    }
}

impl std::ops::Index<usize> for Passages {
    type Output = Passage;

    fn index(&self, row: usize) -> &Passage {
        match self.get(row) {
            Some(p) => p,
            None => panic!("row {row} of {} passages", self.len()),
        }
    }
}

impl PartialEq for Passages {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl std::fmt::Debug for Passages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<'a> IntoIterator for &'a Passages {
    type Item = &'a Passage;
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

/// The rows of [`Passages`] in order.
#[derive(Clone)]
pub struct Iter<'a> {
    passages: &'a Passages,
    runs: std::slice::Iter<'a, Run>,
    current: std::slice::Iter<'a, Passage>,
    left: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = &'a Passage;

    fn next(&mut self) -> Option<&'a Passage> {
        loop {
            if let Some(p) = self.current.next() {
                self.left -= 1;
                return Some(p);
            }
            let run = self.runs.next()?;
            let layer = match run.source {
                Source::Base => &self.passages.base.passages,
                Source::Added => &self.passages.overlay.as_ref().expect("runs belong to an overlay").added.passages,
            };
            self.current = layer[run.start as usize..(run.start + run.len) as usize].iter();
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for Iter<'_> {}

/// SHA-256 over a passage's id, title and text, and its document and metadata where it
/// has them (so that passages without either keep the digest they had before they
/// existed).
pub fn passage_digest(p: &Passage) -> [u8; 32] {
    let mut h = Sha256::new();
    for field in [&p.id, &p.title, &p.text] {
        h.update((field.len() as u64).to_le_bytes());
        h.update(field.as_bytes());
    }
    if let Some(doc) = &p.doc {
        h.update(b"doc");
        h.update((doc.len() as u64).to_le_bytes());
        h.update(doc.as_bytes());
    }
    if let Some(meta) = &p.meta {
        let bytes = serde_json::to_vec(meta).unwrap_or_default();
        h.update(b"meta");
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(&bytes);
    }
    h.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(id: &str, text: &str) -> Passage {
        Passage::new(id, "", text)
    }

    fn ids(passages: &Passages) -> Vec<&str> {
        passages.iter().map(|p| p.id.as_str()).collect()
    }

    #[test]
    fn splices_share_the_base_and_read_as_the_list_they_stand_for() {
        let base = Passages::whole(vec![p("a", "1"), p("c", "2"), p("e", "3"), p("g", "4")]);
        let first = base.splice(&BTreeSet::from([1]), vec![p("b", "x"), p("f", "y")]);
        assert_eq!(ids(&first), ["a", "b", "e", "f", "g"]);
        assert!(first.same_base(&base));
        assert_eq!(first.added().len(), 2);
        assert_eq!(first.of_base(), [Some(0), None, Some(2), None, Some(3)]);
        // A splice of a splice: an added row removed, one kept (copied), base rows too.
        let second = first.splice(&BTreeSet::from([1, 4]), vec![p("h", "z")]);
        assert_eq!(ids(&second), ["a", "e", "f", "h"]);
        assert_eq!(second.added().iter().map(|p| p.id.as_str()).collect::<Vec<_>>(), ["f", "h"]);
        assert_eq!(second.pieces().unwrap().removed(base.len()), [1, 3]);
        assert_eq!(second.find("f"), Some(2));
        assert_eq!(second.find("b"), None);
        assert_eq!(second.position("b"), 1);
        assert_eq!(second.as_slice(), &second.to_vec()[..]);
        let fresh = Passages::whole(second.to_vec());
        assert_eq!(second, fresh);
        assert_eq!(second.checksum(), fresh.checksum(), "the checksum is the rows', however held");
        assert_ne!(first.checksum(), second.checksum());
    }

    #[test]
    fn documents_are_found_in_both_layers() {
        let doc = |id: &str, d: &str| Passage { doc: Some(d.into()), ..p(id, "") };
        let base = Passages::whole(vec![doc("a1", "A"), doc("a2", "A"), p("b", ""), doc("c1", "C")]);
        let next = base.splice(&BTreeSet::from([0]), vec![doc("a3", "A"), doc("c2", "C")]);
        assert_eq!(ids(&next), ["a2", "a3", "b", "c1", "c2"]);
        assert_eq!(next.rows_of_document("A"), [0, 1]);
        assert_eq!(next.rows_of_document("C"), [3, 4]);
        assert_eq!(base.rows_of_document("A"), [0, 1]);
        assert!(next.rows_of_document("b").is_empty());
    }
}
