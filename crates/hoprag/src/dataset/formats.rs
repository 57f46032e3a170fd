//! Dataset file formats.

use std::fs;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{GoldRef, Question};
use crate::error::{Error, Result};
use crate::text::{join_sentences, normalize_whitespace};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DatasetFormat {
    /// HippoRAG's MuSiQue files (v1 and v2 share the fields used here).
    Musique,
    HotpotQa,
    TwoWiki,
    Jsonl,
}

/// Reads a dataset file, detecting its format from the fields of the first entry.
/// Entries that cannot be read are an error naming the entry: a benchmark with silently
/// missing questions would give numbers that cannot be compared.
pub fn load_dataset(path: &Path) -> Result<(DatasetFormat, Vec<Question>)> {
    let bytes = fs::read(path).map_err(|e| Error::io(path, e))?;
    let text = std::str::from_utf8(&bytes)
        .map_err(|e| Error::input(path, format!("not valid UTF-8 at byte {}", e.valid_up_to())))?;
    let first = text.trim_start().as_bytes().first().copied();
    if first == Some(b'{') && looks_like_jsonl(text) {
        return Ok((DatasetFormat::Jsonl, load_jsonl(path, text)?));
    }
    let value: Value = serde_json::from_str(text).map_err(|e| Error::input(path, format!("invalid JSON: {e}")))?;
    let items = match value {
        Value::Array(items) => items,
        // HippoRAG 2 wraps some files as {"data": [...]}.
        Value::Object(mut o) if o.get("data").is_some_and(Value::is_array) => match o.remove("data") {
            Some(Value::Array(items)) => items,
            _ => unreachable!("checked above"),
        },
        _ => return Err(Error::input(path, "expected a JSON list of questions")),
    };
    let Some(first) = items.first().and_then(Value::as_object) else {
        return Err(Error::input(path, "the question list is empty or its first entry is not an object"));
    };
    let format = if first.contains_key("paragraphs") {
        DatasetFormat::Musique
    } else if first.contains_key("supporting_facts") && first.contains_key("evidences") {
        DatasetFormat::TwoWiki
    } else if first.contains_key("supporting_facts") {
        DatasetFormat::HotpotQa
    } else {
        return Err(Error::input(
            path,
            "unknown dataset format: expected MuSiQue (`paragraphs`), HotpotQA or 2WikiMultiHopQA \
             (`supporting_facts`), or JSONL {id, question, gold_titles|gold_ids}",
        ));
    };
    let mut questions = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let q = match format {
            DatasetFormat::Musique => musique(item),
            DatasetFormat::HotpotQa | DatasetFormat::TwoWiki => supporting_facts(item),
            DatasetFormat::Jsonl => unreachable!(),
        }
        .map_err(|m| Error::input(path, format!("question [{i}]: {m}")))?;
        questions.push(q);
    }
    Ok((format, questions))
}

fn looks_like_jsonl(text: &str) -> bool {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    lines.next().is_some_and(|l| serde_json::from_str::<Value>(l).is_ok())
}

fn str_field<'a>(v: &'a Value, name: &str) -> Result<&'a str, String> {
    match v.get(name) {
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(format!("field `{name}` must be a string")),
        None => Err(format!("missing field `{name}`")),
    }
}

fn id_field(v: &Value, names: &[&str]) -> Result<String, String> {
    for name in names {
        match v.get(*name) {
            Some(Value::String(s)) => return Ok(s.clone()),
            Some(Value::Number(n)) => return Ok(n.to_string()),
            _ => {}
        }
    }
    Err(format!("missing field `{}`", names[0]))
}

fn answers(v: &Value) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(Value::String(a)) = v.get("answer") {
        out.push(a.clone());
    }
    if let Some(Value::Array(aliases)) = v.get("answer_aliases") {
        out.extend(aliases.iter().filter_map(Value::as_str).map(str::to_string));
    }
    out
}

fn musique(v: &Value) -> Result<Question, String> {
    let id = id_field(v, &["id", "_id"])?;
    let text = str_field(v, "question")?.to_string();
    let paragraphs = v.get("paragraphs").and_then(Value::as_array).ok_or("missing list `paragraphs`")?;
    let mut supporting = Vec::new(); // (paragraph idx, gold)
    for (i, p) in paragraphs.iter().enumerate() {
        if p.get("is_supporting").and_then(Value::as_bool) != Some(true) {
            continue;
        }
        let title = str_field(p, "title").map_err(|m| format!("paragraphs[{i}]: {m}"))?;
        let body = p
            .get("paragraph_text")
            .or_else(|| p.get("text"))
            .and_then(Value::as_str)
            .ok_or_else(|| format!("paragraphs[{i}]: missing `paragraph_text`"))?;
        let idx = p.get("idx").and_then(Value::as_u64).unwrap_or(i as u64);
        supporting.push((idx, GoldRef::Title { title: title.to_string(), text: Some(body.to_string()) }));
    }
    // Hop order: the decomposition lists hops in order and points at paragraph idx.
    let hops: Vec<Option<u64>> = v
        .get("question_decomposition")
        .and_then(Value::as_array)
        .map(|d| d.iter().map(|h| h.get("paragraph_support_idx").and_then(Value::as_u64)).collect())
        .unwrap_or_default();
    // The last hop is known only where the decomposition's last entry names a
    // supporting paragraph (it can be null); that paragraph goes last, after the hops
    // in decomposition order and any supporting paragraph no hop names.
    let last_idx = hops.last().copied().flatten().filter(|i| supporting.iter().any(|(j, _)| j == i));
    let hop_ordered = last_idx.is_some();
    let mut ordered = Vec::new();
    for idx in hops.iter().flatten().filter(|&&i| Some(i) != last_idx) {
        if let Some(pos) = supporting.iter().position(|(i, _)| i == idx) {
            ordered.push(supporting.remove(pos).1);
        }
    }
    let last = last_idx.and_then(|l| supporting.iter().position(|(i, _)| *i == l)).map(|pos| supporting.remove(pos).1);
    ordered.extend(supporting.into_iter().map(|(_, g)| g));
    ordered.extend(last);
    let qtype = id.split("__").next().filter(|p| p.contains("hop")).map(|prefix| {
        // `3hop1` and `3hop2` are both 3-hop questions; breakdowns are by hop count.
        let n: String = prefix.chars().take_while(char::is_ascii_digit).collect();
        format!("{n}hop")
    });
    Ok(Question { id, text, gold: ordered, hop_ordered, qtype, answers: answers(v) })
}

fn supporting_facts(v: &Value) -> Result<Question, String> {
    let id = id_field(v, &["_id", "id"])?;
    let text = str_field(v, "question")?.to_string();
    let facts = v.get("supporting_facts").and_then(Value::as_array).ok_or("missing list `supporting_facts`")?;
    // Context passages by title, to carry their text for disambiguation.
    let mut context = std::collections::HashMap::new();
    if let Some(Value::Array(ctx)) = v.get("context") {
        for c in ctx {
            if let (Some(title), Some(Value::Array(sents))) = (c.get(0).and_then(Value::as_str), c.get(1)) {
                let s: Vec<&str> = sents.iter().filter_map(Value::as_str).collect();
                context.insert(title.to_string(), join_sentences(&s));
            }
        }
    }
    let mut gold: Vec<GoldRef> = Vec::new();
    for (i, f) in facts.iter().enumerate() {
        let title = f
            .get(0)
            .and_then(Value::as_str)
            .ok_or_else(|| format!("supporting_facts[{i}]: expected [title, sentence_index]"))?;
        if !gold.iter().any(|g| matches!(g, GoldRef::Title { title: t, .. } if t == title)) {
            gold.push(GoldRef::Title { title: title.to_string(), text: context.get(title).cloned() });
        }
    }
    let qtype = v.get("type").and_then(Value::as_str).map(str::to_string);
    // 2WikiMultiHopQA's evidence triples follow the reasoning chain: in a compositional
    // or inference question the last triple's subject is the entity whose page holds
    // the last hop. Comparisons have parallel hops and no last one; HotpotQA gives no
    // order at all.
    let chained = matches!(qtype.as_deref(), Some("compositional" | "inference"));
    let last_subject = v
        .get("evidences")
        .and_then(Value::as_array)
        .and_then(|e| e.last())
        .and_then(|t| t.get(0))
        .and_then(Value::as_str);
    let last = last_subject.filter(|_| chained).and_then(|s| last_hop_title(&gold, s));
    let hop_ordered = match last {
        Some(pos) => {
            let g = gold.remove(pos);
            gold.push(g);
            true
        }
        None => false,
    };
    Ok(Question { id, text, gold, hop_ordered, qtype, answers: answers(v) })
}

/// The gold passage whose title names the evidence subject `subject`: the same title, else
/// the one gold title that is the subject plus a Wikipedia disambiguation (", 1st Earl of
/// Derby", " (businessman)"). The evidence triples name people and works without it
/// (2Wiki dev: "Thomas Stanley" for "Thomas Stanley, 1st Earl of Derby"), which left 4
/// of 2wiki-dev's 25 chain questions without a last hop.
fn last_hop_title(gold: &[GoldRef], subject: &str) -> Option<usize> {
    let subject = normalize_whitespace(subject);
    let title_of = |g: &GoldRef| match g {
        GoldRef::Title { title, .. } => Some(normalize_whitespace(title)),
        _ => None,
    };
    if let Some(exact) = gold.iter().position(|g| title_of(g).as_deref() == Some(subject.as_str())) {
        return Some(exact);
    }
    let qualified: Vec<usize> = (0..gold.len())
        .filter(|&i| {
            title_of(&gold[i])
                .and_then(|t| t.strip_prefix(subject.as_str()).map(str::to_string))
                .is_some_and(|rest| rest.starts_with(", ") || rest.starts_with(" ("))
        })
        .collect();
    match qualified.as_slice() {
        [one] => Some(*one),
        _ => None,
    }
}

fn load_jsonl(path: &Path, text: &str) -> Result<Vec<Question>> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let err = |m: String| Error::input(path, format!("line {}: {m}", i + 1));
        let v: Value = serde_json::from_str(line).map_err(|e| err(format!("invalid JSON: {e}")))?;
        let id = id_field(&v, &["id"]).map_err(err)?;
        let question = str_field(&v, "question").map_err(err)?.to_string();
        let list = |name: &str| -> Result<Option<Vec<String>>, String> {
            match v.get(name) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::Array(a)) => a
                    .iter()
                    .map(|x| x.as_str().map(str::to_string).ok_or(format!("`{name}` must hold strings")))
                    .collect::<Result<Vec<_>, _>>()
                    .map(Some),
                Some(_) => Err(format!("`{name}` must be a list of strings")),
            }
        };
        let gold: Vec<GoldRef> = match (list("gold_ids").map_err(err)?, list("gold_titles").map_err(err)?) {
            (Some(ids), _) => ids.into_iter().map(GoldRef::Id).collect(),
            (None, Some(titles)) => titles.into_iter().map(|title| GoldRef::Title { title, text: None }).collect(),
            (None, None) => return Err(err("needs `gold_titles` or `gold_ids`".into())),
        };
        let qtype = v.get("type").and_then(Value::as_str).map(str::to_string);
        // Gold lists are sets unless the line says otherwise.
        let hop_ordered = match v.get("hop_ordered") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => return Err(err("`hop_ordered` must be true or false".into())),
        };
        out.push(Question { id, text: question, gold, hop_ordered, qtype, answers: answers(&v) });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn titles(t: &[&str]) -> Vec<GoldRef> {
        t.iter().map(|t| GoldRef::Title { title: t.to_string(), text: None }).collect()
    }

    #[test]
    fn the_last_hop_is_found_through_a_disambiguated_title() {
        let gold = titles(&["James Stanley (bishop)", "Thomas Stanley, 1st Earl of Derby"]);
        assert_eq!(last_hop_title(&gold, "Thomas Stanley"), Some(1));
        let gold = titles(&["Alexander D. Henderson Jr.", "Alexander D. Henderson (businessman)"]);
        assert_eq!(last_hop_title(&gold, "Alexander D. Henderson"), Some(1), "\" Jr.\" is not a disambiguation");
        // The exact title wins over a qualified one; two qualified ones are a guess.
        let gold = titles(&["Blue Harbor (film)", "Blue Harbor"]);
        assert_eq!(last_hop_title(&gold, "Blue  Harbor"), Some(1));
        let gold = titles(&["Ann Lee (singer)", "Ann Lee (painter)"]);
        assert_eq!(last_hop_title(&gold, "Ann Lee"), None);
        assert_eq!(last_hop_title(&titles(&["Annapolis"]), "Ann"), None);
    }
}
