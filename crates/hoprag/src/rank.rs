//! The one order of ranked scores: descending, NaN last. Every sort of scores goes
//! through here, so that a NaN (from a degenerate embedding, say) sinks to the bottom of
//! a list instead of coming first, as `b.total_cmp(&a)` alone would put it.

use std::cmp::Ordering;

/// A score that can be ranked.
pub trait Score: Copy {
    fn is_nan_score(self) -> bool;
    fn total(self, other: Self) -> Ordering;
}

impl Score for f32 {
    fn is_nan_score(self) -> bool {
        self.is_nan()
    }
    fn total(self, other: Self) -> Ordering {
        self.total_cmp(&other)
    }
}

impl Score for f64 {
    fn is_nan_score(self) -> bool {
        self.is_nan()
    }
    fn total(self, other: Self) -> Ordering {
        self.total_cmp(&other)
    }
}

/// A score with the row it scores, ranked by the score alone.
impl Score for (f32, u32) {
    fn is_nan_score(self) -> bool {
        self.0.is_nan()
    }
    fn total(self, other: Self) -> Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// The lowest and the highest of `scores`, NaN ignored; `(∞, −∞)` when there is none.
pub fn range(scores: &[f32]) -> (f32, f32) {
    scores.iter().fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), &s| (lo.min(s), hi.max(s)))
}

/// Best first: higher scores before lower ones, every NaN after every number.
pub fn desc<T: Score>(a: T, b: T) -> Ordering {
    match (a.is_nan_score(), b.is_nan_score()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        (false, false) => b.total(a),
    }
}

/// Smallest first, every NaN after every number (percentiles, PIT).
pub fn asc<T: Score>(a: T, b: T) -> Ordering {
    match (a.is_nan_score(), b.is_nan_score()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        (false, false) => a.total(b),
    }
}

/// Sorts `(passage, score)` pairs best first, ties by passage index (deterministic).
pub fn sort_hits<P: Ord + Copy, T: Score>(list: &mut [(P, T)]) {
    list.sort_by(|a, b| desc(a.1, b.1).then(a.0.cmp(&b.0)));
}

/// The `n` best of `scores` (one per item, the item being its index) as a ranked list,
/// ties by index: a partial selection, then a sort of the head only.
pub fn top(scores: &[f32], n: usize) -> Vec<(u32, f32)> {
    let mut list: Vec<(u32, f32)> = scores.iter().enumerate().map(|(i, &s)| (i as u32, s)).collect();
    if n > 0 && n < list.len() {
        list.select_nth_unstable_by(n - 1, |a, b| desc(a.1, b.1).then(a.0.cmp(&b.0)));
        list.truncate(n);
    }
    sort_hits(&mut list);
    list
}

/// The `n`-th largest of the values offered (−∞'s stand-in, `T::lowest()`, when fewer
/// than `n`; `n` at least 1; NaN never counts), keeping only the values above the `n`-th
/// largest seen so far, so that most offers are one comparison; partial results merge
/// (one per parallel task).
pub struct NthLargest<T> {
    n: usize,
    kept: Vec<T>,
    floor: T,
}

/// Scores with a least value, below every number.
pub trait Bounded: Score + PartialOrd {
    fn lowest() -> Self;
}

impl Bounded for f32 {
    fn lowest() -> Self {
        f32::NEG_INFINITY
    }
}

impl Bounded for f64 {
    fn lowest() -> Self {
        f64::NEG_INFINITY
    }
}

impl Bounded for (f32, u32) {
    fn lowest() -> Self {
        (f32::NEG_INFINITY, 0)
    }
}

impl<T: Bounded> NthLargest<T> {
    pub fn new(n: usize) -> Self {
        NthLargest { n: n.max(1), kept: Vec::new(), floor: T::lowest() }
    }

    #[inline]
    pub fn offer(&mut self, x: T) {
        if x > self.floor {
            self.kept.push(x);
            if self.kept.len() >= 4 * self.n {
                self.shrink();
            }
        }
    }

    /// A value every kept one is at least (the lowest until `n` are kept): an offer
    /// at or below it is not kept.
    #[inline]
    pub fn floor(&self) -> &T {
        &self.floor
    }

    /// Keeps the `n` largest; the smallest of them becomes the floor.
    fn shrink(&mut self) {
        if self.kept.len() >= self.n {
            self.kept.select_nth_unstable_by(self.n - 1, |a, b| desc(*a, *b));
            self.kept.truncate(self.n);
            self.floor = self.kept[self.n - 1];
        }
    }

    pub fn merge(&mut self, other: NthLargest<T>) {
        other.kept.into_iter().for_each(|x| self.offer(x));
    }

    /// The `n` largest values offered (all of them when fewer), in no order.
    pub fn into_largest(mut self) -> Vec<T> {
        self.shrink();
        self.kept
    }

    pub fn get(mut self) -> T {
        self.shrink();
        match self.kept.len() >= self.n {
            true => self.floor,
            false => T::lowest(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_is_the_sorted_head_with_ties_by_index() {
        let scores = [0.1f32, f32::NAN, 0.5, 0.5, 0.3];
        assert_eq!(top(&scores, 2), [(2, 0.5), (3, 0.5)]);
        assert_eq!(top(&scores, 4), [(2, 0.5), (3, 0.5), (4, 0.3), (0, 0.1)]);
        let all = top(&scores, 9);
        assert_eq!(all.len(), 5);
        assert!(all[4].1.is_nan());
    }

    #[test]
    fn nan_sorts_last_both_ways() {
        let mut xs = [0.5f32, f32::NAN, 2.0, -f32::NAN, -1.0];
        xs.sort_by(|a, b| desc(*a, *b));
        assert_eq!(&xs[..3], &[2.0, 0.5, -1.0]);
        assert!(xs[3].is_nan() && xs[4].is_nan());
        let mut ys = [0.5f64, -f64::NAN, 2.0, f64::NAN, -1.0];
        ys.sort_by(|a, b| asc(*a, *b));
        assert_eq!(&ys[..3], &[-1.0, 0.5, 2.0]);
        assert!(ys[3].is_nan() && ys[4].is_nan());
        let mut hits = vec![(3u32, f32::NAN), (2, 0.1), (1, 0.1), (0, 0.0)];
        sort_hits(&mut hits);
        assert_eq!(hits.iter().map(|h| h.0).collect::<Vec<_>>(), vec![1, 2, 0, 3]);
    }

    #[test]
    fn the_nth_largest_survives_shrinks_and_merges() {
        let values: Vec<f32> = (0..1000).map(|i| ((i * 7919) % 1000) as f32).collect();
        for n in [1, 3, 64, 999, 1000, 1001] {
            let (mut a, mut b) = (NthLargest::new(n), NthLargest::new(n));
            values[..400].iter().for_each(|&x| a.offer(x));
            values[400..].iter().for_each(|&x| b.offer(x));
            a.merge(b);
            let want = if n <= 1000 { 1000.0 - n as f32 } else { f32::NEG_INFINITY };
            assert_eq!(a.get(), want, "n {n}");
        }
    }
}
