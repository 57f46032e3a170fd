//! The three BridgeRAG prompts, in hoprag's own words, following the roles of the paper's
//! appendices A–C: hop-2 queries in subject-verb-object form from (q, b), two entities
//! "e1 | e2" from (q, b), and one batched judge call over the whole pool, with the bridge
//! (condition C, s(q, b, c)) or without it (condition B, s(q, c)).

use crate::llm::{ChatRequest, Message};

/// System message of the SVO call.
pub const SVO_SYSTEM: &str = "\
You help a search engine answer questions that need two passages. The first passage has \
already been found. Your job is to write search queries for the second one.";

/// System message of the entity call.
pub const ENTITY_SYSTEM: &str = "\
You read a question and a passage found for it, and name the entities a search for the \
rest of the answer should look up.";

/// System message of the bridge-conditioned judge (condition C).
pub const JUDGE_BRIDGE_SYSTEM: &str = "\
You grade evidence for questions that need two passages. The first passage (the bridge) \
has been found; it tells which people, places or things the question is really about. \
You rate candidate passages as the second piece of evidence.";

/// System message of the 2-way judge (condition B): the same task without the bridge.
pub const JUDGE_PLAIN_SYSTEM: &str = "\
You grade evidence for questions that need two passages. You rate candidate passages as \
evidence for answering the question.";

/// A passage as the prompts show it: title and text, cut to a length.
#[derive(Debug, Clone)]
pub struct PromptPassage {
    pub title: String,
    pub text: String,
}

fn passage_block(p: &PromptPassage) -> String {
    if p.title.trim().is_empty() {
        p.text.clone()
    } else {
        format!("{}: {}", p.title.trim(), p.text)
    }
}

/// The SVO call: `n` hop-2 queries as a JSON object `{"queries": [...]}`.
pub fn svo_request(question: &str, bridge: &PromptPassage, n: usize, max_tokens: u32) -> ChatRequest {
    let user = format!(
        "Question: {question}\n\
         Passage found first: {}\n\n\
         Write {n} search queries that would find the second passage: the one holding the fact \
         the question still needs once this passage is known. Write each query as a short \
         statement in subject-verb-object order that names the entities from the passage the \
         question leads to (for example \"Ada Lovelace wrote notes on the Analytical Engine\"). \
         Reply with a JSON object {{\"queries\": [...]}} holding exactly {n} strings, and nothing else.",
        passage_block(bridge)
    );
    ChatRequest {
        max_tokens: Some(max_tokens),
        json: true,
        ..ChatRequest::new(vec![Message::system(SVO_SYSTEM), Message::user(user)])
    }
    .with_schema(svo_schema(n))
}

/// The SVO answer's shape: exactly `n` non-empty strings under `queries`.
fn svo_schema(n: usize) -> String {
    format!(
        r#"{{"type": "object", "properties": {{"queries": {{"type": "array", "items": {{"type": "string", "minLength": 1}}, "minItems": {n}, "maxItems": {n}}}}}, "required": ["queries"], "additionalProperties": false}}"#
    )
}

/// The judge answer's shape: one object per candidate, in pool order, its id fixed and
/// its score an integer in 0..=`max`; so a constrained model can leave no candidate out.
fn judge_schema(n: usize, max: u32) -> String {
    let items: Vec<String> = (1..=n)
        .map(|id| {
            format!(
                r#"{{"type": "object", "properties": {{"id": {{"const": {id}}}, "score": {{"type": "integer", "minimum": 0, "maximum": {max}}}}}, "required": ["id", "score"], "additionalProperties": false}}"#
            )
        })
        .collect();
    format!(r#"{{"type": "array", "prefixItems": [{}]}}"#, items.join(", "))
}

/// The entity call: one line "e1 | e2".
pub fn entity_request(question: &str, bridge: &PromptPassage, max_tokens: u32) -> ChatRequest {
    let user = format!(
        "Question: {question}\n\n\
         Passage found first:\n{}\n\n\
         This passage settles an intermediate entity on the way to the answer. Name two \
         entities to search for next: first the one this passage settles, then the one the \
         question needs to be looked up about it. Write each in one to six words, on one \
         line, separated by \" | \", for example \"Ada Lovelace | Analytical Engine\". If \
         only one entity fits, write it twice: \"Ada Lovelace | Ada Lovelace\". Write nothing \
         else.",
        passage_block(bridge)
    );
    ChatRequest {
        max_tokens: Some(max_tokens),
        ..ChatRequest::new(vec![Message::system(ENTITY_SYSTEM), Message::user(user)])
    }
}

/// What the judge is conditioned on besides the question.
pub enum JudgeContext<'a> {
    /// Condition B: the question alone, s(q, c).
    QuestionOnly,
    /// Condition C: the bridge passage and the two entities, s(q, b, c).
    Bridge { bridge: &'a PromptPassage, e1: &'a str, e2: &'a str },
}

/// The judge call: every candidate rated 0..=`max` in one JSON array, candidates
/// numbered from 1 in pool order. Asked as plain text rather than in JSON mode, since
/// servers' JSON mode insists on an object and the natural answer is an array (objects
/// are parsed too); the local model is held to the array's shape by its schema.
pub fn judge_request(
    question: &str,
    context: JudgeContext<'_>,
    candidates: &[PromptPassage],
    max: u32,
    max_tokens: u32,
) -> ChatRequest {
    let mut user = format!("Question: {question}\n\n");
    let (system, criterion) = match context {
        JudgeContext::QuestionOnly => (
            JUDGE_PLAIN_SYSTEM,
            format!(
                "Rate each candidate from 0 to {max} for how much it helps answer the question: \
                 {max} if it states a fact the answer depends on, 0 if it is unrelated."
            ),
        ),
        JudgeContext::Bridge { bridge, e1, e2 } => {
            user.push_str(&format!(
                "Entity settled by the first passage: {e1}\nEntity to look up next: {e2}\n\
                 First passage (bridge): {}\n\n",
                passage_block(bridge)
            ));
            (
                JUDGE_BRIDGE_SYSTEM,
                format!(
                    "Rate each candidate from 0 to {max} for whether it is the second passage the \
                     question needs, given what the first passage establishes: {max} if it states \
                     the missing fact about the entity the first passage leads to, low if it only \
                     shares words with the question or belongs to a different chain of facts, 0 if \
                     it is unrelated."
                ),
            )
        }
    };
    user.push_str("Candidates:\n");
    for (i, c) in candidates.iter().enumerate() {
        user.push_str(&format!("[{}] {}\n", i + 1, passage_block(c)));
    }
    user.push_str(&format!(
        "\n{criterion} Reply with a JSON array of one object per candidate, in the order given, \
         like [{{\"id\": 1, \"score\": 7}}, {{\"id\": 2, \"score\": 0}}], covering all {} candidates, \
         and nothing else.",
        candidates.len()
    ));
    ChatRequest { max_tokens: Some(max_tokens), ..ChatRequest::new(vec![Message::system(system), Message::user(user)]) }
        .with_schema(judge_schema(candidates.len(), max))
}

/// A judge call as [`judge_request`] wrote it, read back: the question, each candidate as
/// the prompt shows it ("title: text", cut) in pool order, and the top of the scale.
/// For backends that answer the judge without a model (the simulated judge of
/// [`crate::eval::SimulatedJudge`]); `None` for any other request.
#[derive(Debug, Clone, PartialEq)]
pub struct JudgeCall {
    pub question: String,
    pub candidates: Vec<String>,
    pub max: u32,
}

/// Reads a judge request back (see [`JudgeCall`]). Recognised by its system message, so a
/// prompt of another stage is never mistaken for one.
pub fn parse_judge_request(request: &ChatRequest) -> Option<JudgeCall> {
    let [system, user] = request.messages.as_slice() else { return None };
    if system.content != JUDGE_BRIDGE_SYSTEM && system.content != JUDGE_PLAIN_SYSTEM {
        return None;
    }
    let user = user.content.as_str();
    let question = user.strip_prefix("Question: ")?.split_once("\n\n")?.0.to_string();
    let (_, list) = user.rsplit_once("Candidates:\n")?;
    // The list ends at the blank line before the criterion, which says how many
    // candidates there are. Entries start "[i] " on a new line; they are split from the
    // last one back, so that a "\n[2] " inside the text of candidate 1 is not taken for
    // the start of candidate 2 (the same inside a later candidate's text would be: no
    // passage of the shared data sets holds one).
    let (list, criterion) = list.rsplit_once("\n\n")?;
    let max = criterion.strip_prefix("Rate each candidate from 0 to ")?.split_once(' ')?.0.parse().ok()?;
    let n: usize = criterion.rsplit_once("covering all ")?.1.split_once(' ')?.0.parse().ok()?;
    let mut candidates = Vec::with_capacity(n);
    let mut rest = list;
    for i in (2..=n).rev() {
        let head = format!("\n[{i}] ");
        let at = rest.rfind(&head)?;
        candidates.push(rest[at + head.len()..].to_string());
        rest = &rest[..at];
    }
    candidates.push(rest.strip_prefix("[1] ")?.to_string());
    candidates.reverse();
    (n > 0).then_some(JudgeCall { question, candidates, max })
}

/// The prompt's form of a passage, for matching candidates against known passages.
pub fn prompt_form(title: &str, text: &str) -> String {
    passage_block(&PromptPassage { title: title.to_string(), text: text.to_string() })
}

#[cfg(test)]
mod parse_back_tests {
    use super::*;

    #[test]
    fn judge_requests_read_back_as_written() {
        let bridge = PromptPassage { title: "B".into(), text: "bridge text".into() };
        let candidates = vec![
            PromptPassage { title: "Alpha".into(), text: "one\n[2] looks like a header but is text".into() },
            PromptPassage { title: "".into(), text: "untitled".into() },
            PromptPassage { title: "Gamma".into(), text: "three…".into() },
        ];
        for context in [JudgeContext::QuestionOnly, JudgeContext::Bridge { bridge: &bridge, e1: "x", e2: "y" }] {
            let request = judge_request("Who? Really.", context, &candidates, 10, 300);
            let call = parse_judge_request(&request).unwrap();
            assert_eq!(call.question, "Who? Really.");
            assert_eq!(call.max, 10);
            let want: Vec<String> = candidates.iter().map(|c| prompt_form(&c.title, &c.text)).collect();
            assert_eq!(call.candidates, want);
        }
        let svo = svo_request("Who?", &bridge, 3, 100);
        assert_eq!(parse_judge_request(&svo), None);
    }
}

#[cfg(all(test, feature = "local-llm"))] // llama.cpp's converter
mod tests {
    use super::*;
    use crate::llm::local::grammar::from_schema;

    #[test]
    fn answer_shapes_become_grammars() {
        let svo = from_schema(&svo_schema(3)).unwrap();
        assert!(svo.contains("root ::="), "{svo}");
        let judge = from_schema(&judge_schema(4, 10)).unwrap();
        // The ids are fixed literals, the scores bounded integers.
        for id in 1..=4 {
            assert!(judge.contains(&format!("{id}")), "{judge}");
        }
        let schema: serde_json::Value = serde_json::from_str(&judge_schema(4, 10)).unwrap();
        assert_eq!(schema["prefixItems"].as_array().unwrap().len(), 4);
        assert_eq!(schema["prefixItems"][3]["properties"]["id"]["const"], 4);
    }
}
