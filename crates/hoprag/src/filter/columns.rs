//! The columnar evaluator: all passages' metas as typed columns, one per field path, and a
//! filter evaluated a column at a time into bitsets (AND, OR and NOT are word-wise).

use std::cmp::Ordering;
use std::fmt;

use rustc_hash::FxHashMap;
use serde_json::Value;

use super::{parse_instant, Bound, Cmp, Node, Pred, Scalar, MAX_PATH_BYTES, MAX_STRING_BYTES};
use crate::corpus::Meta;

/// Which passages match a filter: a bitset over the passages `0..universe()`.
#[derive(Clone, PartialEq, Eq)]
pub struct Selection {
    words: Vec<u64>,
    len: usize,
}

impl Selection {
    /// No passage of `len`.
    pub fn none(len: usize) -> Selection {
        Selection { words: vec![0; len.div_ceil(64)], len }
    }

    /// Every passage of `len`.
    pub fn all(len: usize) -> Selection {
        let mut selection = Selection { words: vec![!0; len.div_ceil(64)], len };
        selection.clear_tail();
        selection
    }

    /// The given passages of `len` (those past `len` are left out).
    pub fn of(len: usize, passages: impl IntoIterator<Item = usize>) -> Selection {
        let mut selection = Selection::none(len);
        for i in passages.into_iter().filter(|&i| i < len) {
            selection.words[i / 64] |= 1 << (i % 64);
        }
        selection
    }

    /// The number of passages the selection ranges over (selected or not).
    pub fn universe(&self) -> usize {
        self.len
    }

    /// Whether passage `i` is selected (false beyond the universe).
    pub fn contains(&self, i: usize) -> bool {
        i < self.len && (self.words[i / 64] >> (i % 64)) & 1 == 1
    }

    /// The number of passages selected.
    pub fn count(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// The selected passages, ascending.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.words.iter().enumerate().flat_map(|(i, &word)| Bits { word, base: i * 64 })
    }

    fn is_clear(&self) -> bool {
        self.words.iter().all(|&w| w == 0)
    }

    /// ORs in a column's bits, which may be shorter (they stop at the last passage set).
    fn union(&mut self, words: &[u64]) {
        self.words.iter_mut().zip(words).for_each(|(a, b)| *a |= b);
    }

    fn intersect(&mut self, other: &Selection) {
        self.words.iter_mut().zip(&other.words).for_each(|(a, b)| *a &= b);
    }

    fn subtract(&mut self, other: &Selection) {
        self.words.iter_mut().zip(&other.words).for_each(|(a, b)| *a &= !b);
    }

    fn negate(&mut self) {
        self.words.iter_mut().for_each(|w| *w = !*w);
        self.clear_tail();
    }

    /// Zeroes the bits past `len` in the last word, so that counts and NOT stay exact.
    fn clear_tail(&mut self) {
        if !self.len.is_multiple_of(64) {
            if let Some(last) = self.words.last_mut() {
                *last &= (1u64 << (self.len % 64)) - 1;
            }
        }
    }
}

/// Not the bits: a million passages would print sixteen thousand words.
impl fmt::Debug for Selection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Selection").field("universe", &self.len).field("count", &self.count()).finish()
    }
}

/// The set bits of one word.
struct Bits {
    word: u64,
    base: usize,
}

impl Iterator for Bits {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        if self.word == 0 {
            return None;
        }
        let bit = self.word.trailing_zeros() as usize;
        self.word &= self.word - 1;
        Some(self.base + bit)
    }
}

/// Every passage's meta, column-wise, for [`Filter::select`](super::Filter::select). Built
/// once per index; a passage without meta has no fields.
#[derive(Clone)]
pub struct MetaColumns {
    len: usize,
    columns: FxHashMap<Box<str>, Column>,
    strings: Strings,
}

/// One field path's values. Bitsets may be shorter than the passages (they end at the last
/// passage set); typed values are (row, value) lists in row order, several rows for an array.
#[derive(Clone, Default)]
struct Column {
    /// A value of any kind, null, object and array included.
    present: Vec<u64>,
    null: Vec<u64>,
    /// `true` (for an array: among its elements), and `false`.
    yes: Vec<u64>,
    no: Vec<u64>,
    nums: Entries<f64>,
    /// Interned ids of [`Strings`].
    strs: Entries<u32>,
    /// The strings that are ISO-8601 dates, as nanoseconds since the epoch.
    dates: Entries<i128>,
}

#[derive(Clone, Default)]
struct Entries<T> {
    rows: Vec<u32>,
    values: Vec<T>,
}

impl<T: Copy> Entries<T> {
    fn push(&mut self, row: u32, value: T) {
        self.rows.push(row);
        self.values.push(value);
    }

    /// Selects the rows of the values `keep` takes. Rows ascend (the build adds them in
    /// order), so bits gather in a register and each word is written once: no load-store
    /// chain through memory, and `keep` runs branch-free. (Unordered rows would still be right.)
    fn scan(&self, selection: &mut Selection, keep: impl Fn(T) -> bool) {
        let (mut current, mut bits) = (0, 0u64);
        for (&row, &value) in self.rows.iter().zip(&self.values) {
            let word = row as usize / 64;
            if word != current {
                selection.words[current] |= bits;
                (current, bits) = (word, 0);
            }
            bits |= u64::from(keep(value)) << (row % 64);
        }
        if bits != 0 {
            selection.words[current] |= bits;
        }
    }
}

/// The string interner shared by all columns; a string is tried as a date once, here.
#[derive(Clone, Default)]
struct Strings {
    ids: FxHashMap<Box<str>, u32>,
    instants: Vec<Option<i128>>,
}

impl Strings {
    fn intern(&mut self, text: &str) -> (u32, Option<i128>) {
        if let Some(&id) = self.ids.get(text) {
            return (id, self.instants[id as usize]);
        }
        let id = u32::try_from(self.instants.len()).expect("fewer than 2^32 distinct strings");
        let instant = parse_instant(text);
        self.ids.insert(text.into(), id);
        self.instants.push(instant);
        (id, instant)
    }
}

fn set(bits: &mut Vec<u64>, row: u32) {
    let word = row as usize / 64;
    if word >= bits.len() {
        bits.resize(word + 1, 0);
    }
    bits[word] |= 1 << (row % 64);
}

impl MetaColumns {
    /// The columns of the passages' metas, in passage order (the i-th meta is passage i).
    pub fn build<'a>(metas: impl IntoIterator<Item = Option<&'a Meta>>) -> MetaColumns {
        let mut columns = MetaColumns { len: 0, columns: FxHashMap::default(), strings: Strings::default() };
        let mut path = String::new();
        for meta in metas {
            let row = u32::try_from(columns.len).expect("fewer than 2^32 passages");
            if let Some(meta) = meta {
                columns.add_object(row, meta, &mut path);
            }
            columns.len += 1;
        }
        for column in columns.columns.values_mut() {
            column.nums.rows.shrink_to_fit();
            column.nums.values.shrink_to_fit();
            column.strs.rows.shrink_to_fit();
            column.strs.values.shrink_to_fit();
        }
        columns
    }

    /// The number of passages.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether some passage has a value (of any kind, null included) at this path.
    pub fn has_field(&self, path: &str) -> bool {
        self.columns.contains_key(path)
    }

    /// The field paths some passage has, leaves and intermediate objects, in no order.
    pub fn fields(&self) -> impl Iterator<Item = &str> {
        self.columns.keys().map(|k| &**k)
    }

    /// Adds the fields of an object at `path` (the empty path: the meta itself).
    fn add_object(&mut self, row: u32, object: &Meta, path: &mut String) {
        for (key, value) in object {
            // No filter path reaches these: paths split at dots, and have no empty segment.
            if key.is_empty() || key.contains('.') {
                continue;
            }
            let base = path.len();
            if base > 0 {
                path.push('.');
            }
            path.push_str(key);
            // Nor longer paths; skipping them also bounds the recursion.
            if path.len() <= MAX_PATH_BYTES {
                self.add_value(row, value, path);
                if let Value::Object(inner) = value {
                    self.add_object(row, inner, path);
                }
            }
            path.truncate(base);
        }
    }

    fn add_value(&mut self, row: u32, value: &Value, path: &str) {
        // Two lookups: the borrow checker refuses get_mut-or-insert in one.
        if !self.columns.contains_key(path) {
            self.columns.insert(path.into(), Column::default());
        }
        let column = self.columns.get_mut(path).expect("inserted above");
        set(&mut column.present, row);
        match value {
            Value::Array(items) => items.iter().for_each(|item| add_scalar(column, &mut self.strings, row, item)),
            _ => add_scalar(column, &mut self.strings, row, value),
        }
    }

    pub(super) fn select(&self, node: &Node) -> Selection {
        match node {
            Node::And(children) => {
                let mut children = children.iter();
                let Some(first) = children.next() else { return Selection::all(self.len) };
                let mut selection = self.select(first);
                for child in children {
                    if selection.is_clear() {
                        break;
                    }
                    match child {
                        Node::Not(inner) => selection.subtract(&self.select(inner)),
                        _ => selection.intersect(&self.select(child)),
                    }
                }
                selection
            }
            Node::Or(children) => {
                let mut selection = Selection::none(self.len);
                for child in children {
                    selection.union(&self.select(child).words);
                }
                selection
            }
            Node::Not(child) => {
                let mut selection = self.select(child);
                selection.negate();
                selection
            }
            Node::Field(path, pred) => {
                let mut selection = Selection::none(self.len);
                if let Some(column) = self.columns.get(&**path) {
                    self.pred(column, pred, &mut selection);
                }
                selection
            }
        }
    }

    fn pred(&self, column: &Column, pred: &Pred, selection: &mut Selection) {
        match pred {
            Pred::Exists => selection.union(&column.present),
            Pred::Eq(scalar) => self.any_of(column, std::slice::from_ref(scalar), selection),
            Pred::In(scalars) => self.any_of(column, scalars, selection),
            Pred::Range(cmp, Bound::Num(bound)) => range(&column.nums, *cmp, *bound, selection),
            Pred::Range(cmp, Bound::Instant(bound)) => range(&column.dates, *cmp, *bound, selection),
        }
    }

    /// The rows with a value (or an array element) equal to one of `scalars`.
    fn any_of(&self, column: &Column, scalars: &[Scalar], selection: &mut Selection) {
        let mut nums = Vec::new();
        let mut ids = Vec::new();
        for scalar in scalars {
            match scalar {
                Scalar::Null => selection.union(&column.null),
                Scalar::Bool(true) => selection.union(&column.yes),
                Scalar::Bool(false) => selection.union(&column.no),
                Scalar::Num(x) => nums.push(*x),
                // A string no passage has matches nothing.
                Scalar::Str(text) => ids.extend(self.strings.ids.get(text).copied()),
            }
        }
        match *nums.as_slice() {
            [] => {}
            [x] => column.nums.scan(selection, |v| v == x),
            _ => {
                // total_cmp refines partial_cmp on non-NaN values (JSON has none), so the
                // search below finds 0.0 for -0.0 as == does.
                nums.sort_by(f64::total_cmp);
                nums.dedup();
                let cmp = |x: &f64, v: f64| x.partial_cmp(&v).unwrap_or(Ordering::Less);
                column.nums.scan(selection, |v| nums.binary_search_by(|x| cmp(x, v)).is_ok());
            }
        }
        match *ids.as_slice() {
            [] => {}
            [id] => column.strs.scan(selection, |v| v == id),
            _ => {
                // A bitset over the dictionary: one lookup per value, whatever the list.
                let mut wanted = vec![0u64; self.strings.instants.len().div_ceil(64)];
                ids.iter().for_each(|&id| wanted[id as usize / 64] |= 1 << (id % 64));
                column.strs.scan(selection, |v| (wanted[v as usize / 64] >> (v % 64)) & 1 == 1);
            }
        }
    }
}

/// Not the columns: their names and sizes.
impl fmt::Debug for MetaColumns {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MetaColumns")
            .field("len", &self.len)
            .field("fields", &self.columns.len())
            .field("strings", &self.strings.instants.len())
            .finish()
    }
}

fn add_scalar(column: &mut Column, strings: &mut Strings, row: u32, value: &Value) {
    match value {
        Value::Null => set(&mut column.null, row),
        Value::Bool(true) => set(&mut column.yes, row),
        Value::Bool(false) => set(&mut column.no, row),
        Value::Number(n) => {
            if let Some(x) = n.as_f64() {
                column.nums.push(row, x);
            }
        }
        // A longer string equals no filter string and is no date: present, nothing more.
        Value::String(text) if text.len() <= MAX_STRING_BYTES => {
            let (id, instant) = strings.intern(text);
            column.strs.push(row, id);
            if let Some(instant) = instant {
                column.dates.push(row, instant);
            }
        }
        // Objects and arrays inside an array match no scalar condition.
        _ => {}
    }
}

/// One loop per comparison, each a tight scan.
fn range<T: Copy + PartialOrd>(entries: &Entries<T>, cmp: Cmp, bound: T, selection: &mut Selection) {
    match cmp {
        Cmp::Gt => entries.scan(selection, |v| v > bound),
        Cmp::Gte => entries.scan(selection, |v| v >= bound),
        Cmp::Lt => entries.scan(selection, |v| v < bound),
        Cmp::Lte => entries.scan(selection, |v| v <= bound),
    }
}
