//! Import of HippoRAG OpenIE files (v1: `{docs: [{title, text|passage, extracted_entities,
//! extracted_triples}]}`; v2: `{docs: [{idx, passage, extracted_entities,
//! extracted_triples}]}`), matched to the passages of an index.

use std::collections::HashMap;
use std::path::Path;

use serde_json::Value;

use super::{ExtractReport, Extraction, Name, Triple};
use crate::corpus::{Passage, PassageIdx};
use crate::error::{Error, Result};
use crate::text::normalize_whitespace;

/// Reads an OpenIE file and attaches each document's triples and entities to the index
/// passage with the same text (title + text, or the `passage` field that HippoRAG writes
/// as title, newline, text). Documents that match no passage, and malformed triples, are
/// counted and listed in the report.
pub fn import_openie(path: &Path, passages: &[Passage]) -> Result<Extraction> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    let root: Value = serde_json::from_slice(&python_constants_to_null(&bytes))
        .map_err(|e| Error::input(path, format!("invalid JSON: {e}")))?;
    let docs = root
        .get("docs")
        .and_then(Value::as_array)
        .ok_or_else(|| Error::input(path, "expected an object with a `docs` list (HippoRAG OpenIE format)"))?;

    let mut by_text: HashMap<String, PassageIdx> = HashMap::new();
    for (i, p) in passages.iter().enumerate() {
        by_text.entry(normalize_whitespace(&p.index_text())).or_insert(i as PassageIdx);
        by_text.entry(normalize_whitespace(&p.text)).or_insert(i as PassageIdx);
    }
    let mut out = Extraction::new(passages.len());
    let mut report = ExtractReport::default();
    for (d, doc) in docs.iter().enumerate() {
        let at = format!("{}: docs[{d}]", path.display());
        let text = doc
            .get("passage")
            .and_then(Value::as_str)
            .or_else(|| doc.get("text").and_then(Value::as_str))
            .map(normalize_whitespace);
        let title_text = match (doc.get("title").and_then(Value::as_str), doc.get("text").and_then(Value::as_str)) {
            (Some(t), Some(x)) => Some(normalize_whitespace(&format!("{t}\n{x}"))),
            _ => None,
        };
        let found = [text, title_text].into_iter().flatten().find_map(|t| by_text.get(&t).copied());
        let Some(passage) = found else {
            report.unmatched_docs.push(at);
            continue;
        };
        report.docs += 1;
        if let Some(Value::Array(ents)) = doc.get("extracted_entities") {
            for e in ents {
                match e.as_str().map(str::trim) {
                    Some(s) if !s.is_empty() => out.entities[passage as usize].push(Name::new(s)),
                    _ => report.malformed_entities += 1,
                }
            }
        }
        let triples = doc.get("extracted_triples").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]);
        for (t, triple) in triples.iter().enumerate() {
            match parse_triple(triple) {
                Some((s, p, o)) => {
                    out.triples.push(Triple { passage, subject: s.into(), predicate: p.into(), object: o.into() })
                }
                None => {
                    report.malformed_triples += 1;
                    if report.malformed_examples.len() < 20 {
                        report.malformed_examples.push(format!("{at}.extracted_triples[{t}]: {triple}"));
                    }
                }
            }
        }
    }
    out.report = report;
    Ok(out)
}

/// Python's `json.dump` writes `NaN`, `Infinity` and `-Infinity`, which JSON does not
/// allow (HippoRAG's OpenIE files carry `"avg_ent_chars": NaN`). They become `null`;
/// text inside strings is left alone.
fn python_constants_to_null(bytes: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    const TOKENS: [&[u8]; 3] = [b"-Infinity", b"Infinity", b"NaN"];
    let mut out: Option<Vec<u8>> = None;
    let (mut i, mut in_string, mut escaped) = (0, false, false);
    while i < bytes.len() {
        let b = bytes[i];
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
        } else if b == b'"' {
            in_string = true;
        } else if let Some(t) = TOKENS.iter().find(|t| bytes[i..].starts_with(t)) {
            let o = out.get_or_insert_with(|| bytes[..i].to_vec());
            o.extend_from_slice(b"null");
            i += t.len();
            continue;
        }
        if let Some(o) = out.as_mut() {
            o.push(b);
        }
        i += 1;
    }
    out.map_or(std::borrow::Cow::Borrowed(bytes), std::borrow::Cow::Owned)
}

/// A triple is exactly three non-empty strings (numbers are accepted as text).
fn parse_triple(v: &Value) -> Option<(String, String, String)> {
    let items = v.as_array()?;
    if items.len() != 3 {
        return None;
    }
    let text = |x: &Value| -> Option<String> {
        let s = match x {
            Value::String(s) => s.trim().to_string(),
            Value::Number(n) => n.to_string(),
            _ => return None,
        };
        (!s.is_empty()).then_some(s)
    };
    Some((text(&items[0])?, text(&items[1])?, text(&items[2])?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_constants_outside_strings_become_null() {
        let fixed = python_constants_to_null(br#"{"a": NaN, "b": "NaN \" Infinity", "c": [-Infinity, 1]}"#);
        let v: Value = serde_json::from_slice(&fixed).unwrap();
        assert_eq!(v["a"], Value::Null);
        assert_eq!(v["b"], "NaN \" Infinity");
        assert_eq!(v["c"][0], Value::Null);
        assert!(matches!(python_constants_to_null(b"[1]"), std::borrow::Cow::Borrowed(_)));
    }

    #[test]
    fn imports_v1_and_v2_docs_and_counts_malformed() {
        let passages = vec![Passage::new("0", "A", "Alpha text."), Passage::new("1", "B", "Beta text.")];
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("openie.json");
        std::fs::write(
            &path,
            r#"{"docs": [
                {"title": "A", "text": "Alpha text.", "extracted_entities": ["A", ""],
                 "extracted_triples": [["A", "is", "first"], ["A", "x"], ["", "y", "z"], ["A", "in", 1990]]},
                {"idx": "h1", "passage": "B\nBeta  text.", "extracted_entities": ["B"], "extracted_triples": [["B", "follows", "A"]]},
                {"passage": "unknown", "extracted_triples": []}
            ]}"#,
        )
        .unwrap();
        let x = import_openie(&path, &passages).unwrap();
        assert_eq!(x.triples.len(), 3);
        assert_eq!(x.triples[1].object, "1990");
        assert_eq!(x.triples[2].passage, 1);
        assert_eq!(x.report.docs, 2);
        assert_eq!(x.report.malformed_triples, 2);
        assert_eq!(x.report.malformed_entities, 1);
        assert_eq!(x.report.unmatched_docs.len(), 1);
        assert!(x.report.unmatched_docs[0].ends_with("docs[2]"));
    }
}
