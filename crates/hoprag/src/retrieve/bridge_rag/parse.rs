//! Reading the three answers. Model output is untrusted: each reader takes what it can,
//! falls back where it cannot, and says what it did so the trace can count it.

use serde::Serialize;
use serde_json::Value;

/// Entities longer than this are cut (a model that ignores "one to six words" can write a
/// paragraph; a search for it is no entity search).
const MAX_ENTITY_CHARS: usize = 120;

/// Hop-2 queries read from the SVO answer.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SvoAnswer {
    pub queries: Vec<String>,
    /// Queries beyond the N asked for, dropped.
    pub extra: usize,
    /// Entries that were not a query (numbers, empty strings, duplicates), skipped.
    pub skipped: usize,
}

/// Reads `{"queries": [...]}` (the key without case; never another key's list), or a
/// bare array; an entry may also be an object with subject/verb/object fields or a
/// `[subject, verb, object]` list. Keeps the first `n` distinct queries.
pub fn svo_queries(value: &Value, n: usize) -> SvoAnswer {
    let items: Vec<&Value> = match value {
        Value::Array(a) => a.iter().collect(),
        Value::Object(_) => match crate::llm::field(value, &["queries", "svo_queries", "query"]) {
            Some(Value::Array(a)) => a.iter().collect(),
            Some(v @ Value::String(_)) => vec![v],
            _ => Vec::new(),
        },
        Value::String(_) => vec![value],
        _ => Vec::new(),
    };
    let mut out = SvoAnswer::default();
    for item in items {
        match svo_text(item) {
            Some(q) if !out.queries.iter().any(|x| x.eq_ignore_ascii_case(&q)) => {
                if out.queries.len() < n {
                    out.queries.push(q);
                } else {
                    out.extra += 1;
                }
            }
            _ => out.skipped += 1,
        }
    }
    out
}

fn svo_text(v: &Value) -> Option<String> {
    let text = match v {
        Value::String(s) => s.trim().to_string(),
        Value::Array(parts) => parts.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(" "),
        Value::Object(o) => {
            let field = |names: &[&str]| {
                o.iter().find(|(k, _)| names.iter().any(|n| k.eq_ignore_ascii_case(n))).and_then(|(_, v)| v.as_str())
            };
            match (field(&["subject", "s"]), field(&["verb", "predicate", "v"]), field(&["object", "o"])) {
                (Some(s), Some(v), Some(o)) => format!("{s} {v} {o}"),
                _ => field(&["query", "text"])?.to_string(),
            }
        }
        _ => return None,
    };
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    (!text.is_empty()).then_some(text)
}

/// How the entity line was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EntitySplit {
    /// "e1 | e2", as asked.
    Bar,
    /// "e | e" or "e |": one entity, used twice (as the paper asks).
    BarOneEntity,
    /// No "|"; split on this separator instead.
    Separator(char),
    /// No "|"; the first two lines.
    Lines,
    /// No "|" and nothing to split on: one entity, used twice.
    Repeated,
    /// A JSON object naming the entities (`{"entities": [...]}` or `{"e1": .., "e2": ..}`,
    /// keys in any case).
    Json,
    /// Nothing usable: the caller falls back.
    Empty,
    /// Not the line asked for: JSON of another shape, truncated JSON, or prose whose
    /// "entities" hold brackets, braces or quotes, which no name does. The caller falls
    /// back, and the answer is not cached.
    Unusable,
}

impl EntitySplit {
    /// Whether the answer was not the "e1 | e2" line asked for.
    pub fn is_irregular(self) -> bool {
        !matches!(self, EntitySplit::Bar | EntitySplit::BarOneEntity)
    }

    /// Whether the answer gave no entity to search for.
    pub fn is_unusable(self) -> bool {
        matches!(self, EntitySplit::Empty | EntitySplit::Unusable)
    }
}

/// Characters of JSON and markup: an entity holding one is a piece of an answer of the
/// wrong shape (`{"queries": [...`, `passage [2]`), not a name.
const NOT_IN_NAMES: &[char] = &['{', '}', '[', ']', '"', '`'];

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EntityAnswer {
    pub e1: String,
    pub e2: String,
    pub split: EntitySplit,
    /// Entities cut to the length limit.
    pub cut: usize,
}

/// Reads "e1 | e2" from the first line that has a bar. Without one, splits the first line
/// on `;` or `,`, else takes the first two lines, else repeats the one entity. Quotes,
/// list markers, a leading "Entities:" label and code fences are stripped.
pub fn entities(text: &str) -> EntityAnswer {
    let body = text.rfind("</think>").map_or(text, |at| &text[at + "</think>".len()..]);
    if let Some(answer) = json_entities(body) {
        return answer;
    }
    let lines: Vec<&str> =
        body.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with("```")).map(strip_label).collect();
    let lines: Vec<&str> = lines.into_iter().filter(|l| !clean(l).is_empty()).collect();
    let mut cut = 0;
    let mut finish = |a: &str, b: &str, split: EntitySplit| {
        let (e1, c1) = limit(clean(a));
        let (e2, c2) = limit(clean(b));
        cut += usize::from(c1) + usize::from(c2);
        (e1, e2, split)
    };
    let (e1, e2, split) = if let Some(line) = lines.iter().find(|l| l.contains('|')) {
        let parts: Vec<&str> = line.split('|').filter(|p| !clean(p).is_empty()).collect();
        match parts.as_slice() {
            [] => (String::new(), String::new(), EntitySplit::Empty),
            [one] => finish(one, one, EntitySplit::BarOneEntity),
            [a, b, ..] => finish(a, b, EntitySplit::Bar),
        }
    } else if let Some(first) = lines.first() {
        let split = [';', ','].into_iter().find_map(|sep| {
            let parts: Vec<&str> = first.split(sep).filter(|p| !clean(p).is_empty()).collect();
            (parts.len() >= 2).then(|| (parts[0], parts[1], sep))
        });
        match (split, lines.get(1)) {
            (Some((a, b, sep)), _) => finish(a, b, EntitySplit::Separator(sep)),
            (None, Some(second)) => finish(first, second, EntitySplit::Lines),
            (None, None) => finish(first, first, EntitySplit::Repeated),
        }
    } else {
        (String::new(), String::new(), EntitySplit::Empty)
    };
    let split = if e1.is_empty() {
        EntitySplit::Empty
    } else if [&e1, &e2].iter().any(|e| e.contains(NOT_IN_NAMES)) {
        EntitySplit::Unusable
    } else {
        split
    };
    EntityAnswer { e1, e2, split, cut }
}

/// The entities of an answer written as JSON, though a plain line was asked for: an
/// object with `entities` (a list or an "e1 | e2" string) or `e1`/`e2`. An answer that
/// opens with `{` or `[` but holds no such object (another shape, or cut off) is
/// [`EntitySplit::Unusable`]; `None` when the answer is not JSON at all.
fn json_entities(body: &str) -> Option<EntityAnswer> {
    let start = body.trim_start().trim_start_matches("```json").trim_start_matches("```").trim_start();
    // `[Gold Coast (colony)] | Accra` is a line with a bracketed name; `["…` is JSON.
    let json_list = start.strip_prefix('[').is_some_and(|rest| rest.trim_start().starts_with(['"', '[', '{']));
    if !start.starts_with('{') && !json_list {
        return None;
    }
    let unusable = EntityAnswer { e1: String::new(), e2: String::new(), split: EntitySplit::Unusable, cut: 0 };
    let keys = ["entities", "e1", "entity"];
    let Ok(value) = crate::llm::parse_expecting(body, |v| crate::llm::has_any_key(v, &keys), "entities") else {
        return Some(unusable);
    };
    let text = |v: &Value| v.as_str().map(str::trim).filter(|s| !s.is_empty()).map(str::to_string);
    let listed: Vec<String> = match crate::llm::field(&value, &["entities", "entity"]) {
        Some(Value::Array(items)) => items.iter().filter_map(text).collect(),
        Some(Value::String(line)) => line.split('|').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect(),
        _ => [&["e1"][..], &["e2"]].iter().filter_map(|k| crate::llm::field(&value, k).and_then(text)).collect(),
    };
    let (a, b) = match listed.as_slice() {
        [] => return Some(unusable),
        [one] => (one.clone(), one.clone()),
        [a, b, ..] => (a.clone(), b.clone()),
    };
    let ((e1, c1), (e2, c2)) = (limit(clean(&a)), limit(clean(&b)));
    if e1.is_empty() || [&e1, &e2].iter().any(|e| e.contains(NOT_IN_NAMES)) {
        return Some(unusable);
    }
    let e2 = if e2.is_empty() { e1.clone() } else { e2 };
    Some(EntityAnswer { e1, e2, split: EntitySplit::Json, cut: usize::from(c1) + usize::from(c2) })
}

fn strip_label(line: &str) -> &str {
    for label in ["entities:", "entity:", "answer:", "output:"] {
        // `get`, not indexing: the cut may fall inside a character ("Holm Jølsen").
        if line.get(..label.len()).is_some_and(|head| head.eq_ignore_ascii_case(label)) {
            return line[label.len()..].trim();
        }
    }
    line
}

fn clean(s: &str) -> String {
    let s = s.trim().trim_start_matches(['-', '*', '•']).trim();
    // "1." or "2)" list markers.
    let s = match s.split_once(['.', ')']) {
        Some((n, rest)) if !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()) && rest.starts_with(' ') => rest,
        _ => s,
    };
    let quotes: &[char] = &['"', '\'', '`', '“', '”', '‘', '’'];
    let mut s = s.trim().trim_matches(quotes).trim().trim_end_matches('.').trim();
    // A wrapping pair of brackets goes; a bracket inside a name ("Gold Coast (colony)") stays.
    for (open, close) in [('[', ']'), ('(', ')'), ('<', '>')] {
        if s.starts_with(open) && s.ends_with(close) && s.len() >= 2 {
            s = s[1..s.len() - 1].trim();
        }
    }
    s.trim_matches(quotes).trim().to_string()
}

fn limit(s: String) -> (String, bool) {
    match s.char_indices().nth(MAX_ENTITY_CHARS) {
        Some((at, _)) => (s[..at].trim_end().to_string(), true),
        None => (s, false),
    }
}

/// Judge scores for the pool, one per candidate in pool order.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct JudgeAnswer {
    pub scores: Vec<f64>,
    /// Candidates the answer gave no usable score for: they get the lowest score, 0.
    pub missing: usize,
    /// Scores for no candidate (unknown or repeated ids, or beyond the pool), ignored.
    pub extra: usize,
    /// Scores outside 0..=max, clamped.
    pub clamped: usize,
    /// The answer's ids counted from 0 rather than from 1 as the prompt numbers them.
    pub zero_based_ids: bool,
    /// Scores given without an id and so read by their place in the answer, while the
    /// answer holds more or fewer entries than there are candidates: which score belongs
    /// to which candidate is a guess.
    pub misaligned: bool,
}

impl JudgeAnswer {
    /// Every candidate missing: for an answer with no JSON or a failed call.
    pub fn all_missing(n: usize) -> Self {
        JudgeAnswer { scores: vec![0.0; n], missing: n, ..Default::default() }
    }
}

/// Reads one score per candidate from the judge's answer: an array of objects with an
/// id and a score (ids as numbers or strings like "[3]"; without an id, an object's place
/// in the array is its candidate), an array of plain numbers in candidate order, an
/// object wrapping such an array under a key that says so (`{"scores": [...]}`, any
/// case; never another key's list), or an object mapping ids to scores (`{"1": 7,
/// ...}`). Scores may be numbers or strings ("7", "7/10").
pub fn judge_scores(value: &Value, n: usize, max: f64) -> JudgeAnswer {
    let entries: Vec<(Option<i64>, Option<f64>)> = match value {
        Value::Array(items) => items.iter().map(entry).collect(),
        Value::Object(o) => {
            match crate::llm::field(value, &["scores", "ratings", "candidates", "results", "judgements"]) {
                Some(Value::Array(items)) => items.iter().map(entry).collect(),
                _ => o.iter().map(|(k, v)| (id_of(&Value::String(k.clone())), number(v))).collect(),
            }
        }
        v => vec![(None, number(v))],
    };
    // Ids are 1-based as the prompt numbers the candidates; an answer whose ids run from
    // 0 to n−1 numbered them itself.
    let ids: Vec<i64> = entries.iter().filter_map(|e| e.0).collect();
    let zero_based = ids.contains(&0) && ids.iter().all(|&i| (0..n as i64).contains(&i));
    let shift = i64::from(!zero_based);

    let misaligned = entries.iter().any(|e| e.0.is_none()) && entries.len() != n;

    let mut slots: Vec<Option<f64>> = vec![None; n];
    let mut out = JudgeAnswer { zero_based_ids: zero_based, misaligned, ..Default::default() };
    for (pos, (id, score)) in entries.into_iter().enumerate() {
        let slot = match id {
            Some(i) => i.checked_sub(shift).and_then(|x| usize::try_from(x).ok()),
            None => Some(pos),
        };
        match (slot, score) {
            (Some(s), Some(x)) if s < n && slots[s].is_none() => {
                let clamped = x.clamp(0.0, max);
                out.clamped += usize::from(clamped != x);
                slots[s] = Some(clamped);
            }
            // A candidate named with no readable score stays missing.
            (Some(s), None) if s < n && slots[s].is_none() => {}
            _ => out.extra += 1,
        }
    }
    out.missing = slots.iter().filter(|s| s.is_none()).count();
    out.scores = slots.into_iter().map(|s| s.unwrap_or(0.0)).collect();
    out
}

/// An entry of the judge's array: (id, score).
fn entry(v: &Value) -> (Option<i64>, Option<f64>) {
    match v {
        Value::Object(o) => {
            let field = |names: &[&str]| o.iter().find(|(k, _)| names.contains(&k.to_ascii_lowercase().as_str()));
            let id =
                field(&["id", "candidate", "passage", "index", "idx", "doc", "n", "number"]).and_then(|f| id_of(f.1));
            let score = match field(&["score", "rating", "relevance", "grade", "value", "s"]) {
                Some((_, v)) => number(v),
                // {"3": 7}: an id written as the key.
                None if o.len() == 1 && o.keys().all(|k| k.chars().any(|c| c.is_ascii_digit())) => {
                    let (k, v) = o.iter().next().expect("one entry");
                    return (id_of(&Value::String(k.clone())), number(v));
                }
                None => None,
            };
            (id, score)
        }
        // [3, 7]: an (id, score) pair.
        Value::Array(pair) if pair.len() == 2 => (id_of(&pair[0]), number(&pair[1])),
        v => (None, number(v)),
    }
}

fn id_of(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64().or_else(|| n.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64)),
        Value::String(s) => {
            let digits: String =
                s.chars().skip_while(|c| !c.is_ascii_digit()).take_while(char::is_ascii_digit).collect();
            digits.parse().ok()
        }
        _ => None,
    }
}

fn number(v: &Value) -> Option<f64> {
    let x = match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => {
            let s = s.trim();
            let end = s.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-')).unwrap_or(s.len());
            s[..end].parse().ok()
        }
        Value::Bool(_) | Value::Null | Value::Array(_) | Value::Object(_) => None,
    }?;
    x.is_finite().then_some(x)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn svo_reads_the_object_and_the_odd_shapes() {
        let a = svo_queries(&json!({"queries": ["A wrote B", "  B   was built in C ", "a wrote b", 4, "X", "Y"]}), 3);
        assert_eq!(a.queries, ["A wrote B", "B was built in C", "X"]);
        assert_eq!((a.extra, a.skipped), (1, 2), "Y dropped; the duplicate and the number skipped");
        let b = svo_queries(&json!([{"subject": "A", "verb": "married", "object": "B"}, ["C", "born in", "D"]]), 3);
        assert_eq!(b.queries, ["A married B", "C born in D"]);
        // Another key's list is not the answer (a wrong shape, counted by the caller).
        assert!(svo_queries(&json!({"hop2": ["only one"]}), 3).queries.is_empty());
        let c = svo_queries(&json!({"notes": ["no"], "Queries": ["only one"]}), 3);
        assert_eq!(c.queries, ["only one"], "the expected key, any case, wherever it stands");
        assert!(svo_queries(&json!(17), 3).queries.is_empty());
    }

    #[test]
    fn entity_lines() {
        let e = entities("Arnold Schwarzenegger | Maria Shriver");
        assert_eq!(
            (e.e1.as_str(), e.e2.as_str(), e.split),
            ("Arnold Schwarzenegger", "Maria Shriver", EntitySplit::Bar)
        );
        let e = entities("Entities: \"Westminster\" | 1975.\nmore text");
        assert_eq!((e.e1.as_str(), e.e2.as_str()), ("Westminster", "1975"));
        let e = entities("```\nParis |\n```");
        assert_eq!((e.e1.as_str(), e.e2.as_str(), e.split), ("Paris", "Paris", EntitySplit::BarOneEntity));
        let e = entities("Michael Curtiz, Edith Carlmar");
        assert_eq!(
            (e.e1.as_str(), e.e2.as_str(), e.split),
            ("Michael Curtiz", "Edith Carlmar", EntitySplit::Separator(','))
        );
        let e = entities("1. Michael Curtiz\n2. Edith Carlmar");
        assert_eq!((e.e1.as_str(), e.e2.as_str(), e.split), ("Michael Curtiz", "Edith Carlmar", EntitySplit::Lines));
        let e = entities("[Gold Coast (British colony)] | (Accra)");
        assert_eq!((e.e1.as_str(), e.e2.as_str()), ("Gold Coast (British colony)", "Accra"));
        let e = entities("Holm Jølsen | Øresund");
        assert_eq!((e.e1.as_str(), e.e2.as_str()), ("Holm Jølsen", "Øresund"));
        let e = entities("Maria Shriver");
        assert_eq!((e.e1.as_str(), e.e2.as_str(), e.split), ("Maria Shriver", "Maria Shriver", EntitySplit::Repeated));
        assert!(e.split.is_irregular());
        assert_eq!(entities("  \n ``` \n").split, EntitySplit::Empty);
        // JSON where a line was asked for: read when it names the entities, else unusable.
        let e = entities(r#"{"Entities": ["Varn Light", "Ardent Ironworks"]}"#);
        assert_eq!((e.e1.as_str(), e.e2.as_str(), e.split), ("Varn Light", "Ardent Ironworks", EntitySplit::Json));
        let e = entities("```json\n{\"e1\": \"Varn Light\", \"e2\": \"Maud Corrigan\"}\n```");
        assert_eq!((e.e1.as_str(), e.e2.as_str()), ("Varn Light", "Maud Corrigan"));
        for bad in [
            r#"{"queries": ["who built the lighthouse", "the comp"#,
            r#"{"thoughts": ["a", "b"], "result": {"value": 3}}"#,
            r#"["Varn Light", "built by", "Ardent Ironworks"]"#,
            "Looking at passage [2] and [3], I believe the answer is unclear {sorry}.",
            "\"Varn Light\" is \"built\" | x",
        ] {
            let e = entities(bad);
            assert_eq!(e.split, EntitySplit::Unusable, "{bad}: {e:?}");
            assert!(e.split.is_unusable());
        }
        let long = entities(&format!("{} | B", "word ".repeat(60)));
        assert_eq!((long.e1.chars().count() <= MAX_ENTITY_CHARS, long.cut), (true, 1));
    }

    #[test]
    fn odd_inputs_never_panic() {
        for text in ["", "|", "||||", "ø|", "\u{0}", "Entities:", "Entitiés: x", "[", "(", "()|[]", "1.", "»ø« | ¶"]
        {
            let _ = entities(text);
        }
        let extreme = judge_scores(&json!([{"id": i64::MIN, "score": 1}, {"id": i64::MAX, "score": 1e308}]), 2, 10.0);
        assert_eq!((extreme.missing, extreme.extra), (2, 2));
        let nan_like = judge_scores(&json!(["7.5.3", "-", "", null, true]), 5, 10.0);
        assert_eq!(nan_like.missing, 5);
    }

    #[test]
    fn judge_shapes() {
        let objects = judge_scores(
            &json!([{"id": 2, "score": 9}, {"id": "[1]", "score": "4/10"}, {"id": 3, "score": 12}]),
            3,
            10.0,
        );
        assert_eq!(objects.scores, [4.0, 9.0, 10.0]);
        assert_eq!((objects.missing, objects.extra, objects.clamped), (0, 0, 1));

        let numbers = judge_scores(&json!([3, 8.5, -1, 7, 7]), 3, 10.0);
        assert_eq!(numbers.scores, [3.0, 8.5, 0.0]);
        assert_eq!((numbers.missing, numbers.extra, numbers.clamped), (0, 2, 1));
        // Five bare scores for three candidates: which three are theirs is a guess.
        assert!(numbers.misaligned);
        assert!(!judge_scores(&json!([3, 8.5, 7]), 3, 10.0).misaligned);
        assert!(judge_scores(&json!({"SCORES": [3, 8]}), 3, 10.0).misaligned, "too few, in order");
        assert!(!objects.misaligned, "ids say whose each score is");

        let wrapped = judge_scores(&json!({"scores": [{"candidate": 1, "rating": 5}]}), 2, 10.0);
        assert_eq!(wrapped.scores, [5.0, 0.0]);
        assert_eq!(wrapped.missing, 1);

        let first_array_is_not_it = judge_scores(&json!({"ids": [9, 9], "Scores": [1, 2]}), 2, 10.0);
        assert_eq!(first_array_is_not_it.scores, [1.0, 2.0]);

        let keyed = judge_scores(&json!({"1": 2, "2": "6"}), 2, 10.0);
        assert_eq!(keyed.scores, [2.0, 6.0]);

        let zero = judge_scores(&json!([{"id": 0, "score": 1}, {"id": 1, "score": 2}]), 2, 10.0);
        assert!(zero.zero_based_ids);
        assert_eq!(zero.scores, [1.0, 2.0]);

        let messy = judge_scores(
            &json!([{"id": 1, "score": 6}, {"id": 1, "score": 9}, {"id": 7, "score": 3}, {"id": 2}]),
            2,
            10.0,
        );
        assert_eq!(messy.scores, [6.0, 0.0]);
        assert_eq!((messy.missing, messy.extra), (1, 2), "repeated id and unknown id ignored; id 2 has no score");
    }
}
