//! The LLM stages of GEAR: read (Eq. 1, 4), reason (Eq. 6) and rewrite (Eq. 7). Model
//! output is untrusted: answers are parsed leniently, a triple that is not three
//! non-empty values is counted and dropped, an answer with no JSON is counted by the
//! meter and read as "nothing found" / "not answerable" / "no query".

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::prompts;
use super::Grounding;
use crate::corpus::Passage;
use crate::error::Result;
use crate::llm::{ChatRequest, Llm, Meter};

/// A proximal triple: a fact the LLM read in passages, not (yet) a triple of the index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fact {
    pub subject: String,
    pub predicate: String,
    pub object: String,
}

impl Fact {
    /// The text it is searched by, as triples of the index are: "subject predicate object".
    pub fn text(&self) -> String {
        format!("{} {} {}", self.subject, self.predicate, self.object)
    }

    fn line(&self) -> String {
        format!("- {} | {} | {}", self.subject, self.predicate, self.object)
    }

    fn key(&self) -> String {
        self.text().to_lowercase()
    }
}

/// What a read call gave.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ReadOutcome {
    pub facts: Vec<Fact>,
    /// Items of the triple list that were not three non-empty values.
    pub malformed: usize,
    /// The answer held no usable JSON (also counted by the meter).
    pub unparsed: bool,
    /// Well-formed triples with an end (under [`Grounding::Both`]; both ends under
    /// [`Grounding::Either`]) naming nothing in the passages read or the known facts: the
    /// prompt asks for names "written as in the passages", so these are not read from
    /// them. Dropped.
    #[serde(default)]
    pub ungrounded: usize,
}

fn request(
    system: String,
    demo_user: &str,
    demo_answer: &str,
    schema: &str,
    user: String,
    max_tokens: u32,
) -> ChatRequest {
    ChatRequest {
        max_tokens: Some(max_tokens),
        json: true,
        ..ChatRequest::one_shot(system, demo_user, demo_answer, user).with_schema(schema)
    }
}

fn facts_block(memory: &[Fact]) -> String {
    memory.iter().map(Fact::line).collect::<Vec<_>>().join("\n")
}

/// read(C, q[, G]): the facts in `passages` that help answer `question`, given the facts
/// of the gist memory (none at the first iteration and in SyncGE); `grounding` says which
/// ends of a fact must be named in them.
pub fn read(
    llm: &Meter,
    passages: &[&Passage],
    question: &str,
    memory: &[Fact],
    max_tokens: u32,
    grounding: Grounding,
) -> Result<ReadOutcome> {
    let mut system = prompts::READ.to_string();
    let mut user = String::new();
    if !memory.is_empty() {
        system = format!("{system}\n\n{}", prompts::READ_WITH_MEMORY);
        user = format!("Known facts:\n{}\n\n", facts_block(memory));
    }
    user.push_str("Passages:\n");
    for (i, p) in passages.iter().enumerate() {
        user.push_str(&format!("[{}] {}\n{}\n", i + 1, p.title, p.text));
    }
    user.push_str(&format!("\nQuestion: {question}"));
    let request =
        request(system, prompts::READ_DEMO_USER, prompts::READ_DEMO_ANSWER, prompts::READ_SCHEMA, user, max_tokens);
    let answer = llm.chat(&request)?;
    // The object asked for, a bare list of triples, or one triple; a list of numbers
    // (the `[2]` of "passage [2] helps") is prose, not the answer.
    let accept = |v: &Value| match v {
        Value::Array(items) => items.iter().all(|x| x.is_array() || x.is_object()) || is_single_triple(items),
        _ => crate::llm::has_any_key(v, &["triples", "facts", "triple", "subject"]),
    };
    let Ok(value) = llm.parse_answer_as(&request, &answer.text, accept, "`{\"triples\": [...]}`") else {
        return Ok(ReadOutcome { unparsed: true, ..Default::default() });
    };
    let mut out = parse_facts(&value);
    let mut source: Vec<&str> = passages.iter().flat_map(|p| [p.title.as_str(), p.text.as_str()]).collect();
    let known: Vec<String> = memory.iter().map(Fact::text).collect();
    source.extend(known.iter().map(String::as_str));
    let haystack = words(&source.join(" \n "));
    let read = out.facts.len();
    out.facts.retain(|f| is_grounded(f, &haystack, grounding));
    out.ungrounded = read - out.facts.len();
    if out.facts.is_empty() && out.malformed > 0 {
        llm.wrong_shape(&request, &answer.text, "no triple of three non-empty values");
    } else if out.facts.is_empty() && out.ungrounded > 0 {
        let reason = match grounding {
            Grounding::Both => "no triple whose subject and object are both named in the passages",
            Grounding::Either => "no triple names anything in the passages",
        };
        llm.wrong_shape(&request, &answer.text, reason);
    }
    Ok(out)
}

/// `[s, p, o]` of scalars: one triple where a list of them was asked for.
fn is_single_triple(items: &[Value]) -> bool {
    items.len() == 3 && items.iter().all(|v| v.is_string() || v.is_number())
}

/// Lower-case alphanumeric words joined by single spaces, with a space at each end, so
/// that names compare word by word whatever their case and punctuation.
fn words(text: &str) -> String {
    let mut out = String::from(" ");
    for word in text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
        out.push_str(&word.to_lowercase());
        out.push(' ');
    }
    out
}

/// Whether `name` occurs, as whole words, in `haystack` (made by [`words`]).
fn names_in(haystack: &str, name: &str) -> bool {
    let name = words(name);
    !name.trim().is_empty() && haystack.contains(&name)
}

/// Triples from the JSON a model wrote: `{"triples": [...]}` (or `"facts"`, keys in any
/// case), or a bare list; each item `[s, p, o]` (values beyond the third ignored) or
/// `{"subject": .., "predicate"|"relation": .., "object": ..}`. A single triple where a
/// list was asked for (`["A", "r", "B"]`, `{"triples": ["A", "r", "B"]}`, or one triple
/// object) is read as that triple, not as three malformed items. Duplicates are dropped.
pub fn parse_facts(value: &Value) -> ReadOutcome {
    let list = match value {
        Value::Array(items) => Some(items.as_slice()),
        Value::Object(_) if crate::llm::has_any_key(value, &["subject", "s", "head"]) => {
            Some(std::slice::from_ref(value))
        }
        Value::Object(_) => match crate::llm::field(value, &["triples", "facts", "triple"]) {
            Some(Value::Array(items)) => Some(items.as_slice()),
            Some(one @ Value::Object(_)) => Some(std::slice::from_ref(one)),
            _ => None,
        },
        _ => None,
    };
    let Some(items) = list else {
        return ReadOutcome { malformed: usize::from(!value.is_null()), ..Default::default() };
    };
    let single;
    let items = if is_single_triple(items) {
        single = [Value::Array(items.to_vec())];
        &single[..]
    } else {
        items
    };
    let mut out = ReadOutcome::default();
    let mut seen = std::collections::HashSet::new();
    for item in items {
        let parts: Option<[String; 3]> = match item {
            Value::Array(v) if v.len() >= 3 => Some([scalar(&v[0]), scalar(&v[1]), scalar(&v[2])]),
            Value::Object(_) => {
                let get = |keys: &[&str]| crate::llm::field(item, keys).map(scalar).unwrap_or_default();
                Some([
                    get(&["subject", "s", "head"]),
                    get(&["predicate", "relation", "p"]),
                    get(&["object", "o", "tail"]),
                ])
            }
            _ => None,
        };
        match parts {
            Some([s, p, o]) if !s.is_empty() && !p.is_empty() && !o.is_empty() => {
                let fact = Fact { subject: s, predicate: p, object: o };
                if seen.insert(fact.key()) {
                    out.facts.push(fact);
                }
            }
            _ => out.malformed += 1,
        }
    }
    out
}

/// A JSON scalar as text ("" for anything else).
fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.trim().to_string(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        _ => String::new(),
    }
}

/// Appends `new` facts to the memory (Eq. 5), leaving out facts it already holds.
pub fn remember(memory: &mut Vec<Fact>, new: &[Fact]) -> usize {
    let mut added = 0;
    for f in new {
        if !memory.iter().any(|m| m.key() == f.key()) {
            memory.push(f.clone());
            added += 1;
        }
    }
    added
}

/// reason(G, q): a^(n) and r^(n).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Verdict {
    pub answerable: bool,
    pub answer: String,
    pub reason: String,
    /// The answer held usable JSON; otherwise the verdict was read from the text.
    pub parsed: bool,
}

pub fn reason(llm: &Meter, question: &str, memory: &[Fact], max_tokens: u32) -> Result<Verdict> {
    let user = format!("Question: {question}\nKnown facts:\n{}", facts_block(memory));
    let system = prompts::REASON.to_string();
    let request = request(
        system,
        prompts::REASON_DEMO_USER,
        prompts::REASON_DEMO_ANSWER,
        prompts::REASON_SCHEMA,
        user,
        max_tokens,
    );
    let answer = llm.chat(&request)?;
    let keys = ["answerable", "answer", "reason"];
    let expected = "an object with `answerable`, `answer` or `reason`";
    let parsed = llm.parse_answer_as(&request, &answer.text, |v| crate::llm::has_any_key(v, &keys), expected);
    Ok(match parsed {
        Ok(v @ Value::Object(_)) if crate::llm::has_any_key(&v, &["answerable", "answer", "reason"]) => Verdict {
            answerable: crate::llm::field(&v, &["answerable"]).is_some_and(truthy),
            answer: crate::llm::field(&v, &["answer"]).map(scalar).unwrap_or_default(),
            reason: crate::llm::field(&v, &["reason", "why"]).map(scalar).unwrap_or_default(),
            parsed: true,
        },
        // Prose: the paper's own reply format, "Answerable: Yes", is recognised; anything
        // else means not answerable (searching on costs less than stopping too early).
        _ => {
            let lower = answer.text.to_lowercase();
            let answerable =
                lower.contains("answerable: yes") || lower.contains("\"answerable\": true") || lower.starts_with("yes");
            Verdict { answerable, answer: String::new(), reason: answer.text.trim().to_string(), parsed: false }
        }
    })
}

fn truthy(v: &Value) -> bool {
    match v {
        Value::Bool(b) => *b,
        Value::String(s) => matches!(s.trim().to_lowercase().as_str(), "yes" | "true" | "y"),
        Value::Number(n) => n.as_f64().is_some_and(|x| x != 0.0),
        _ => false,
    }
}

/// rewrite(G, q, r): the next query, or none if the answer held none. With `grounded`,
/// a query that names things (capitalised names) of which none occurs in the question,
/// the memory or `why` is refused: it was not written from them.
pub fn rewrite(
    llm: &Meter,
    question: &str,
    memory: &[Fact],
    why: &str,
    max_tokens: u32,
    grounded: bool,
) -> Result<Option<String>> {
    let user = format!("Question: {question}\nKnown facts:\n{}\nMissing: {why}", facts_block(memory));
    let system = prompts::REWRITE.to_string();
    let request = request(
        system,
        prompts::REWRITE_DEMO_USER,
        prompts::REWRITE_DEMO_ANSWER,
        prompts::REWRITE_SCHEMA,
        user,
        max_tokens,
    );
    let answer = llm.chat(&request)?;
    const KEYS: [&str; 4] = ["query", "next_query", "next_question", "question"];
    let text_of = |v: &Value| match v {
        Value::Object(_) => crate::llm::field(v, &KEYS).map(scalar).filter(|q| !q.is_empty()),
        Value::String(s) => Some(s.trim().to_string()).filter(|q| !q.is_empty()),
        _ => None,
    };
    let parsed = llm.parse_answer_as(&request, &answer.text, |v| text_of(v).is_some(), "an object with `query`");
    let Some(next) = parsed.ok().as_ref().and_then(text_of) else { return Ok(None) };
    if grounded && !is_grounded_query(&next, question, memory, why) {
        llm.wrong_shape(&request, &answer.text, "the query names nothing of the question or the known facts");
        return Ok(None);
    }
    Ok(Some(next))
}

/// Whether `fact`'s ends are named in `haystack` (made by [`words`]) as `grounding` asks.
fn is_grounded(fact: &Fact, haystack: &str, grounding: Grounding) -> bool {
    let mut ends = [&fact.subject, &fact.object].into_iter().map(|name| names_in(haystack, name));
    match grounding {
        Grounding::Both => ends.all(|named| named),
        Grounding::Either => ends.any(|named| named),
    }
}

/// Whether a rewritten query names something of what it was written from: the question,
/// the memory and the stated gap. A query without capitalised names ("who founded it?")
/// has nothing to check and passes.
fn is_grounded_query(query: &str, question: &str, memory: &[Fact], why: &str) -> bool {
    let known: Vec<String> = memory.iter().map(Fact::text).chain([question.to_string(), why.to_string()]).collect();
    let haystack = words(&known.join(" \n "));
    let names: Vec<String> = crate::text::surface_entities(query)
        .into_iter()
        .filter(|e| e.kind == crate::text::SpanKind::Name)
        .map(|e| e.text)
        .collect();
    names.is_empty() || names.iter().any(|name| names_in(&haystack, name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn facts_come_in_several_shapes_and_bad_items_are_counted() {
        let v = json!({"triples": [["A", "r", "B"], ["A", "r", "B", "extra"], {"subject": "C", "relation": "s", "object": 1872},
                                   ["only", "two"], ["", "r", "x"], "A r B", ["a", "R", "b"]]});
        let r = parse_facts(&v);
        let texts: Vec<String> = r.facts.iter().map(Fact::text).collect();
        assert_eq!(texts, ["A r B", "C s 1872"], "duplicates (any case) dropped");
        assert_eq!(r.malformed, 3);
        assert_eq!(parse_facts(&json!([["x", "y", "z"]])).facts.len(), 1, "a bare list");
        assert_eq!(parse_facts(&json!({"answer": 3})).malformed, 1, "no list at all");
        // A single triple where a list was asked for is that triple.
        for one in [
            json!(["A", "r", "B"]),
            json!({"Triples": ["A", "r", "B"]}),
            json!({"subject": "A", "predicate": "r", "object": "B"}),
            json!({"TRIPLES": [{"Subject": "A", "Relation": "r", "Object": "B"}]}),
        ] {
            let r = parse_facts(&one);
            assert_eq!(r.facts.iter().map(Fact::text).collect::<Vec<_>>(), ["A r B"], "{one}");
            assert_eq!(r.malformed, 0, "{one}");
        }
    }

    #[cfg(feature = "local-llm")] // llama.cpp's converter
    #[test]
    fn answer_shapes_become_grammars_and_the_demonstrations_fit_them() {
        for schema in [prompts::READ_SCHEMA, prompts::REASON_SCHEMA, prompts::REWRITE_SCHEMA] {
            crate::llm::local::grammar::from_schema(schema).unwrap();
        }
        let demo = |s: &str| serde_json::from_str::<Value>(s).unwrap();
        let read = parse_facts(&demo(prompts::READ_DEMO_ANSWER));
        assert_eq!((read.facts.len(), read.malformed), (2, 0));
        let keys = |s: &str| demo(s).as_object().unwrap().keys().cloned().collect::<std::collections::BTreeSet<_>>();
        let schema_keys = |s: &str| {
            demo(s)["properties"].as_object().unwrap().keys().cloned().collect::<std::collections::BTreeSet<_>>()
        };
        assert_eq!(keys(prompts::REASON_DEMO_ANSWER), schema_keys(prompts::REASON_SCHEMA));
        assert_eq!(keys(prompts::REWRITE_DEMO_ANSWER), schema_keys(prompts::REWRITE_SCHEMA));
    }

    #[test]
    fn facts_and_queries_must_be_grounded_in_what_they_were_written_from() {
        let f = |s: &str, o: &str| Fact { subject: s.into(), predicate: "built by".into(), object: o.into() };
        let read = words("Ardent Works Band\nThe band was founded in 1880 by employees of Ardent Ironworks.");
        let one_end = f("Varn Light", "Ardent Ironworks");
        assert!(!is_grounded(&one_end, &read, Grounding::Both), "Varn Light is named nowhere in the passage");
        assert!(is_grounded(&one_end, &read, Grounding::Either));
        let both = f("ardent works band", "ARDENT IRONWORKS");
        assert!(is_grounded(&both, &read, Grounding::Both), "names compare without case");
        assert!(!is_grounded(&f("Varn Light", "Maud Corrigan"), &read, Grounding::Either));

        let question = "Which river flows through the town where Ardent Ironworks was established?";
        let memory = [f("Ardent Ironworks", "Dunhaven")];
        for grounded in ["Which river flows through Dunhaven?", "Who founded Ardent Ironworks?", "which river is it?"] {
            assert!(is_grounded_query(grounded, question, &memory, ""), "{grounded}");
        }
        assert!(!is_grounded_query("Who founded Skellwing Aviation?", question, &memory, "the river"));
        assert!(is_grounded_query("Who founded Skellwing Aviation?", question, &memory, "who Skellwing Aviation is"));
        assert!(!is_grounded_query("Who founded Ardent Ironworks?", "Who sang on Salt on the Wire?", &[], ""));
    }

    #[test]
    fn memory_appends_only_new_facts() {
        let f = |s: &str| Fact { subject: s.into(), predicate: "p".into(), object: "o".into() };
        let mut memory = vec![f("A")];
        assert_eq!(remember(&mut memory, &[f("a"), f("B")]), 1);
        assert_eq!(memory, [f("A"), f("B")]);
    }
}
