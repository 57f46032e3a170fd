//! A recorded reader: an LLM backend that answers the triple-reading stages from a
//! HippoRAG OpenIE file (`{docs: [{title, text|passage, extracted_entities,
//! extracted_triples}]}`), real output of a real model (GPT-3.5 on musique-train), so
//! that the methods that read passages into triples can be measured with that model's
//! reading, offline and for free (the setting `llm.recorded = FILE`).
//!
//! Stages are told apart by the answer shape they ask for ([`ChatRequest::schema`]):
//! - passage extraction (`--extract llm`; `{"entities", "triples"}`): the passage's
//!   recorded entities and triples, as recorded;
//! - GEAR's read (SyncGE and the agent; [`gear::prompts::READ_SCHEMA`]): a
//!   question-conditioned selection from the recorded triples of the passages read (see
//!   [`select`]), since GEAR's reader returns the facts that bear on the question, not
//!   every fact;
//! - anything else (GEAR's reason and rewrite, BridgeRAG's calls, query NER) fails, as
//!   does a read or extraction of a passage the record does not hold: the meter counts
//!   the failure and the method takes its LLM-free fallback.
//!
//! Answers are looked up, not generated, so the reader never goes behind the response
//! cache.
//!
//! [`gear::prompts::READ_SCHEMA`]: crate::retrieve::gear::prompts::READ_SCHEMA

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{json, Value};

use super::prompts::READ_SCHEMA;
use crate::error::{Error, Result};
use crate::llm::{ChatRequest, ChatResponse, Llm, LlmSource, OpenAiChatConfig, Usage};
use crate::text::normalize_whitespace;

/// The chat model `config` selects ([`crate::llm::from_config`]), or with `llm.recorded`
/// set the recorded reader of that file, not cached (its answers are looked up).
pub fn llm_from_config(config: &OpenAiChatConfig) -> Result<(std::sync::Arc<dyn Llm>, LlmSource)> {
    config.refuse_simulated_judge()?;
    if !config.recorded.as_os_str().is_empty() {
        let reader = RecordedReader::open(&config.recorded)?;
        let id = reader.id().to_string();
        return Ok((std::sync::Arc::new(reader), LlmSource::Given(id)));
    }
    crate::llm::from_config(config)
}

/// At most this many triples in a read answer: the read schema's `maxItems`.
const MAX_READ_TRIPLES: usize = 30;

/// One passage's record.
#[derive(Debug, Clone)]
struct Doc {
    entities: Vec<String>,
    /// The well-formed triples (three non-empty strings), in recorded order.
    triples: Vec<[String; 3]>,
}

/// What one call was, for the counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecordedCounts {
    /// Extraction calls answered.
    pub extractions: u64,
    /// Read calls answered (with an empty selection or not).
    pub reads: u64,
    /// Read calls answered with no triple: nothing recorded touched the question.
    pub empty_reads: u64,
    /// Calls refused: a stage the record cannot answer, or a passage it does not hold.
    pub refused: u64,
}

pub struct RecordedReader {
    id: String,
    docs: Vec<Doc>,
    /// Whitespace-normalised "title\ntext" and text alone → index in `docs`.
    by_text: HashMap<String, usize>,
    extractions: AtomicU64,
    reads: AtomicU64,
    empty_reads: AtomicU64,
    refused: AtomicU64,
}

impl RecordedReader {
    pub fn open(path: &Path) -> Result<Self> {
        let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
        let text = String::from_utf8_lossy(&bytes);
        // Python's json.dump writes NaN for HippoRAG's `avg_ent_chars`: not JSON.
        let text = text.replace(": NaN", ": null").replace(": -Infinity", ": null").replace(": Infinity", ": null");
        let root: Value = serde_json::from_str(&text).map_err(|e| Error::input(path, format!("invalid JSON: {e}")))?;
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        Self::from_value(&root, &name).map_err(|e| Error::input(path, e))
    }

    /// From an OpenIE file's content; `name` goes into [`Llm::id`].
    pub fn from_value(root: &Value, name: &str) -> std::result::Result<Self, String> {
        let docs_in = root
            .get("docs")
            .and_then(Value::as_array)
            .ok_or("expected an object with a `docs` list (HippoRAG OpenIE format)")?;
        let mut docs = Vec::with_capacity(docs_in.len());
        let mut by_text = HashMap::new();
        for doc in docs_in {
            let str_of = |k: &str| doc.get(k).and_then(Value::as_str);
            let i = docs.len();
            if let (Some(title), Some(text)) = (str_of("title"), str_of("text")) {
                by_text.entry(normalize_whitespace(&format!("{title}\n{text}"))).or_insert(i);
            }
            for key in ["passage", "text"] {
                if let Some(t) = str_of(key) {
                    by_text.entry(normalize_whitespace(t)).or_insert(i);
                }
            }
            let strings = |v: Option<&Value>| -> Vec<String> {
                v.and_then(Value::as_array)
                    .map(|a| a.iter().filter_map(Value::as_str).map(str::trim).filter(|s| !s.is_empty()))
                    .into_iter()
                    .flatten()
                    .map(String::from)
                    .collect()
            };
            let triples = doc
                .get("extracted_triples")
                .and_then(Value::as_array)
                .map(|ts| {
                    ts.iter()
                        .filter_map(|t| {
                            let parts = strings(Some(t));
                            let well_formed = t.as_array().is_some_and(|a| a.len() == 3) && parts.len() == 3;
                            well_formed.then(|| [parts[0].clone(), parts[1].clone(), parts[2].clone()])
                        })
                        .collect()
                })
                .unwrap_or_default();
            docs.push(Doc { entities: strings(doc.get("extracted_entities")), triples });
        }
        Ok(RecordedReader {
            id: format!("recorded({name})"),
            docs,
            by_text,
            extractions: AtomicU64::new(0),
            reads: AtomicU64::new(0),
            empty_reads: AtomicU64::new(0),
            refused: AtomicU64::new(0),
        })
    }

    pub fn counts(&self) -> RecordedCounts {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        RecordedCounts {
            extractions: get(&self.extractions),
            reads: get(&self.reads),
            empty_reads: get(&self.empty_reads),
            refused: get(&self.refused),
        }
    }

    fn doc(&self, title: &str, text: &str) -> Option<&Doc> {
        let key = if title.trim().is_empty() { text.to_string() } else { format!("{title}\n{text}") };
        self.by_text
            .get(&normalize_whitespace(&key))
            .or_else(|| self.by_text.get(&normalize_whitespace(text)))
            .map(|&i| &self.docs[i])
    }

    fn refuse(&self, why: String) -> Result<ChatResponse> {
        self.refused.fetch_add(1, Ordering::Relaxed);
        Err(Error::Other(format!("recorded reader: {why}")))
    }

    fn extraction(&self, user: &str) -> Result<ChatResponse> {
        let (title, text) = match user.strip_prefix("Title: ").and_then(|r| r.split_once("\nPassage: ")) {
            Some((title, text)) => (title, text),
            None => match user.strip_prefix("Passage: ") {
                Some(text) => ("", text),
                None => return self.refuse("an extraction prompt without `Passage:`".into()),
            },
        };
        let Some(doc) = self.doc(title, text) else {
            return self.refuse(format!("no record of the passage {:?}", cut_title(title, text)));
        };
        self.extractions.fetch_add(1, Ordering::Relaxed);
        Ok(answer(json!({"entities": doc.entities, "triples": doc.triples})))
    }

    fn read(&self, user: &str) -> Result<ChatResponse> {
        let Some(prompt) = parse_read(user) else {
            return self.refuse("a read prompt not in the shape GEAR writes".into());
        };
        let mut docs = Vec::with_capacity(prompt.passages.len());
        for (title, text) in &prompt.passages {
            match self.doc(title, text) {
                Some(d) => docs.push(d),
                None => return self.refuse(format!("no record of the passage {:?}", cut_title(title, text))),
            }
        }
        let triples: Vec<&[String; 3]> = docs.iter().flat_map(|d| &d.triples).collect();
        let chosen = select(&prompt.question, &prompt.known, &triples, MAX_READ_TRIPLES);
        self.reads.fetch_add(1, Ordering::Relaxed);
        if chosen.is_empty() {
            self.empty_reads.fetch_add(1, Ordering::Relaxed);
        }
        Ok(answer(json!({"triples": chosen})))
    }
}

fn cut_title(title: &str, text: &str) -> String {
    let s = if title.is_empty() { text } else { title };
    s.chars().take(60).collect()
}

fn answer(v: Value) -> ChatResponse {
    ChatResponse { text: v.to_string(), usage: Usage::default(), cached: false, retries: 0, latency_ms: 0.0 }
}

/// Which stage a request is, by the answer shape it asks for.
fn schema_keys(request: &ChatRequest) -> Option<Vec<String>> {
    let schema: Value = serde_json::from_str(request.schema.as_deref()?).ok()?;
    let mut keys: Vec<String> = schema.get("properties")?.as_object()?.keys().cloned().collect();
    keys.sort();
    Some(keys)
}

impl Llm for RecordedReader {
    fn id(&self) -> &str {
        &self.id
    }

    fn chat(&self, request: &ChatRequest) -> Result<ChatResponse> {
        let Some(user) = request.messages.last().map(|m| m.content.as_str()) else {
            return self.refuse("an empty request".into());
        };
        if request.schema.as_deref() == Some(READ_SCHEMA) {
            return self.read(user);
        }
        match schema_keys(request) {
            Some(keys) if keys == ["entities", "triples"] => self.extraction(user),
            _ => self.refuse("no record answers this stage (only passage extraction and GEAR's read)".into()),
        }
    }
}

/// A GEAR read prompt, read back.
#[derive(Debug, Clone, PartialEq)]
struct ReadPrompt {
    question: String,
    /// The gist memory's facts, `[s, p, o]`.
    known: Vec<[String; 3]>,
    /// (title, text) of each passage, in order.
    passages: Vec<(String, String)>,
}

/// Reads back the user message of [`crate::retrieve::gear::stages::read`]: optional
/// "Known facts:\n- s | p | o\n…\n\n", "Passages:\n", "[i] title\ntext\n" per passage,
/// "\nQuestion: q".
fn parse_read(user: &str) -> Option<ReadPrompt> {
    let (body, question) = user.rsplit_once("\nQuestion: ")?;
    let (known, passages) = match body.strip_prefix("Known facts:\n") {
        Some(rest) => rest.split_once("\n\nPassages:\n")?,
        None => ("", body.strip_prefix("Passages:\n")?),
    };
    let known = known
        .lines()
        .filter_map(|l| {
            let mut parts = l.strip_prefix("- ")?.splitn(3, " | ").map(|s| s.trim().to_string());
            Some([parts.next()?, parts.next()?, parts.next()?])
        })
        .collect();
    let mut out = Vec::new();
    let mut rest = passages.strip_suffix('\n')?;
    for i in 1.. {
        let body = rest.strip_prefix(&format!("[{i}] "))?;
        let next = format!("\n[{}] ", i + 1);
        let (this, more) = match body.find(&next) {
            Some(at) => (&body[..at], Some(&body[at + 1..])),
            None => (body, None),
        };
        let (title, text) = this.split_once('\n')?;
        out.push((title.to_string(), text.to_string()));
        match more {
            Some(m) => rest = m,
            None => break,
        }
    }
    Some(ReadPrompt { question: question.trim().to_string(), known, passages: out })
}

/// Words too common to link an entity to a question.
const STOP: &[&str] = &[
    "the", "and", "for", "was", "were", "who", "what", "which", "when", "where", "whom", "whose", "how", "did", "does",
    "that", "this", "with", "from", "into", "by", "of", "in", "on", "at", "to", "is", "are", "a", "an", "as", "be",
    "its", "his", "her", "their", "has", "have", "had", "it", "or", "not", "than", "then", "also",
];

fn content_words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .filter(|w| !STOP.contains(&w.as_str()))
        .collect()
}

/// Whether an entity is named in a text of these words: at least half of its content
/// words are (so "the Journal of Mathematical Physics" links to a question naming
/// "Mathematical Physics" but "Physics" alone does not link "Journal of Physics Letters"
/// … unless it is half of it).
fn linked(entity: &str, words: &HashSet<String>) -> bool {
    let w = content_words(entity);
    !w.is_empty() && 2 * w.iter().filter(|x| words.contains(*x)).count() >= w.len()
}

/// The question-conditioned selection that stands in for GEAR's reader: from the
/// recorded triples of the passages read, those that touch an entity the question (or a
/// known fact) names, then those that touch an entity the first ones lead to (one hop
/// further: the bridge a multi-hop question passes through); ranked by that round, then
/// by the question's content words they share, then in recorded order; known facts left
/// out; at most `max`.
///
/// What this changes from a model that reads: the selection can only return facts
/// GPT-3.5 wrote down reading each passage alone, without the question, so a fact it did
/// not extract is never read; linking is lexical (half an entity's content words in the
/// question), so an entity the question paraphrases is missed, and one sharing a common
/// word may be picked; and it never infers across passages beyond the one-hop chain.
fn select(question: &str, known: &[[String; 3]], triples: &[&[String; 3]], max: usize) -> Vec<[String; 3]> {
    let qwords: HashSet<String> = content_words(question).into_iter().collect();
    let mut linked_words = qwords.clone();
    for k in known {
        linked_words.extend(content_words(&k[0]));
        linked_words.extend(content_words(&k[2]));
    }
    let key = |t: &[String; 3]| t.iter().map(|s| s.to_lowercase()).collect::<Vec<_>>().join(" | ");
    let known_keys: HashSet<String> = known.iter().map(key).collect();
    let touches = |t: &[String; 3], words: &HashSet<String>| linked(&t[0], words) || linked(&t[2], words);
    let mut round = vec![None; triples.len()];
    for (i, t) in triples.iter().enumerate() {
        if touches(t, &linked_words) {
            round[i] = Some(0u8);
        }
    }
    // One hop further: the ends of the first round's triples are linked too.
    let mut next_words = linked_words.clone();
    for (i, t) in triples.iter().enumerate() {
        if round[i].is_some() {
            next_words.extend(content_words(&t[0]));
            next_words.extend(content_words(&t[2]));
        }
    }
    for (i, t) in triples.iter().enumerate() {
        if round[i].is_none() && touches(t, &next_words) {
            round[i] = Some(1);
        }
    }
    let overlap = |t: &[String; 3]| content_words(&t.join(" ")).iter().filter(|w| qwords.contains(*w)).count();
    let mut chosen: Vec<(u8, usize, usize)> =
        round.iter().enumerate().filter_map(|(i, r)| r.map(|r| (r, overlap(triples[i]), i))).collect();
    chosen.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)).then(a.2.cmp(&b.2)));
    let mut seen = known_keys;
    chosen.into_iter().map(|(_, _, i)| triples[i].clone()).filter(|t| seen.insert(key(t))).take(max).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::corpus::Passage;
    use crate::llm::Meter;
    use crate::retrieve::gear::stages::{read, Fact};
    use crate::retrieve::gear::Grounding;

    fn record() -> Value {
        json!({"docs": [
            {"title": "Harrowgate Lighthouse", "text": "Harrowgate Lighthouse was designed by Tomas Brekke.",
             "extracted_entities": ["Harrowgate Lighthouse", "Tomas Brekke"],
             "extracted_triples": [["Harrowgate Lighthouse", "designed by", "Tomas Brekke"],
                                   ["Harrowgate Lighthouse", "first lit in", "1872"], ["bad"], ["", "x", "y"]]},
            {"title": "Tomas Brekke", "text": "Tomas Brekke was born in Skarvik.",
             "extracted_entities": ["Tomas Brekke", "Skarvik"],
             "extracted_triples": [["Tomas Brekke", "born in", "Skarvik"], ["Skarvik", "lies in", "Norway"]]},
            {"title": "Other", "text": "Unrelated text.", "extracted_entities": [],
             "extracted_triples": [["Velloria", "is", "island"]]}
        ], "avg_ent_chars": null})
    }

    fn passage(title: &str, text: &str) -> Passage {
        Passage { id: title.into(), title: title.into(), text: text.into(), ..Passage::default() }
    }

    #[test]
    fn gear_reads_get_the_question_conditioned_selection() {
        let reader = RecordedReader::from_value(&record(), "test.json").unwrap();
        let meter = Meter::new(&reader);
        let a = passage("Harrowgate Lighthouse", "Harrowgate Lighthouse was designed by Tomas Brekke.");
        let b = passage("Tomas Brekke", "Tomas Brekke was born in Skarvik.");
        let c = passage("Other", "Unrelated text.");
        let q = "In which town was the designer of Harrowgate Lighthouse born?";
        let out = read(&meter, &[&a, &b, &c], q, &[], 512, Grounding::Either).unwrap();
        let got: Vec<String> = out.facts.iter().map(Fact::text).collect();
        // Round 0 touches the question's entity; round 1 the entity it leads to; the
        // unrelated passage's triple and the malformed ones never.
        assert_eq!(
            got,
            [
                "Harrowgate Lighthouse designed by Tomas Brekke",
                "Harrowgate Lighthouse first lit in 1872",
                "Tomas Brekke born in Skarvik"
            ]
        );
        // With the first fact known, it is not read again, and its object is linked.
        let known = vec![Fact {
            subject: "Harrowgate Lighthouse".into(),
            predicate: "designed by".into(),
            object: "Tomas Brekke".into(),
        }];
        let out = read(&meter, &[&b], q, &known, 512, Grounding::Either).unwrap();
        let got: Vec<String> = out.facts.iter().map(Fact::text).collect();
        assert_eq!(got, ["Tomas Brekke born in Skarvik", "Skarvik lies in Norway"]);
        assert_eq!(reader.counts(), RecordedCounts { reads: 2, ..Default::default() });
    }

    #[test]
    fn unknown_passages_and_other_stages_are_refused_and_counted() {
        let reader = RecordedReader::from_value(&record(), "test.json").unwrap();
        let meter = Meter::new(&reader);
        let x = passage("Nowhere", "Not in the record.");
        assert!(read(&meter, &[&x], "Who?", &[], 512, Grounding::Either).is_err());
        assert!(reader.chat(&ChatRequest::user("Question: who?")).is_err());
        assert_eq!(reader.counts().refused, 2);
        // The read went through the meter, which counts its failure as the method's.
        assert_eq!(meter.snapshot().errors, 1);
    }

    #[test]
    fn extraction_answers_the_record() {
        let reader = RecordedReader::from_value(&record(), "test.json").unwrap();
        let schema = r#"{"type": "object", "properties": {"entities": {}, "triples": {}}}"#;
        let request =
            ChatRequest::user("Title: Tomas Brekke\nPassage: Tomas  Brekke was born in Skarvik.").with_schema(schema);
        let v: Value = serde_json::from_str(&reader.chat(&request).unwrap().text).unwrap();
        assert_eq!(v["entities"], json!(["Tomas Brekke", "Skarvik"]));
        assert_eq!(v["triples"][0], json!(["Tomas Brekke", "born in", "Skarvik"]));
        let unknown = ChatRequest::user("Title: X\nPassage: y").with_schema(schema);
        assert!(reader.chat(&unknown).is_err());
    }
}
