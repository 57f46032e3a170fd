//! JSON to [`Node`]: every check of the language and its limits, each error naming its place.

use serde_json::{Map, Value};

use super::{
    parse_instant, Bound, Cmp, FilterError, Node, Pred, Scalar, MAX_CONDITIONS, MAX_DEPTH, MAX_PATH_BYTES,
    MAX_STRING_BYTES, MAX_VALUES,
};

const FIELD_OPERATORS: &str = "$eq, $ne, $in, $nin, $gt, $gte, $lt, $lte, $exists";
const SCALAR: &str = "a string, number, boolean or null";

pub(super) fn parse(value: &Value) -> Result<Node> {
    Parser { conditions: 0 }.filter(value, "filter", 1)
}

struct Parser {
    conditions: usize,
}

type Result<T> = std::result::Result<T, FilterError>;

impl Parser {
    fn filter(&mut self, value: &Value, at: &str, depth: usize) -> Result<Node> {
        if depth > MAX_DEPTH {
            return Err(FilterError::new(at, format!("nested deeper than {MAX_DEPTH} levels")));
        }
        let Value::Object(object) = value else {
            return Err(FilterError::new(at, format!("expected a filter object, found {}", show(value))));
        };
        let mut nodes = Vec::with_capacity(object.len());
        for (key, value) in object {
            let at = format!("{at}.{key}");
            match key.as_str() {
                "$and" | "$or" => {
                    let Some(items) = value.as_array().filter(|items| !items.is_empty()) else {
                        let found = show(value);
                        return Err(FilterError::new(
                            at,
                            format!("expected a non-empty array of filters, found {found}"),
                        ));
                    };
                    let children = items
                        .iter()
                        .enumerate()
                        .map(|(i, item)| self.filter(item, &format!("{at}[{i}]"), depth + 1))
                        .collect::<Result<Vec<_>>>()?;
                    nodes.push(if key == "$and" { Node::And(children) } else { Node::Or(children) });
                }
                "$not" => nodes.push(Node::Not(Box::new(self.filter(value, &at, depth + 1)?))),
                _ if key.starts_with('$') => {
                    return Err(FilterError::new(
                        at,
                        "unknown operator (known here: $and, $or, $not; field operators go in a field's \
                         condition, {\"year\": {\"$gte\": 2000}})",
                    ))
                }
                _ => {
                    check_path(key, &at)?;
                    self.condition(key, value, &at, &mut nodes)?;
                }
            }
        }
        Ok(and(nodes))
    }

    /// A field's condition: a bare scalar or an object of operators.
    fn condition(&mut self, path: &str, value: &Value, at: &str, out: &mut Vec<Node>) -> Result<()> {
        let field = |pred| Node::Field(path.into(), pred);
        let not = |node| Node::Not(Box::new(node));
        let operators = match value {
            Value::Object(operators) => operators,
            _ => {
                self.count(at)?;
                out.push(field(Pred::Eq(eq_value(path, value, at)?)));
                return Ok(());
            }
        };
        if operators.is_empty() {
            return Err(FilterError::new(at, "empty condition; expected operators such as {\"$eq\": ...}"));
        }
        for (op, arg) in operators {
            if !op.starts_with('$') {
                return Err(nested_key(path, op, operators, at));
            }
            let at = format!("{at}.{op}");
            self.count(&at)?;
            out.push(match op.as_str() {
                "$eq" => field(Pred::Eq(eq_value(path, arg, &at)?)),
                "$ne" => not(field(Pred::Eq(eq_value(path, arg, &at)?))),
                "$in" => field(Pred::In(values(arg, &at)?)),
                "$nin" => not(field(Pred::In(values(arg, &at)?))),
                "$gt" => field(Pred::Range(Cmp::Gt, bound(arg, &at)?)),
                "$gte" => field(Pred::Range(Cmp::Gte, bound(arg, &at)?)),
                "$lt" => field(Pred::Range(Cmp::Lt, bound(arg, &at)?)),
                "$lte" => field(Pred::Range(Cmp::Lte, bound(arg, &at)?)),
                "$exists" => match arg {
                    Value::Bool(true) => field(Pred::Exists),
                    Value::Bool(false) => not(field(Pred::Exists)),
                    _ => return Err(FilterError::new(at, format!("expected true or false, found {}", show(arg)))),
                },
                _ => return Err(FilterError::new(at, format!("unknown operator (known: {FIELD_OPERATORS})"))),
            });
        }
        Ok(())
    }

    fn count(&mut self, at: &str) -> Result<()> {
        self.conditions += 1;
        if self.conditions > MAX_CONDITIONS {
            return Err(FilterError::new(at, format!("more than {MAX_CONDITIONS} conditions in the filter")));
        }
        Ok(())
    }
}

/// One node for several AND-ed ones.
fn and(mut nodes: Vec<Node>) -> Node {
    if nodes.len() == 1 {
        nodes.pop().expect("one node")
    } else {
        Node::And(nodes)
    }
}

fn check_path(path: &str, at: &str) -> Result<()> {
    if path.is_empty() {
        return Err(FilterError::new(at, "empty field path"));
    }
    if path.len() > MAX_PATH_BYTES {
        return Err(FilterError::new(at, format!("field path longer than {MAX_PATH_BYTES} bytes")));
    }
    if path.split('.').any(str::is_empty) {
        return Err(FilterError::new(
            at,
            format!("empty segment in field path {path:?} (paths are dot-separated names, e.g. \"author.name\")"),
        ));
    }
    Ok(())
}

/// A key without `$` among a field's operators: most likely a nested object meant as a match
/// on its fields, which the language spells with a dotted path.
fn nested_key(path: &str, key: &str, operators: &Map<String, Value>, at: &str) -> FilterError {
    let message = if operators.keys().any(|k| k.starts_with('$')) {
        format!("expected an operator ({FIELD_OPERATORS}), found {key:?}")
    } else {
        format!("expected {SCALAR} or an object of operators, found an object")
    };
    FilterError::new(at, format!("{message}; to match a nested field, use the dotted path \"{path}.{key}\""))
}

/// The value of `$eq`, `$ne` or a bare condition, with a hint for the two usual mistakes.
fn eq_value(path: &str, value: &Value, at: &str) -> Result<Scalar> {
    match value {
        Value::Array(_) => Err(FilterError::new(
            at,
            format!("expected {SCALAR}, found an array; to match any of several values, use {{\"$in\": [...]}}"),
        )),
        Value::Object(_) => Err(FilterError::new(
            at,
            format!("expected {SCALAR}, found an object; to match a nested field, use a dotted path (\"{path}.name\")"),
        )),
        _ => scalar(value, at),
    }
}

fn scalar(value: &Value, at: &str) -> Result<Scalar> {
    match value {
        Value::Null => Ok(Scalar::Null),
        Value::Bool(b) => Ok(Scalar::Bool(*b)),
        Value::Number(n) => match n.as_f64() {
            Some(x) if x.is_finite() => Ok(Scalar::Num(x)),
            _ => Err(FilterError::new(at, format!("number out of range: {n}"))),
        },
        Value::String(s) => {
            check_string(s, at)?;
            Ok(Scalar::Str(s.as_str().into()))
        }
        Value::Array(_) | Value::Object(_) => {
            Err(FilterError::new(at, format!("expected {SCALAR}, found {}", show(value))))
        }
    }
}

fn check_string(s: &str, at: &str) -> Result<()> {
    if s.len() > MAX_STRING_BYTES {
        return Err(FilterError::new(at, format!("string longer than {MAX_STRING_BYTES} bytes")));
    }
    Ok(())
}

/// The array of `$in` or `$nin`.
fn values(value: &Value, at: &str) -> Result<Vec<Scalar>> {
    let Value::Array(items) = value else {
        return Err(FilterError::new(at, format!("expected an array of values, found {}", show(value))));
    };
    if items.len() > MAX_VALUES {
        return Err(FilterError::new(at, format!("{} values, more than {MAX_VALUES}", items.len())));
    }
    items.iter().enumerate().map(|(i, item)| scalar(item, &format!("{at}[{i}]"))).collect()
}

/// The bound of a range operator: a number or an ISO-8601 date or date-time with offset.
fn bound(value: &Value, at: &str) -> Result<Bound> {
    let instant = match value {
        Value::Number(n) => {
            if let Some(x) = n.as_f64().filter(|x| x.is_finite()) {
                return Ok(Bound::Num(x));
            }
            None
        }
        Value::String(s) => {
            check_string(s, at)?;
            parse_instant(s)
        }
        _ => None,
    };
    instant.map(Bound::Instant).ok_or_else(|| {
        let mut message = format!("expected a number or an ISO-8601 date, found {}", show(value));
        // The usual near miss: a date-time without offset names no instant.
        if value.as_str().is_some_and(|s| s.parse::<jiff::civil::DateTime>().is_ok()) {
            message.push_str(" (a date-time needs an offset or Z: 2020-05-01T12:00:00Z)");
        }
        FilterError::new(at, message)
    })
}

/// A value as compact JSON, cut short: an error message quotes it, whatever its size.
fn show(value: &Value) -> String {
    const MAX: usize = 48;
    let text = value.to_string();
    if text.len() <= MAX {
        return text;
    }
    let mut end = MAX - 3;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &text[..end])
}
