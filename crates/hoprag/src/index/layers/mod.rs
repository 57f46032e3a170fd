//! Generations that share what they did not change.
//!
//! An edit changes a few passages of a million. A generation after it is written as a
//! delta on a full generation (its *base*: [`crate::store::delta`]), and it is held in
//! memory the same way: the base's passages and vectors, shared by every generation on
//! that base, a few rows of its own (the *added* layer), and [`Pieces`], which says
//! where each of its rows lives. So an edit copies what it touched, not the corpus:
//! at a million passages a copy of the passages and vectors took 2.5 s and 1.5 GB per
//! edit. This is a piece table (the structure text editors use for the same reason).
//!
//! Rows stay in canonical order (by id), so every method sees the same rows, in the
//! same order, as on a generation read whole.

mod passages;

pub use passages::{passage_digest, Passages};

use std::ops::Range;

use crate::corpus::PassageIdx;

/// The layer a row of a layered generation lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The full generation the layers are on, shared by every generation on it.
    Base,
    /// The generation's own rows: the passages it holds that are not its base's as they
    /// are.
    Added,
}

/// A run of consecutive rows of one layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    pub source: Source,
    /// The run's first row in its layer.
    pub start: u32,
    pub len: u32,
}

/// Where each row of a layered generation lives: runs of consecutive rows of the base or
/// of the added layer, in the generation's row order. A one-document edit adds at most
/// two runs, so a generation on its base holds about twice as many runs as the passages
/// its delta touched.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pieces {
    runs: Vec<Run>,
    /// Each run's end (exclusive) among the generation's rows: ascending.
    ends: Vec<u32>,
    /// The base runs' indices in `runs`: ascending in base row as in generation row
    /// (both orders are canonical), for finding a base row's row in the generation.
    base_runs: Vec<u32>,
    /// Whether a base run starts before the end of one before it: rows whose order is
    /// not their base's (a graph's entities and facts, numbered by first mention, move
    /// when the passage that mentioned them first goes). Such pieces answer
    /// [`Pieces::locate`] and [`Pieces::runs`]; the lookups from the base need the order.
    unordered: bool,
}

impl Pieces {
    /// Rows of the generation.
    pub fn len(&self) -> usize {
        self.ends.last().map_or(0, |&e| e as usize)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many runs: what an edit of the generation copies, beside its own rows.
    pub fn run_count(&self) -> usize {
        self.runs.len()
    }

    /// Whether the rows are too scattered among runs to read through them (a shuffled or
    /// mostly new order): one copy then reads faster.
    pub fn scattered(&self) -> bool {
        self.run_count() > self.len() / 64 + 64
    }

    /// Appends `len` rows of `source` starting at its row `start`, joining the last run
    /// where they continue it.
    pub fn push(&mut self, source: Source, start: u32, len: u32) {
        if len == 0 {
            return;
        }
        let end = self.len() as u32 + len;
        if let Some(last) = self.runs.last_mut() {
            if last.source == source && last.start + last.len == start {
                last.len += len;
                *self.ends.last_mut().expect("one end per run") = end;
                return;
            }
        }
        if source == Source::Base {
            if let Some(&i) = self.base_runs.last() {
                let before = self.runs[i as usize];
                self.unordered |= start < before.start + before.len;
            }
            self.base_runs.push(self.runs.len() as u32);
        }
        self.runs.push(Run { source, start, len });
        self.ends.push(end);
    }

    /// Where row `row` of the generation lives: its layer and its row there.
    pub fn locate(&self, row: usize) -> (Source, usize) {
        let i = self.ends.partition_point(|&e| e as usize <= row);
        let run = self.runs[i];
        let first = self.ends[i] as usize - run.len as usize;
        (run.source, run.start as usize + row - first)
    }

    /// The runs with the generation's rows each covers, in row order.
    pub fn runs(&self) -> impl Iterator<Item = (Range<usize>, Run)> + '_ {
        self.runs.iter().zip(&self.ends).map(|(run, &end)| (end as usize - run.len as usize..end as usize, *run))
    }

    /// The generation's row of base row `base_row`; `None` where the generation does
    /// not hold it.
    pub fn row_of_base(&self, base_row: usize) -> Option<usize> {
        assert!(!self.unordered, "a base row looked up in pieces out of the base's order");
        let b = base_row as u32;
        let at = self.base_runs.partition_point(|&i| self.runs[i as usize].start + self.runs[i as usize].len <= b);
        let i = *self.base_runs.get(at)? as usize;
        let run = self.runs[i];
        (run.start <= b).then(|| self.ends[i] as usize - run.len as usize + (b - run.start) as usize)
    }

    /// Each row's row of the base; `None` for a row of the added layer.
    pub fn of_base(&self) -> Vec<Option<PassageIdx>> {
        let mut out = Vec::with_capacity(self.len());
        for (_, run) in self.runs() {
            match run.source {
                Source::Base => out.extend((run.start..run.start + run.len).map(Some)),
                Source::Added => out.extend(std::iter::repeat_n(None, run.len as usize)),
            }
        }
        out
    }

    /// The base's rows (of `base_len`) the generation does not hold, ascending.
    pub fn removed(&self, base_len: usize) -> Vec<PassageIdx> {
        assert!(!self.unordered, "removed rows asked of pieces out of the base's order");
        let mut out = Vec::new();
        let mut next = 0;
        for &i in &self.base_runs {
            let run = self.runs[i as usize];
            out.extend(next..run.start);
            next = run.start + run.len;
        }
        out.extend(next..base_len as u32);
        out
    }

    /// The rows of the added layer, in order, with the generation's row of each.
    pub fn added_rows(&self) -> impl Iterator<Item = usize> + '_ {
        self.runs().filter(|(_, r)| r.source == Source::Added).flat_map(|(rows, _)| rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_found_in_their_layer_and_back() {
        let mut p = Pieces::default();
        p.push(Source::Base, 0, 3); // rows 0..3: base 0..3
        p.push(Source::Added, 0, 1); // row 3: added 0
        p.push(Source::Base, 4, 2); // rows 4..6: base 4..6 (base 3 removed)
        p.push(Source::Base, 6, 1); // joins the run before
        p.push(Source::Added, 1, 2); // rows 7..9
        assert_eq!(p.len(), 9);
        assert_eq!(p.run_count(), 4);
        let located: Vec<_> = (0..9).map(|r| p.locate(r)).collect();
        use Source::*;
        assert_eq!(
            located,
            [(Base, 0), (Base, 1), (Base, 2), (Added, 0), (Base, 4), (Base, 5), (Base, 6), (Added, 1), (Added, 2)]
        );
        assert_eq!(p.of_base(), [Some(0), Some(1), Some(2), None, Some(4), Some(5), Some(6), None, None]);
        assert_eq!(
            (0..8).map(|b| p.row_of_base(b)).collect::<Vec<_>>(),
            [Some(0), Some(1), Some(2), None, Some(4), Some(5), Some(6), None]
        );
        assert_eq!(p.removed(9), [3, 7, 8]);
        assert_eq!(p.added_rows().collect::<Vec<_>>(), [3, 7, 8]);
    }
}
