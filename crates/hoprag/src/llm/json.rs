//! Lenient JSON from model output. Models wrap JSON in code fences and prose, leave
//! trailing commas, quote with `'` or typographic quotes, and write Python literals;
//! this recovers the value where the intent is clear and otherwise reports why not,
//! with the start of the output, so the failure can be counted instead of crashing.

use std::fmt;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Bracket positions tried as the start of the value: each try is linear in the output,
/// so this bounds the work on long prose full of brackets.
const MAX_STARTS: usize = 64;
const SNIPPET_CHARS: usize = 160;

/// Why model output held no usable JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParseFailure {
    pub reason: String,
    /// The start of the output.
    pub snippet: String,
}

impl ParseFailure {
    fn new(reason: impl Into<String>, text: &str) -> Self {
        ParseFailure { reason: reason.into(), snippet: snippet(text, SNIPPET_CHARS) }
    }

    /// JSON that is not the shape the prompt asked for.
    pub fn wrong_shape(reason: &str, text: &str) -> Self {
        ParseFailure::new(format!("wrong shape: {reason}"), text)
    }
}

impl fmt::Display for ParseFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (output: {:?})", self.reason, self.snippet)
    }
}

impl std::error::Error for ParseFailure {}

/// Extracts the JSON value a model meant, in this order: the whole output as strict
/// JSON; the first object or array inside a ```` ``` ```` fence; the first one in the
/// output. A value is found by bracket matching, so prose before and after it is
/// ignored, and repaired: trailing commas dropped, `'single'` and `“smart”` quotes made
/// `"double"` (apostrophes inside strings kept), raw newlines in strings escaped,
/// `True`/`False`/`None` mapped and bare keys quoted. A reasoning model's
/// `<think>…</think>` preamble is skipped. Truncated or unbalanced output is a failure.
pub fn parse_lenient(text: &str) -> Result<Value, ParseFailure> {
    parse_expecting(text, |_| true, "any JSON value")
}

/// Like [`parse_lenient`], taking the first value that `accept`s: prose often holds a
/// bracket (`passage [3] helps`) before the answer, and the first bracket is the answer
/// only when it has the shape asked for. A value that parses but is never of that shape
/// is a "wrong shape" failure (`expected` says what was wanted); none at all, or a
/// truncated one, fails as with [`parse_lenient`].
pub fn parse_expecting(text: &str, accept: impl Fn(&Value) -> bool, expected: &str) -> Result<Value, ParseFailure> {
    let body = after_reasoning(text).trim();
    if body.is_empty() {
        return Err(ParseFailure::new("empty output", text));
    }
    let mut parsed_but_wrong = false;
    if let Ok(value) = serde_json::from_str::<Value>(body) {
        if accept(&value) {
            return Ok(value);
        }
        parsed_but_wrong = true;
    }
    let mut first_reason = None;
    for region in fenced_blocks(body).chain(std::iter::once(body)) {
        match first_value(region, &accept) {
            Ok(value) => return Ok(value),
            Err((reason, wrong)) => {
                parsed_but_wrong |= wrong;
                first_reason.get_or_insert(reason);
            }
        }
    }
    if parsed_but_wrong {
        return Err(ParseFailure::wrong_shape(&format!("no {expected} in the answer"), body));
    }
    Err(ParseFailure::new(first_reason.unwrap_or_else(|| NOT_FOUND.to_string()), body))
}

/// The value of the first of `keys` that `object` holds, compared without case
/// (`"Reason"` is `"reason"`), in the order of `keys` (the schema's preference), never
/// in the object's.
pub fn field<'a>(object: &'a Value, keys: &[&str]) -> Option<&'a Value> {
    let map = object.as_object()?;
    keys.iter()
        .find_map(|k| map.get(*k).or_else(|| map.iter().find(|(x, _)| x.eq_ignore_ascii_case(k)).map(|(_, v)| v)))
}

/// An object holding at least one of `keys` (without case): the usual accept test for
/// [`parse_expecting`].
pub fn has_any_key(value: &Value, keys: &[&str]) -> bool {
    field(value, keys).is_some()
}

const NOT_FOUND: &str = "no JSON object or array found";

/// The first `max_chars` characters of `text`, trimmed, with `…` where cut.
pub(crate) fn snippet(text: &str, max_chars: usize) -> String {
    let text = text.trim();
    match text.char_indices().nth(max_chars) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

/// What follows the last `</think>`: reasoning models (DeepSeek-R1, Qwen3) think aloud
/// first, and their braces are not the answer.
fn after_reasoning(text: &str) -> &str {
    const END: &str = "</think>";
    text.rfind(END).map_or(text, |at| &text[at + END.len()..])
}

/// The contents of each ```` ```lang … ``` ```` block; an unclosed fence runs to the end.
fn fenced_blocks(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        let open = rest.find("```")?;
        let after = &rest[open + 3..];
        let tag_len = after.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-')).unwrap_or(after.len());
        let inner = &after[tag_len..];
        let (block, next) = match inner.find("```") {
            Some(close) => (&inner[..close], &inner[close + 3..]),
            None => (inner, ""),
        };
        rest = next;
        Some(block)
    })
}

/// The first `{` or `[` in `region` that opens a value which parses after repair and
/// that `accept`s; the error says why none did, and whether some value parsed but was
/// not accepted.
///
/// Only values that stand on their own are tried: the brackets inside a value that
/// parsed are part of it (the list under `"thoughts"` is not the answer because the
/// object holding it has the wrong keys), and a value that runs to the end unclosed is
/// a truncated answer, whatever complete pieces it holds.
fn first_value(region: &str, accept: &dyn Fn(&Value) -> bool) -> Result<Value, (String, bool)> {
    let chars: Vec<char> = region.chars().collect();
    let mut first_reason = None;
    let mut wrong_shape = false;
    let mut next = 0;
    let starts = chars.iter().enumerate().filter(|&(_, &c)| matches!(c, '{' | '[')).map(|(i, _)| i);
    for start in starts.take(MAX_STARTS) {
        if start < next {
            continue;
        }
        let attempt = repair(&chars[start..]).and_then(|(json, len)| {
            next = start + len;
            serde_json::from_str::<Value>(&json).map_err(|e| format!("not JSON even after repair: {e}"))
        });
        match attempt {
            Ok(value) if accept(&value) => return Ok(value),
            Ok(_) => wrong_shape = true,
            Err(reason) => {
                // A value that parsed is passed over whole; a balanced stretch that is
                // no JSON (`[this one]`) is only skipped at its opening bracket.
                next = start + 1;
                let truncated = reason.contains(TRUNCATED);
                first_reason.get_or_insert(reason);
                if truncated {
                    break;
                }
            }
        }
    }
    Err((first_reason.unwrap_or_else(|| NOT_FOUND.to_string()), wrong_shape))
}

const TRUNCATED: &str = "(truncated?)";

/// Rewrites the value opening at `chars[0]` (a `{` or `[`) as strict JSON, up to its
/// matching bracket; with the number of characters it spans.
fn repair(chars: &[char]) -> Result<(String, usize), String> {
    let mut out = String::with_capacity(chars.len());
    let mut closers = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '{' | '[' => {
                closers.push(if c == '{' { '}' } else { ']' });
                out.push(c);
            }
            '}' | ']' => {
                if closers.pop() != Some(c) {
                    return Err(format!("unbalanced brackets: unexpected `{c}`"));
                }
                drop_trailing_comma(&mut out);
                out.push(c);
                if closers.is_empty() {
                    return Ok((out, i + 1));
                }
            }
            '"' | '\'' | '“' | '”' | '‘' | '’' => {
                i = copy_string(chars, i, &mut out);
                continue;
            }
            c if c.is_alphabetic() || c == '_' => {
                i = copy_word(chars, i, &mut out);
                continue;
            }
            c => out.push(c),
        }
        i += 1;
    }
    let inside = if closers.last() == Some(&'}') { "an object" } else { "an array" };
    Err(format!("output ends inside {inside} {TRUNCATED}"))
}

/// Copies the string literal opening at `chars[start]` as a JSON string and returns the
/// index after it.
///
/// A quote closes the string only where the next non-blank character could follow a
/// string (`,` `:` `}` `]` or the end). Strict JSON always satisfies this, and it lets
/// `'Jim's car'` and `"the "best" one"` keep their inner quotes.
fn copy_string(chars: &[char], start: usize, out: &mut String) -> usize {
    let closers: &[char] = match chars[start] {
        '"' => &['"'],
        '\'' | '‘' | '’' => &['\'', '’'],
        _ => &['”', '“', '"'],
    };
    out.push('"');
    let mut i = start + 1;
    while i < chars.len() {
        let c = chars[i];
        if c == '\\' {
            match chars.get(i + 1) {
                // `\'` is common in single-quoted strings but is no JSON escape.
                Some('\'') => out.push('\''),
                Some(&escaped) => {
                    out.push('\\');
                    out.push(escaped);
                }
                None => out.push_str("\\\\"),
            }
            i += 2;
            continue;
        }
        if closers.contains(&c) && ends_value(&chars[i + 1..]) {
            out.push('"');
            return i + 1;
        }
        match c {
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
        i += 1;
    }
    i
}

fn ends_value(rest: &[char]) -> bool {
    rest.iter().find(|c| !c.is_whitespace()).is_none_or(|&c| matches!(c, ',' | ':' | '}' | ']'))
}

/// Copies a bare word: Python's `True`/`False`/`None` become JSON literals and a word
/// followed by `:` becomes a quoted key; anything else is copied for the parser to judge.
fn copy_word(chars: &[char], start: usize, out: &mut String) -> usize {
    let end =
        chars[start..].iter().position(|c| !(c.is_alphanumeric() || *c == '_')).map_or(chars.len(), |n| start + n);
    let word: String = chars[start..end].iter().collect();
    let is_key = chars[end..].iter().find(|c| !c.is_whitespace()) == Some(&':');
    match word.as_str() {
        _ if is_key => {
            out.push('"');
            out.push_str(&word);
            out.push('"');
        }
        "True" => out.push_str("true"),
        "False" => out.push_str("false"),
        "None" => out.push_str("null"),
        _ => out.push_str(&word),
    }
    end
}

/// Removes a `,` left before a closing bracket (outside strings, so always structural).
fn drop_trailing_comma(out: &mut String) {
    let end = out.trim_end().len();
    if out[..end].ends_with(',') {
        out.truncate(end - 1);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn ok(text: &str) -> Value {
        parse_lenient(text).unwrap_or_else(|e| panic!("{text:?}: {e}"))
    }

    fn fails(text: &str) -> ParseFailure {
        match parse_lenient(text) {
            Ok(v) => panic!("{text:?} parsed as {v}"),
            Err(e) => e,
        }
    }

    #[test]
    fn strict_json_passes_through() {
        assert_eq!(
            ok(r#" {"a": [1, 2.5, null, true], "b": "x\"y"} "#),
            json!({"a": [1, 2.5, null, true], "b": "x\"y"})
        );
        assert_eq!(ok("[]"), json!([]));
    }

    #[test]
    fn code_fences_are_stripped() {
        assert_eq!(ok("```json\n{\"a\": 1}\n```"), json!({"a": 1}));
        assert_eq!(ok("```\n[1, 2]\n```"), json!([1, 2]));
        assert_eq!(ok("```JSON{\"a\": 1}```"), json!({"a": 1}), "fence on one line");
        assert_eq!(ok("Here:\n```json\n{\"a\": 1}\n"), json!({"a": 1}), "unclosed fence");
    }

    #[test]
    fn fenced_value_wins_over_brackets_in_the_prose() {
        assert_eq!(ok("Passage [3] helps.\n```json\n{\"keep\": [3]}\n```"), json!({"keep": [3]}));
    }

    #[test]
    fn prose_around_the_value_is_ignored() {
        assert_eq!(ok("Sure! The answer is {\"a\": {\"b\": [1]}}. Hope that helps {:"), json!({"a": {"b": [1]}}));
        assert_eq!(ok("Titles: [\"X\", \"Y\"]\nThat is all."), json!(["X", "Y"]));
    }

    #[test]
    fn a_bracket_that_opens_no_value_is_skipped() {
        assert_eq!(ok("I think [this one] fits: {\"a\": 1}"), json!({"a": 1}));
        assert_eq!(ok("it's {\"a\": 1}"), json!({"a": 1}), "an apostrophe before the value");
    }

    #[test]
    fn trailing_commas_are_dropped() {
        assert_eq!(ok("{\"a\": [1, 2,], \"b\": 3,\n}"), json!({"a": [1, 2], "b": 3}));
    }

    #[test]
    fn single_quotes_become_double_quotes() {
        assert_eq!(ok("{'name': 'Oslo', 'list': ['a', 'b']}"), json!({"name": "Oslo", "list": ["a", "b"]}));
        assert_eq!(ok(r#"{'quote': 'she said "hi"'}"#), json!({"quote": "she said \"hi\""}));
        assert_eq!(ok(r"{'a': 'it\'s'}"), json!({"a": "it's"}));
        assert_eq!(ok("{'owner': 'Jim's car'}"), json!({"owner": "Jim's car"}), "apostrophe inside");
    }

    #[test]
    fn apostrophes_in_double_quoted_strings_are_kept() {
        assert_eq!(
            ok("Answer: {\"a\": \"it's Jim's, isn't it\", 'b': 1}"),
            json!({"a": "it's Jim's, isn't it", "b": 1})
        );
    }

    #[test]
    fn smart_quotes_are_straightened() {
        assert_eq!(ok("{“a”: “b”, ‘c’: ‘it’s’}"), json!({"a": "b", "c": "it’s"}));
        assert_eq!(ok("{\"a\": \"“quoted”, fine\"}"), json!({"a": "“quoted”, fine"}), "kept inside a string");
    }

    #[test]
    fn unescaped_inner_quotes_and_raw_newlines_are_repaired() {
        assert_eq!(ok("x {\"a\": \"the \"best\" one\"}"), json!({"a": "the \"best\" one"}));
        assert_eq!(ok("x {\"a\": \"line 1\nline 2\"}"), json!({"a": "line 1\nline 2"}));
    }

    #[test]
    fn python_literals_and_bare_keys() {
        assert_eq!(ok("{'a': True, 'b': False, 'c': None}"), json!({"a": true, "b": false, "c": null}));
        assert_eq!(ok("{answer: \"x\", hops: 2}"), json!({"answer": "x", "hops": 2}));
    }

    #[test]
    fn reasoning_preamble_is_skipped() {
        assert_eq!(ok("<think>maybe {\"a\": 0}? no.</think>\n{\"a\": 1}"), json!({"a": 1}));
    }

    #[test]
    fn truncated_output_fails() {
        let e = fails("{\"a\": [1, 2");
        assert!(e.reason.contains("truncated"), "{e}");
        let e = fails("```json\n{\"a\": \"unterminated");
        assert!(e.reason.contains("truncated"), "{e}");
    }

    #[test]
    fn output_without_json_fails_with_its_start() {
        let e = fails("I cannot answer that.");
        assert_eq!(e.reason, NOT_FOUND);
        assert_eq!(e.snippet, "I cannot answer that.");
        assert_eq!(fails("  \n").reason, "empty output");
        assert_eq!(fails("<think>{\"a\": 1}</think>").reason, "empty output");
    }

    #[test]
    fn mismatched_and_invalid_values_fail() {
        assert!(fails("{\"a\": [1, 2}").reason.contains("unbalanced"));
        assert!(fails("{\"a\": 1 2}").reason.contains("not JSON"));
        assert!(fails("[NaN]").reason.contains("not JSON"));
    }

    #[test]
    fn snippets_are_cut_on_character_boundaries() {
        let long = "é".repeat(500);
        let e = fails(&long);
        assert_eq!(e.snippet.chars().count(), SNIPPET_CHARS + 1);
        assert!(e.snippet.ends_with('…'));
        assert!(e.to_string().contains(NOT_FOUND));
    }

    #[test]
    fn the_shape_asked_for_wins_over_brackets_in_prose() {
        let text = "Passage [3] helps: {\"keep\": [3], \"Reason\": \"x\"}";
        assert_eq!(parse_lenient(text).unwrap(), json!([3]), "any value: the first bracket");
        let v = parse_expecting(text, |v| has_any_key(v, &["keep"]), "object with `keep`").unwrap();
        assert_eq!(field(&v, &["reason"]), Some(&json!("x")), "keys compared without case");
        let e = parse_expecting("[1, 2]", |v| v.is_object(), "an object").unwrap_err();
        assert!(e.reason.starts_with("wrong shape"), "{e}");
        let e = parse_expecting("{\"a\": [1", |v| v.is_object(), "an object").unwrap_err();
        assert!(e.reason.contains("truncated"), "{e}");
    }

    #[test]
    fn a_value_inside_another_is_not_an_answer() {
        let list = |v: &Value| v.is_array();
        // The object has the wrong keys; its list is not the answer.
        let e = parse_expecting(r#"{"thoughts": ["a", "b"], "note": "done"}"#, list, "a list").unwrap_err();
        assert!(e.reason.starts_with("wrong shape"), "{e}");
        // A truncated object is truncated, whatever complete lists it holds.
        let e = parse_expecting(r#"{"thoughts": ["a", "b"], "queries": ["x", "y"#, list, "a list").unwrap_err();
        assert!(e.reason.contains("truncated"), "{e}");
        // Side by side, the second value is still found.
        assert_eq!(parse_expecting(r#"{"a": [1]} then ["x"]"#, list, "a list").unwrap(), json!(["x"]));
        // Inside a balanced stretch that is no JSON, a value is still found.
        assert_eq!(parse_expecting("[see {\"a\": 1}]", |v| v.is_object(), "an object").unwrap(), json!({"a": 1}));
    }

    #[test]
    fn fields_follow_the_schema_order_and_objects_keep_theirs() {
        let v: Value = serde_json::from_str(r#"{"z": 1, "a": 2, "Query": "q"}"#).unwrap();
        assert_eq!(v.as_object().unwrap().keys().collect::<Vec<_>>(), ["z", "a", "Query"], "order preserved");
        assert_eq!(field(&v, &["a", "z"]), Some(&json!(2)));
        assert_eq!(field(&v, &["query"]), Some(&json!("q")));
        assert_eq!(field(&json!([1]), &["a"]), None);
    }

    #[test]
    fn pathological_input_is_bounded() {
        let text = "[".repeat(20_000);
        assert!(fails(&text).reason.contains("truncated"));
    }
}

#[cfg(test)]
mod properties {
    use proptest::prelude::*;

    use super::*;

    /// Text built from the characters the parser treats specially, so that random
    /// inputs reach its repair paths rather than only "no JSON found".
    fn jsonish() -> impl Strategy<Value = String> {
        let atoms = prop::sample::select(vec![
            "{", "}", "[", "]", "\"", "'", "“", "”", "‘", "’", ":", ",", "\\", "\n", " ", "a", "True", "None", "1",
            "-2.5e3", "```", "```json", "<think>", "</think>", "é", "\u{0}", "null", "key:",
        ]);
        prop::collection::vec(atoms, 0..60).prop_map(|v| v.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

        #[test]
        fn never_panics_on_arbitrary_text(text in any::<String>()) {
            let _ = parse_lenient(&text);
            let _ = parse_expecting(&text, |v| v.is_object(), "an object");
        }

        #[test]
        fn never_panics_on_json_like_text(text in jsonish()) {
            if let Ok(v) = parse_lenient(&text) {
                // Whatever it returns is a real JSON value.
                prop_assert!(serde_json::to_string(&v).is_ok());
            }
            let _ = parse_expecting(&text, |v| has_any_key(v, &["a", "key"]), "an object with `a`");
        }

        #[test]
        fn strict_json_round_trips(v in json_value()) {
            let text = serde_json::to_string(&v).unwrap();
            prop_assert_eq!(parse_lenient(&text).unwrap(), v.clone());
            // Wrapped in prose and a fence, an object or array is still found.
            if v.is_object() || v.is_array() {
                let wrapped = format!("Here you go:\n```json\n{text}\n```\nDone.");
                prop_assert_eq!(parse_lenient(&wrapped).unwrap(), v);
            }
        }
    }

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i32>().prop_map(Value::from),
            "[a-zA-Z0-9 ,:'\\[\\]{}\"]{0,12}".prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::vec(("[a-z]{1,6}", inner), 0..4)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }
}
