//! Delta generations: an edit stored as what changed since the last full generation,
//! so that it writes what it touched, not what the index holds.
//!
//! A full generation holds every part of an index. A delta generation holds its own
//! lexical index (kept in parts: an edit writes only its passages' part) and, for
//! everything else, a reference to a full generation (its *base*) and the net change
//! since it ([`Delta`]): the base's rows no longer held, and the passages not in the
//! base as they are, with their vectors. Reading it applies the delta in memory by the
//! code an edit runs ([`super::edit`]'s derivation): the same passages in canonical
//! order, the same vectors, the HNSW graph updated, the entity graph derived from the
//! base's. So a delta generation is the same index as the full one a fresh build of its
//! passages makes, and compacting it ([`super::edit::compact`]) writes that one.
//!
//! The delta is net: each edit from a delta generation writes a new delta on the same
//! base (the change of every edit since), so reading never replays a chain. Past
//! [`DELTA_LIMIT`], an edit writes a full generation instead.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::corpus::{Passage, PassageIdx};
use crate::error::{Error, Result};
use crate::index::{Matrix, Passages};

/// Passages a delta may hold (removed and added together) before an edit writes a full
/// generation: 1 % of the base, and at least 1,000. Reading a delta generation inserts
/// its added passages into the base's HNSW graph (about 0.5 ms each at a million
/// passages on 2 cores) and derives the entity graph from the base's, so a delta stays
/// small next to the base; a thousand one-document edits fit in one.
pub fn delta_limit(base_passages: usize) -> usize {
    (base_passages / 100).max(1000)
}

/// The net change of a generation from its base.
#[derive(Debug, Clone)]
pub struct Delta {
    /// Rows of the base that the generation no longer holds, ascending.
    pub removed: Vec<PassageIdx>,
    /// The generation's passages that are not a row of the base as they are, in
    /// canonical order.
    pub added: Vec<Passage>,
    /// Their vectors, row for row.
    pub vectors: Matrix,
}

impl Delta {
    /// The delta of `passages` (canonical order, with `vectors`) from a base of
    /// `base_len` passages, where `of_base` gives each passage's identical base row.
    pub fn between(base_len: usize, of_base: &[Option<PassageIdx>], passages: &[Passage], vectors: &Matrix) -> Delta {
        let mut held = vec![false; base_len];
        let mut added = Vec::new();
        let mut flat = Vec::new();
        for (i, (p, row)) in passages.iter().zip(of_base).enumerate() {
            match row {
                Some(r) => held[*r as usize] = true,
                None => {
                    added.push(p.clone());
                    flat.extend_from_slice(vectors.row(i as PassageIdx));
                }
            }
        }
        let removed = (0..base_len as PassageIdx).filter(|&r| !held[r as usize]).collect();
        Delta { removed, added, vectors: Matrix::from_flat(vectors.dim(), flat) }
    }

    /// Passages the delta holds (removed and added).
    pub fn len(&self) -> usize {
        self.removed.len() + self.added.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The generation: the base's rows not removed and the added passages, merged in
    /// canonical order, layered on the base ([`crate::index::layers`]: nothing of the
    /// base is copied), with their vectors and each passage's base row (`None`: added).
    /// `location` names the generation in errors.
    pub fn apply(
        &self,
        base: &Passages,
        base_vectors: Arc<Matrix>,
        location: &str,
    ) -> Result<(Passages, Matrix, Vec<Option<PassageIdx>>)> {
        let err = |m: String| Error::index(std::path::Path::new(location), m);
        if self.removed.iter().any(|&r| r as usize >= base.len()) || !self.removed.windows(2).all(|w| w[0] < w[1]) {
            return Err(err(format!("the delta removes rows outside its base of {} passages", base.len())));
        }
        if self.vectors.rows() != self.added.len() || self.vectors.dim() != base_vectors.dim() {
            return Err(err(format!(
                "the delta holds {} vectors of dimension {} for {} passages (dimension {})",
                self.vectors.rows(),
                self.vectors.dim(),
                self.added.len(),
                base_vectors.dim()
            )));
        }
        if !base.is_canonical() || base_vectors.rows() != base.len() {
            return Err(err("the delta's base is not a full generation in canonical order".into()));
        }
        if let Some(w) = self.added.windows(2).find(|w| w[0].id >= w[1].id) {
            return Err(err(format!("the delta's passages are not in canonical order at {:?}", w[1].id)));
        }
        let removed: BTreeSet<usize> = self.removed.iter().map(|&r| r as usize).collect();
        let passages = base.splice(&removed, self.added.clone());
        for a in &self.added {
            let at = passages.position(&a.id);
            if passages.get(at + 1).is_some_and(|next| next.id == a.id) {
                return Err(err(format!("the delta adds passage {:?}, which its base still holds", a.id)));
            }
        }
        let Some(pieces) = passages.pieces() else {
            return Ok((passages, (*base_vectors).clone(), (0..base.len() as PassageIdx).map(Some).collect()));
        };
        let vectors = Matrix::layered(base_vectors, pieces.clone(), self.vectors.clone());
        Ok((passages.clone(), vectors, pieces.of_base()))
    }
}

/// Each of `passages`' identical row in the base of `old` (a generation of `old_passages`
/// whose own rows are `old_of_base`'s, or the base itself where `None`): by id, and
/// equal in every field. Both lists in canonical order.
pub fn of_base_after(
    old_passages: &[Passage],
    old_of_base: Option<&[Option<PassageIdx>]>,
    passages: &[Passage],
) -> Vec<Option<PassageIdx>> {
    let mut rows = vec![None; passages.len()];
    for (j, i) in crate::corpus::same_ids(old_passages, passages) {
        if old_passages[j] == passages[i] {
            rows[i] = old_of_base.map_or(Some(j as PassageIdx), |of_base| of_base[j]);
        }
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(id: &str, text: &str) -> Passage {
        Passage::new(id, "", text)
    }

    fn vectors(n: usize, start: f32) -> Matrix {
        Matrix::from_flat(2, (0..n).flat_map(|i| [start + i as f32, -(start + i as f32)]).collect())
    }

    #[test]
    fn a_delta_applied_to_its_base_gives_the_generation_back() {
        let base = vec![p("a", "1"), p("b", "2"), p("c", "3"), p("d", "4")];
        let base_vectors = vectors(4, 0.0);
        // "b" removed, "c" rewritten in place, "bb" and "e" added.
        let passages = vec![p("a", "1"), p("bb", "x"), p("c", "3!"), p("d", "4"), p("e", "y")];
        let v = Matrix::from_flat(2, vec![0.0, -0.0, 10.0, -10.0, 11.0, -11.0, 3.0, -3.0, 12.0, -12.0]);
        let of_base = of_base_after(&base, None, &passages);
        assert_eq!(of_base, [Some(0), None, None, Some(3), None]);
        let delta = Delta::between(base.len(), &of_base, &passages, &v);
        assert_eq!(delta.removed, [1, 2]);
        assert_eq!(delta.added.iter().map(|p| p.id.as_str()).collect::<Vec<_>>(), ["bb", "c", "e"]);
        let (again, again_v, again_rows) = delta.apply(&base.clone().into(), Arc::new(base_vectors), "test").unwrap();
        assert_eq!(again.to_vec(), passages);
        assert_eq!(again_v.as_flat(), v.as_flat());
        assert_eq!(again_rows, of_base);
    }

    #[test]
    fn a_delta_from_a_delta_generation_is_net() {
        let base = vec![p("a", "1"), p("b", "2")];
        let first = vec![p("a", "1"), p("c", "3")];
        let first_rows = of_base_after(&base, None, &first);
        // The second edit puts "b" back as it was: a row of the base again.
        let second = vec![p("a", "1"), p("b", "2"), p("c", "3")];
        let rows = of_base_after(&first, Some(&first_rows), &second);
        assert_eq!(rows, [Some(0), None, None], "b came back as a new passage of the first generation");
        let delta = Delta::between(base.len(), &rows, &second, &vectors(3, 0.0));
        assert_eq!((delta.removed.len(), delta.added.len()), (1, 2));
    }

    #[test]
    fn a_damaged_delta_is_refused() {
        let base = vec![p("a", "1"), p("b", "2")];
        let delta = Delta { removed: vec![], added: vec![p("b", "x")], vectors: vectors(1, 0.0) };
        let err = delta.apply(&base.clone().into(), Arc::new(vectors(2, 0.0)), "g9").unwrap_err().to_string();
        assert!(err.contains("\"b\"") && err.contains("g9"), "{err}");
        let delta = Delta { removed: vec![5], added: vec![], vectors: vectors(0, 0.0) };
        assert!(delta.apply(&base.into(), Arc::new(vectors(2, 0.0)), "g9").is_err());
    }
}
