//! Metadata filters: which passages a retrieval may return, judged on their `meta`.
//!
//! # Language
//!
//! MongoDB / Pinecone / Chroma style. A filter is a JSON object; its keys are field paths or
//! logical operators, and several keys are AND-ed:
//!
//! ```json
//! {"source": "wiki", "year": {"$gte": 2000, "$lt": 2010},
//!  "$or": [{"tags": {"$in": ["physics", "chemistry"]}}, {"$not": {"author.name": "Anon"}}]}
//! ```
//!
//! - A field path is dotted: `"author.name"` is `meta["author"]["name"]`. Paths go through
//!   objects only (not into arrays); a meta key that is empty or contains a dot is out of reach.
//! - A field's condition is a bare scalar (`$eq`) or an object of operators, AND-ed: `$eq`,
//!   `$ne`, `$in`, `$nin` (arrays of scalars), `$gt`, `$gte`, `$lt`, `$lte` (a number or an
//!   ISO-8601 date `2020-05-01` or date-time with offset `2020-05-01T12:00:00Z`,
//!   `...+02:00`), `$exists` (a boolean).
//! - Logical operators: `$and` and `$or` (non-empty arrays of filters), `$not` (a filter).
//!   The empty filter `{}` matches everything.
//! - Scalars are strings, numbers, booleans and null; `$eq` with an object or an array is an
//!   error (use a dotted path, or `$in`).
//!
//! # Semantics
//!
//! - Numbers compare numerically (`2000 == 2000.0`, as f64), strings exactly (case-sensitive);
//!   booleans and null equal only themselves; there is no cross-type equality
//!   (`"2000" != 2000`).
//! - A number bound matches numeric values only. A date bound matches strings that parse as
//!   ISO-8601 dates or date-times with offset, compared as instants (a date is its midnight
//!   UTC). Any other value is no match, not an error.
//! - An array value matches `$eq`, `$in` and the range operators if ANY element does (tags);
//!   each operator on its own, as in MongoDB: `{"$gt": 4, "$lt": 2}` matches `[1, 5]`.
//! - A missing field (or a passage without meta) matches none of `$eq`, `$in`, the ranges and
//!   `$exists: true`. `$ne`, `$nin`, `$exists: false` and `$not` are the exact negations of
//!   their positive forms, so they DO match a missing field (and `{"tags": {"$ne": "a"}}`
//!   rejects `["a", "b"]`).
//! - `$exists: true` matches any present value, null included.
//!
//! Limits (errors beyond them): nesting 16 levels, 256 conditions, 1,024 values per
//! `$in`/`$nin`, paths of 256 bytes, strings of 1,024 bytes.
//!
//! # Evaluation
//!
//! [`Filter::matches`] judges one passage's meta on the JSON (the reference);
//! [`Filter::select`] judges every passage at once on [`MetaColumns`] (typed columns built
//! once per index) into a [`Selection`] bitset. Both give the same answer.

mod columns;
mod parse;
#[cfg(test)]
mod tests;

use std::str::FromStr;

use serde_json::Value;

pub use columns::{MetaColumns, Selection};

use crate::corpus::Meta;

/// Deepest nesting of filter objects (`$and`, `$or`, `$not`), the whole filter being level 1.
pub const MAX_DEPTH: usize = 16;
/// Most conditions (field operators, a bare value counting as one) in one filter.
pub const MAX_CONDITIONS: usize = 256;
/// Most values in one `$in` or `$nin`.
pub const MAX_VALUES: usize = 1024;
/// Longest field path, in bytes.
pub const MAX_PATH_BYTES: usize = 256;
/// Longest string value, in bytes.
pub const MAX_STRING_BYTES: usize = 1024;

/// A parsed metadata filter. See the [module documentation](self) for the language.
#[derive(Debug, Clone)]
pub struct Filter {
    root: Node,
}

/// A filter reduced to four positive predicates and the three logical nodes: `$ne`, `$nin`
/// and `$exists: false` are `Not` of their positive forms, which makes them exact negations.
#[derive(Debug, Clone)]
enum Node {
    /// Every child matches; no child: everything matches (`{}`).
    And(Vec<Node>),
    Or(Vec<Node>),
    Not(Box<Node>),
    Field(Box<str>, Pred),
}

/// A condition on a present value (a missing field matches none).
#[derive(Debug, Clone)]
enum Pred {
    Eq(Scalar),
    In(Vec<Scalar>),
    Range(Cmp, Bound),
    Exists,
}

#[derive(Debug, Clone, PartialEq)]
enum Scalar {
    Null,
    Bool(bool),
    Num(f64),
    Str(Box<str>),
}

#[derive(Debug, Clone, Copy)]
enum Bound {
    Num(f64),
    /// Nanoseconds since the Unix epoch.
    Instant(i128),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cmp {
    Gt,
    Gte,
    Lt,
    Lte,
}

impl Cmp {
    fn holds<T: PartialOrd>(self, value: T, bound: T) -> bool {
        match self {
            Cmp::Gt => value > bound,
            Cmp::Gte => value >= bound,
            Cmp::Lt => value < bound,
            Cmp::Lte => value <= bound,
        }
    }
}

/// A filter that does not parse: where (`filter.$and[1].year.$gte`) and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{at}: {message}")]
pub struct FilterError {
    at: String,
    message: String,
}

impl FilterError {
    fn new(at: impl Into<String>, message: impl Into<String>) -> FilterError {
        FilterError { at: at.into(), message: message.into() }
    }

    /// The place in the filter, `filter` being the whole, e.g. `filter.$or[0].year.$gte`.
    pub fn at(&self) -> &str {
        &self.at
    }

    /// What is wrong there.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl Filter {
    /// Parses a filter from its JSON form; the error names the place in the filter.
    pub fn parse(value: &Value) -> Result<Filter, FilterError> {
        parse::parse(value).map(|root| Filter { root })
    }

    /// Whether a passage with this meta matches (the reference evaluator, on the JSON).
    pub fn matches(&self, meta: Option<&Meta>) -> bool {
        node_matches(&self.root, meta)
    }

    /// Which passages of `columns` match, all at once (the same answer as [`Filter::matches`]
    /// on each).
    pub fn select(&self, columns: &MetaColumns) -> Selection {
        columns.select(&self.root)
    }

    /// The field paths the filter names, each once, in the order they first appear.
    pub fn fields(&self) -> impl Iterator<Item = &str> {
        let mut fields = Vec::new();
        collect_fields(&self.root, &mut fields);
        fields.into_iter()
    }
}

/// The JSON text of a filter (a CLI's `--filter`).
impl FromStr for Filter {
    type Err = FilterError;

    fn from_str(text: &str) -> Result<Filter, FilterError> {
        let value: Value =
            serde_json::from_str(text).map_err(|e| FilterError::new("filter", format!("invalid JSON: {e}")))?;
        Filter::parse(&value)
    }
}

fn collect_fields<'a>(node: &'a Node, out: &mut Vec<&'a str>) {
    match node {
        Node::And(children) | Node::Or(children) => children.iter().for_each(|c| collect_fields(c, out)),
        Node::Not(child) => collect_fields(child, out),
        Node::Field(path, _) => {
            if !out.contains(&&**path) {
                out.push(path);
            }
        }
    }
}

fn node_matches(node: &Node, meta: Option<&Meta>) -> bool {
    match node {
        Node::And(children) => children.iter().all(|c| node_matches(c, meta)),
        Node::Or(children) => children.iter().any(|c| node_matches(c, meta)),
        Node::Not(child) => !node_matches(child, meta),
        Node::Field(path, pred) => lookup(meta, path).is_some_and(|value| pred_holds(pred, value)),
    }
}

/// The value at a dotted path, through objects only.
fn lookup<'a>(meta: Option<&'a Meta>, path: &str) -> Option<&'a Value> {
    let mut segments = path.split('.');
    let mut value = meta?.get(segments.next()?)?;
    for segment in segments {
        value = value.as_object()?.get(segment)?;
    }
    Some(value)
}

fn pred_holds(pred: &Pred, value: &Value) -> bool {
    match (pred, value) {
        (Pred::Exists, _) => true,
        (_, Value::Array(items)) => items.iter().any(|item| scalar_holds(pred, item)),
        _ => scalar_holds(pred, value),
    }
}

fn scalar_holds(pred: &Pred, value: &Value) -> bool {
    match pred {
        Pred::Eq(scalar) => scalar_eq(value, scalar),
        Pred::In(scalars) => scalars.iter().any(|s| scalar_eq(value, s)),
        Pred::Range(cmp, Bound::Num(bound)) => value.as_f64().is_some_and(|v| cmp.holds(v, *bound)),
        Pred::Range(cmp, Bound::Instant(bound)) => {
            value.as_str().and_then(parse_instant).is_some_and(|t| cmp.holds(t, *bound))
        }
        Pred::Exists => true,
    }
}

fn scalar_eq(value: &Value, scalar: &Scalar) -> bool {
    match (value, scalar) {
        (Value::Null, Scalar::Null) => true,
        (Value::Bool(a), Scalar::Bool(b)) => a == b,
        (Value::Number(a), Scalar::Num(b)) => a.as_f64() == Some(*b),
        (Value::String(a), Scalar::Str(b)) => **a == **b,
        _ => false,
    }
}

/// An ISO-8601 date (`YYYY-MM-DD`, its midnight UTC) or date-time with offset, as nanoseconds
/// since the epoch. Both evaluators and the parser use this one function, so they agree on
/// what is a date. Longer strings are not tried: no date-time is 64 bytes long.
fn parse_instant(text: &str) -> Option<i128> {
    if !(10..=64).contains(&text.len()) || !text.as_bytes()[0].is_ascii_digit() {
        return None;
    }
    // Exactly the date form: jiff's `Date` would also take a date-time without offset
    // (dropping its time), which is no instant.
    if text.len() == 10 {
        let date: jiff::civil::Date = text.parse().ok()?;
        let midnight = jiff::tz::TimeZone::UTC.to_timestamp(date.to_datetime(jiff::civil::Time::midnight())).ok()?;
        return Some(midnight.as_nanosecond());
    }
    text.parse::<jiff::Timestamp>().ok().map(|t| t.as_nanosecond())
}
