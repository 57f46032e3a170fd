//! The GBNF grammars a JSON request is decoded under: llama.cpp masks every token that
//! would leave the grammar, so the answer has the asked shape by construction, not by
//! the model's goodwill. A request with a [`schema`](crate::llm::ChatRequest::schema)
//! gets the grammar of that schema ([`from_schema`]: the stage's own shape, such as a
//! list of three-string triples); one that only sets `json` gets [`JSON_OBJECT`].
//!
//! Whitespace between tokens is bounded in both (in [`JSON_OBJECT`]: one space, or a
//! newline and up to 16 spaces of indentation, as the stages' demonstrations are laid
//! out): an unbounded `ws` lets a small model pad forever until its token cap, leaving
//! an unfinished object.

use crate::error::Result;

/// A JSON object: any keys, any values. The stages' parsers check the shape.
pub const JSON_OBJECT: &str = r#"
root   ::= object
object ::= "{" ws ( member ( "," ws member )* )? ws "}"
member ::= string ws ":" ws value
array  ::= "[" ws ( value ( "," ws value )* )? ws "]"
value  ::= object | array | string | number | "true" | "false" | "null"
string ::= "\"" char* "\""
char   ::= [^"\\\x00-\x1F\x7F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} )
number ::= "-"? ( "0" | [1-9] [0-9]{0,15} ) ( "." [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,3} )?
ws     ::= ( " " | "\n" [ ]{0,16} )?
"#;

/// The GBNF grammar of a JSON Schema, by llama.cpp's own converter (its `common`
/// library, which the bindings build anyway): objects with their properties in the
/// schema's order, `prefixItems`, `minItems`/`maxItems`, `const`, `enum`, integer
/// `minimum`/`maximum` and string lengths are honoured.
pub fn from_schema(schema: &str) -> Result<String> {
    crate::llama::json_schema_to_grammar(schema)
}

/// Closes a JSON answer that `max_tokens` cut short: `text` is a prefix of a JSON
/// value (the grammar guarantees that much), so it is cut back to the last point where
/// a value or member was complete and the open brackets are closed. A list keeps only
/// its complete items (a triple cut after two of its three strings is dropped, not
/// shortened); an object keeps its complete members and the container it was writing.
/// What the model had not finished is dropped, never invented. None when no such point
/// exists.
pub fn close_cut_json(text: &str) -> Option<String> {
    #[derive(Clone, Copy, PartialEq)]
    enum Kind {
        Array,
        /// An object, and whether a string now would be a key.
        Object {
            expect_key: bool,
        },
    }
    #[derive(Clone, Copy, PartialEq)]
    struct Frame {
        kind: Kind,
        /// This container or one around it is an item of a list: nothing inside it is
        /// a place to cut until it closes.
        in_item: bool,
    }
    let cut_here = |stack: &[Frame]| !stack.last().is_some_and(|f| f.in_item);
    let mut stack: Vec<Frame> = Vec::new();
    let mut safe: Option<(usize, Vec<Frame>)> = None;
    let mut in_string = false;
    let mut escaped = false;
    let mut string_is_key = false;
    for (i, c) in text.char_indices() {
        if in_string {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
                if !string_is_key {
                    // A string value: complete, and so is the member it ends.
                    if let Some(Frame { kind: Kind::Object { expect_key }, .. }) = stack.last_mut() {
                        *expect_key = true;
                    }
                    if cut_here(&stack) {
                        safe = Some((i + 1, stack.clone()));
                    }
                }
            }
            continue;
        }
        match c {
            '"' => {
                in_string = true;
                string_is_key = matches!(stack.last(), Some(Frame { kind: Kind::Object { expect_key: true }, .. }));
                if let Some(Frame { kind: Kind::Object { expect_key }, .. }) = stack.last_mut() {
                    *expect_key = false;
                }
            }
            '{' | '[' => {
                let in_item = stack.last().is_some_and(|f| f.in_item || f.kind == Kind::Array);
                let kind = if c == '{' { Kind::Object { expect_key: true } } else { Kind::Array };
                stack.push(Frame { kind, in_item });
                if cut_here(&stack) {
                    safe = Some((i + 1, stack.clone()));
                }
            }
            '}' | ']' => {
                stack.pop();
                if let Some(Frame { kind: Kind::Object { expect_key }, .. }) = stack.last_mut() {
                    *expect_key = true;
                }
                if cut_here(&stack) {
                    safe = Some((i + 1, stack.clone()));
                }
            }
            ',' => {
                // Whatever came before a comma is complete.
                if cut_here(&stack) {
                    safe = Some((i, stack.clone()));
                }
                if let Some(Frame { kind: Kind::Object { expect_key }, .. }) = stack.last_mut() {
                    *expect_key = true;
                }
            }
            _ => {}
        }
    }
    if stack.is_empty() && !in_string && safe.is_some() {
        return Some(text.to_string());
    }
    let (at, open) = safe?;
    let mut out = text[..at].trim_end().to_string();
    for frame in open.iter().rev() {
        out.push(if frame.kind == Kind::Array { ']' } else { '}' });
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cut_answers_are_closed_after_their_last_complete_part() {
        let close = |s: &str| close_cut_json(s).unwrap();
        let parses = |s: &str| serde_json::from_str::<serde_json::Value>(s).unwrap();
        assert_eq!(close(r#"{"a": [1, 2]}"#), r#"{"a": [1, 2]}"#);
        assert_eq!(close(r#"{"entities": ["Ada", "Lond"#), r#"{"entities": ["Ada"]}"#);
        assert_eq!(
            close(r#"{"triples": [["Ada", "wrote", "notes"], ["Ada", "bo"#),
            r#"{"triples": [["Ada", "wrote", "notes"]]}"#
        );
        // A judge's score list: the half-written score object goes, the list stays.
        assert_eq!(
            close(r#"{"scores": [{"id": 0, "score": 2}, {"id": 1, "sco"#),
            r#"{"scores": [{"id": 0, "score": 2}]}"#
        );
        assert_eq!(close(r#"[["a", "b", "c"], ["d", "e""#), r#"[["a", "b", "c"]]"#);
        assert_eq!(close(r#"[["a", "b""#), "[]");
        assert_eq!(close(r#"{"a": "x", "b"#), r#"{"a": "x"}"#);
        assert_eq!(close(r#"{"a": "x", "b": "y \" }"#), r#"{"a": "x"}"#);
        assert_eq!(close(r#"{"a": {"b": {"c"#), r#"{"a": {"b": {}}}"#);
        assert_eq!(close(r#"{"n": 12"#), "{}");
        assert_eq!(close("{"), "{}");
        for s in [r#"{"entities": ["Ada", "Lond"#, r#"{"a": {"b": {"c"#, r#"{"a": "x", "b"#, "{\n  \"k\"\n:\n{"] {
            parses(&close(s));
        }
        assert_eq!(close_cut_json(""), None);
    }

    #[cfg(feature = "local-llm")] // llama.cpp's converter
    #[test]
    fn schemas_become_grammars() {
        let grammar =
            from_schema(r#"{"type": "array", "items": {"type": "array", "items": {"type": "string"}, "minItems": 3, "maxItems": 3}}"#)
                .unwrap();
        assert!(grammar.contains("root ::="), "{grammar}");
        let err = from_schema("{not json").unwrap_err().to_string();
        assert!(err.contains("{not json"), "{err}");
    }

    /// Every rule the grammar uses is defined, and every defined rule is used: a
    /// typo would otherwise surface only when a model loads the grammar.
    #[test]
    fn rules_are_defined_and_used() {
        let mut defined = Vec::new();
        let mut body = String::new();
        for line in JSON_OBJECT.lines().filter(|l| !l.trim().is_empty()) {
            let (name, rhs) = line.split_once("::=").expect("rule line");
            defined.push(name.trim().to_string());
            // Drop quoted literals and character classes before looking for names.
            let mut plain = String::new();
            let mut chars = rhs.chars();
            while let Some(c) = chars.next() {
                match c {
                    '"' => {
                        while let Some(d) = chars.next() {
                            if d == '\\' {
                                chars.next();
                            } else if d == '"' {
                                break;
                            }
                        }
                        plain.push(' ');
                    }
                    '[' => {
                        while let Some(d) = chars.next() {
                            if d == '\\' {
                                chars.next();
                            } else if d == ']' {
                                break;
                            }
                        }
                        plain.push(' ');
                    }
                    _ => plain.push(c),
                }
            }
            body.push_str(&plain);
            body.push(' ');
        }
        let used: Vec<&str> =
            body.split(|c: char| !c.is_ascii_alphabetic()).filter(|w| !w.is_empty() && *w != "u").collect();
        for name in &used {
            assert!(defined.iter().any(|d| d == name), "rule {name} is used but not defined");
        }
        for name in defined.iter().filter(|d| *d != "root") {
            assert!(used.contains(&name.as_str()), "rule {name} is defined but not used");
        }
    }
}
