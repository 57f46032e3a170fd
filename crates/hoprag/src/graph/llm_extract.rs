//! LLM triple extraction and query NER.
//!
//! [`extract_llm`] asks a chat model, once per passage, for the passage's named entities
//! and the facts between them in one JSON answer (a joint NER + triple prompt in the
//! spirit of GEAR's appendix J.1; the instructions and the one-shot demonstration are
//! hoprag's own). [`query_ner`] asks for the named entities of a question, which
//! HippoRAG links to the graph instead of surface spans.
//!
//! Model output is untrusted. Answers are parsed with the lenient parser; a triple that
//! is not three non-empty strings is counted and skipped, an answer with no usable JSON
//! leaves its passage without triples and is counted, and a call that still fails after
//! the client's retries is counted and the run goes on. Only a run in which no call
//! succeeds is an error.
//!
//! Resuming: wrap the client in [`CachedLlm`](crate::llm::CachedLlm), as `hoprag graph
//! --extract llm` does. Each answer is stored the moment it arrives, so after an
//! interruption (or a server outage that failed some calls) the same command picks up
//! where it stopped: answered passages come from the cache at no cost and only the rest
//! reach the server.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};

use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::heuristic::extract_heuristic;
use super::{Extraction, Name, Triple};
use crate::corpus::{Passage, PassageIdx};
use crate::error::{Error, Result};
use crate::llm::{ChatRequest, Llm, LlmStatsSnapshot, Meter, ParseFailure};
use crate::progress::Progress;

/// Examples of malformed triples and failed calls kept for the report; the rest are only
/// counted.
const MAX_EXAMPLES: usize = 20;

/// With this many failed calls and not one success, the server is taken to be down and
/// the remaining passages are not tried: waiting out every call's retries would take
/// hours on a large corpus and could not succeed.
const GIVE_UP_AFTER: usize = 16;

const EXTRACT_INSTRUCTIONS: &str = "\
You turn encyclopedia-style passages into knowledge-graph facts.

Read the passage and answer with one JSON object with two keys:
- \"entities\": every named entity the passage mentions (people, organisations, places, \
works, events, dates, amounts and other specific things), each written as in the passage;
- \"triples\": the facts the passage states, each a list [subject, relation, object]. \
Subjects and objects should be entities from your list wherever possible; the relation is \
a short verb phrase.

Replace pronouns with the entity they stand for, so that every triple makes sense on its \
own. State only what the passage says. Answer with the JSON object alone.";

const EXTRACT_DEMO_PASSAGE: &str = "\
Title: Harrowgate Lighthouse
Passage: Harrowgate Lighthouse is a granite tower on the northern cape of Velloria Island. \
It was designed by the engineer Tomas Brekke and first lit in 1872. Since 1994 the tower \
has housed a small maritime museum run by the Velloria Historical Society.";

const EXTRACT_DEMO_ANSWER: &str = r#"{"entities": ["Harrowgate Lighthouse", "Velloria Island", "Tomas Brekke", "1872", "1994", "Velloria Historical Society"],
 "triples": [["Harrowgate Lighthouse", "stands on", "Velloria Island"],
             ["Harrowgate Lighthouse", "designed by", "Tomas Brekke"],
             ["Tomas Brekke", "was", "engineer"],
             ["Harrowgate Lighthouse", "first lit in", "1872"],
             ["Harrowgate Lighthouse", "houses a maritime museum since", "1994"],
             ["Velloria Historical Society", "runs the museum in", "Harrowgate Lighthouse"]]}"#;

/// The shape of an extraction answer (see [`ChatRequest::schema`]): named entities, and
/// triples of three non-empty strings; at most 40 of each (GPT-3.5's triples on
/// MuSiQue passages number 9 on average, 23 at the 99th percentile), so that a small
/// model that repeats itself ends its list instead of running into its token cap.
const EXTRACT_SCHEMA: &str = r#"{"type": "object",
 "properties": {
  "entities": {"type": "array", "items": {"type": "string", "minLength": 1}, "maxItems": 40},
  "triples": {"type": "array", "maxItems": 40,
              "items": {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 3, "maxItems": 3}}},
 "required": ["entities", "triples"], "additionalProperties": false}"#;

const NER_INSTRUCTIONS: &str = "\
List the named entities in a question: the people, organisations, places, works, events, \
dates and other specific things it names, each written as in the question. Do not answer \
the question. Answer with one JSON object {\"entities\": [...]}; the list is empty if the \
question names nothing.";

const NER_DEMO_QUESTION: &str =
    "In which year was the engineer who designed Harrowgate Lighthouse born, and did he ever visit Oslo?";

const NER_DEMO_ANSWER: &str = r#"{"entities": ["Harrowgate Lighthouse", "Oslo"]}"#;

const NER_SCHEMA: &str = r#"{"type": "object",
 "properties": {"entities": {"type": "array", "items": {"type": "string", "minLength": 1}, "maxItems": 20}},
 "required": ["entities"], "additionalProperties": false}"#;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct LlmExtractOptions {
    /// Passages in flight at once. The client's own concurrency limit still applies, so
    /// set this to it (more threads would only wait for a slot).
    pub concurrency: usize,
    /// Cap on an answer's length, against a model that never stops; an answer cut off
    /// by it does not parse and is counted.
    pub max_tokens: Option<u32>,
}

impl Default for LlmExtractOptions {
    fn default() -> Self {
        LlmExtractOptions { concurrency: 8, max_tokens: Some(2048) }
    }
}

/// What an LLM extraction run cost and what it could not use (malformed triples and
/// entities are in the [`ExtractReport`](super::ExtractReport)).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LlmExtractReport {
    /// The [`Llm::id`] that answered.
    pub model: String,
    pub passages: usize,
    /// Passages whose answer held usable JSON.
    pub answered: usize,
    /// Passages whose answer held no usable JSON: they get the LLM-free triples.
    pub unparsed_passages: usize,
    /// Passages whose call failed after its retries (or was not made once the server
    /// looked down): they get the LLM-free triples, and a re-run asks for them again.
    pub failed_passages: usize,
    /// Passages (unparsed or failed) whose triples and entities come from the LLM-free
    /// extraction instead, so that none drops out of the graph.
    #[serde(default)]
    pub heuristic_fallback_passages: usize,
    /// The first few failures, `PASSAGE_ID: error`.
    pub failure_examples: Vec<String>,
    /// Calls, cache hits, tokens spent now and served from the cache, parse failures.
    pub llm: LlmStatsSnapshot,
}

/// What one passage's call came to.
enum Outcome {
    Parsed(Parsed),
    Unparsed,
    Failed(String),
}

#[derive(Default)]
struct Parsed {
    entities: Vec<String>,
    triples: Vec<(String, String, String)>,
    malformed_entities: usize,
    /// Each malformed triple as the model wrote it.
    malformed_triples: Vec<String>,
}

/// Extracts entities and triples from every passage with one call each, `concurrency`
/// passages at a time, in passage order whatever the order of the answers.
pub fn extract_llm(
    passages: &[Passage],
    llm: &dyn Llm,
    options: &LlmExtractOptions,
    progress: &dyn Progress,
) -> Result<(Extraction, LlmExtractReport)> {
    let meter = Meter::new(llm);
    let succeeded = AtomicUsize::new(0);
    let failed = AtomicUsize::new(0);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(options.concurrency.max(1))
        .thread_name(|i| format!("hoprag-llm-extract-{i}"))
        .build()
        .map_err(|e| Error::Other(format!("LLM extraction threads: {e}")))?;

    progress.start("LLM triple extraction", passages.len() as u64);
    let outcomes: Vec<Outcome> = pool.install(|| {
        passages
            .par_iter()
            .map(|passage| {
                let outcome = if succeeded.load(Ordering::SeqCst) == 0 && failed.load(Ordering::SeqCst) >= GIVE_UP_AFTER
                {
                    Outcome::Failed("not tried: every earlier call failed".into())
                } else {
                    let request = extraction_request(passage, options);
                    match meter.chat(&request) {
                        Ok(answer) => {
                            succeeded.fetch_add(1, Ordering::SeqCst);
                            match meter.parse_answer_as(&request, &answer.text, is_extraction, EXPECTED) {
                                Ok(value) => parse_extraction(&value).unwrap_or_else(|reason| {
                                    meter.wrong_shape(&request, &answer.text, reason);
                                    Outcome::Unparsed
                                }),
                                Err(_) => Outcome::Unparsed,
                            }
                        }
                        Err(e) => {
                            failed.fetch_add(1, Ordering::SeqCst);
                            Outcome::Failed(e.to_string())
                        }
                    }
                };
                progress.advance(1);
                outcome
            })
            .collect()
    });
    progress.finish();

    let mut out = Extraction::new(passages.len());
    let mut report = LlmExtractReport { model: llm.id().to_string(), passages: passages.len(), ..Default::default() };
    let mut unanswered = Vec::new();
    for (i, (passage, outcome)) in passages.iter().zip(outcomes).enumerate() {
        if !matches!(outcome, Outcome::Parsed(_)) {
            unanswered.push(i);
        }
        match outcome {
            Outcome::Parsed(parsed) => {
                report.answered += 1;
                out.report.docs += 1;
                out.report.malformed_entities += parsed.malformed_entities;
                out.report.malformed_triples += parsed.malformed_triples.len();
                for bad in parsed.malformed_triples {
                    if out.report.malformed_examples.len() < MAX_EXAMPLES {
                        out.report.malformed_examples.push(format!("{}: {bad}", passage.id));
                    }
                }
                out.entities[i] = parsed.entities.iter().map(|e| Name::new(e)).collect();
                out.triples.extend(parsed.triples.into_iter().map(|(subject, predicate, object)| Triple {
                    passage: i as PassageIdx,
                    subject: subject.into(),
                    predicate: predicate.into(),
                    object: object.into(),
                }));
            }
            Outcome::Unparsed => report.unparsed_passages += 1,
            Outcome::Failed(message) => {
                report.failed_passages += 1;
                if report.failure_examples.len() < MAX_EXAMPLES {
                    report.failure_examples.push(format!("{}: {message}", passage.id));
                }
            }
        }
    }
    report.llm = meter.snapshot();

    // The LLM-free extraction stands in where the LLM gave nothing usable (the fallback
    // of this stage, as dense is BridgeRAG's): every passage stays reachable in the graph.
    let stand_in: Vec<Passage> = unanswered.iter().map(|&i| passages[i].clone()).collect();
    let mut heuristic = extract_heuristic(&stand_in);
    for (j, &i) in unanswered.iter().enumerate() {
        out.entities[i] = std::mem::take(&mut heuristic.entities[j]);
    }
    out.triples.extend(
        heuristic.triples.into_iter().map(|t| Triple { passage: unanswered[t.passage as usize] as PassageIdx, ..t }),
    );
    report.heuristic_fallback_passages = unanswered.len();
    Ok((out, report))
}

/// The request for one passage: instructions, the demonstration as a previous turn, then
/// the passage. Everything in it is part of the cache key, so it depends on nothing but
/// the passage and the options.
fn extraction_request(passage: &Passage, options: &LlmExtractOptions) -> ChatRequest {
    let title = passage.title.trim();
    let prompt = if title.is_empty() {
        format!("Passage: {}", passage.text.trim())
    } else {
        format!("Title: {title}\nPassage: {}", passage.text.trim())
    };
    ChatRequest {
        json: true,
        max_tokens: options.max_tokens,
        ..ChatRequest::one_shot(EXTRACT_INSTRUCTIONS, EXTRACT_DEMO_PASSAGE, EXTRACT_DEMO_ANSWER, prompt)
            .with_schema(EXTRACT_SCHEMA)
    }
}

const EXPECTED: &str = "`{\"entities\": [...], \"triples\": [...]}`";

/// The shape asked for: an object with `entities` or `triples` (keys in any case), or a
/// bare list of triples (each a list), or one bare triple. Anything else in the answer,
/// such as the `[2]` of "passage [2] says", is not the answer.
fn is_extraction(value: &Value) -> bool {
    match value {
        Value::Object(_) => crate::llm::has_any_key(value, &["entities", "triples"]),
        Value::Array(items) => is_single_triple(items) || (!items.is_empty() && items.iter().all(Value::is_array)),
        _ => false,
    }
}

/// `[s, p, o]` of scalars: one triple where a list of them was asked for.
fn is_single_triple(items: &[Value]) -> bool {
    items.len() == 3 && items.iter().all(|v| v.is_string() || v.is_number())
}

/// Reads `{"entities": [...], "triples": [[s, p, o], ...]}` (keys in any case); a bare
/// list is taken as the triples, and one bare triple as a list of one. Other shapes are
/// an unusable answer.
fn parse_extraction(value: &Value) -> Result<Outcome, &'static str> {
    let single;
    let (entities, triples) = match value {
        Value::Object(_) => {
            let entities = crate::llm::field(value, &["entities"]);
            let triples = crate::llm::field(value, &["triples"]);
            if entities.is_none() && triples.is_none() {
                return Err("the answer has neither `entities` nor `triples`");
            }
            (entities, triples)
        }
        Value::Array(items) if is_single_triple(items) => {
            single = Value::Array(vec![value.clone()]);
            (None, Some(&single))
        }
        Value::Array(_) => (None, Some(value)),
        _ => return Err("the answer is not a JSON object"),
    };
    let mut parsed = Parsed::default();
    let mut seen_entities = HashSet::new();
    for e in entities.map(as_list).unwrap_or_default() {
        match text(e) {
            Some(s) => {
                if seen_entities.insert(s.clone()) {
                    parsed.entities.push(s);
                }
            }
            None => parsed.malformed_entities += 1,
        }
    }
    let mut seen_triples = HashSet::new();
    for t in triples.map(as_list).unwrap_or_default() {
        match triple(t) {
            // The same statement twice in a passage adds nothing.
            Some(t) => {
                if seen_triples.insert(t.clone()) {
                    parsed.triples.push(t);
                }
            }
            None => parsed.malformed_triples.push(t.to_string()),
        }
    }
    Ok(Outcome::Parsed(parsed))
}

/// A list's items; a lone value where a list belongs is one item (a malformed one, for
/// anything but a string).
fn as_list(v: &Value) -> Vec<&Value> {
    match v {
        Value::Array(items) => items.iter().collect(),
        Value::Null => Vec::new(),
        other => vec![other],
    }
}

/// A non-empty string, trimmed; numbers (years, amounts) are accepted as their text.
fn text(v: &Value) -> Option<String> {
    let s = match v {
        Value::String(s) => s.trim().to_string(),
        Value::Number(n) => n.to_string(),
        _ => return None,
    };
    (!s.is_empty()).then_some(s)
}

fn triple(v: &Value) -> Option<(String, String, String)> {
    match v.as_array()?.as_slice() {
        [s, p, o] => Some((text(s)?, text(p)?, text(o)?)),
        _ => None,
    }
}

/// The named entities of `question`, as the model wrote them, duplicates removed.
///
/// An answer with no usable list is counted as a parse failure in `meter`'s own stats
/// (unparseable output also in its totals) and gives no entities; a failed call is an
/// error.
pub fn query_ner(meter: &Meter<'_>, question: &str) -> Result<Vec<String>> {
    let request = ChatRequest {
        json: true,
        max_tokens: Some(256),
        ..ChatRequest::one_shot(NER_INSTRUCTIONS, NER_DEMO_QUESTION, NER_DEMO_ANSWER, question.trim())
            .with_schema(NER_SCHEMA)
    };
    let answer = meter.chat(&request)?;
    // Names are strings; a year may come as a number.
    let is_list = |v: &Value| match v {
        Value::Array(items) => items.iter().all(|x| x.is_string() || x.is_number()),
        _ => crate::llm::has_any_key(v, &["entities", "named_entities"]),
    };
    let Ok(value) = meter.parse_answer_as(&request, &answer.text, is_list, "`{\"entities\": [...]}`") else {
        return Ok(Vec::new());
    };
    // `{"entities": [...]}` as asked (the key in any case) or a bare list; never another
    // key's list.
    let list = match &value {
        Value::Array(items) => Some(items),
        Value::Object(_) => crate::llm::field(&value, &["entities", "named_entities"]).and_then(Value::as_array),
        _ => None,
    };
    let Some(list) = list else {
        meter.stats().record_parse_failure(&ParseFailure {
            reason: "the answer holds no list of entities".into(),
            snippet: answer.text.chars().take(160).collect(),
        });
        meter.reject(&request);
        return Ok(Vec::new());
    };
    let mut seen = HashSet::new();
    Ok(list.iter().filter_map(text).filter(|e| seen.insert(e.to_lowercase())).collect())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn parsed(v: Value) -> Parsed {
        match parse_extraction(&v) {
            Ok(Outcome::Parsed(p)) => p,
            _ => panic!("expected a parsed answer for {v}"),
        }
    }

    #[test]
    fn triples_must_be_three_non_empty_strings() {
        let p = parsed(json!({
            "entities": ["Harrowgate Lighthouse", " ", 7, null, "Harrowgate Lighthouse"],
            "triples": [["A", "built in", 1872], ["A", "x"], ["", "y", "z"], ["A", ["nested"], "B"],
                        "A is B", ["A", "built in", 1872], [" B ", "near", "C"]]
        }));
        assert_eq!(p.entities, ["Harrowgate Lighthouse", "7"]);
        assert_eq!(p.malformed_entities, 2);
        let a = |s: &str, p: &str, o: &str| (s.to_string(), p.to_string(), o.to_string());
        assert_eq!(p.triples, [a("A", "built in", "1872"), a("B", "near", "C")]);
        assert_eq!(p.malformed_triples.len(), 4);
        assert_eq!(p.malformed_triples[0], r#"["A","x"]"#);
    }

    #[test]
    fn shapes_other_than_the_asked_one() {
        assert_eq!(parsed(json!([["A", "r", "B"]])).triples.len(), 1, "a bare list is the triples");
        assert!(parsed(json!({"entities": ["A"]})).triples.is_empty(), "no facts is an answer");
        assert!(parse_extraction(&json!({"answer": "A"})).is_err());
        assert!(parse_extraction(&json!("A r B")).is_err());
        assert_eq!(parsed(json!({"Triples": [["A", "r", "B"]]})).triples.len(), 1, "keys in any case");
        let one = parsed(json!(["A", "r", "B"]));
        assert_eq!((one.triples.len(), one.malformed_triples.len()), (1, 0), "one bare triple");
        // The answer's shape, not the first bracket: prose with `[2]` is no answer.
        assert!(!is_extraction(&json!([2])));
        assert!(!is_extraction(&json!({"thoughts": ["a"]})));
        let prose = "Looking at passage [2] and [3], I believe the answer is unclear {sorry}.";
        assert!(crate::llm::parse_expecting(prose, is_extraction, EXPECTED).is_err());
    }

    #[test]
    fn requests_depend_only_on_the_passage() {
        let p = Passage::new("x", " T ", "Body.\n");
        let r = extraction_request(&p, &LlmExtractOptions::default());
        assert_eq!(r, extraction_request(&p.clone(), &LlmExtractOptions::default()));
        assert_eq!(r.messages.len(), 4);
        assert_eq!(r.messages[3].content, "Title: T\nPassage: Body.");
        assert!(r.json);
        let demo = crate::llm::parse_lenient(EXTRACT_DEMO_ANSWER).unwrap();
        let demo = parsed(demo);
        assert!(demo.malformed_triples.is_empty() && demo.triples.len() == 6, "the demonstration is well formed");
        assert!(crate::llm::parse_lenient(NER_DEMO_ANSWER).unwrap()["entities"].is_array());
    }

    #[cfg(feature = "local-llm")] // llama.cpp's converter
    #[test]
    fn answer_shapes_become_grammars() {
        for schema in [EXTRACT_SCHEMA, NER_SCHEMA] {
            crate::llm::local::grammar::from_schema(schema).unwrap();
        }
    }
}
