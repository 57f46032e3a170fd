//! Every prompt of the GEAR methods, in one place. The roles follow the paper (§4.1, §5,
//! appendix J.2): `read` turns passages into proximal triples (with the gist memory from
//! the second iteration on), `reason` judges whether the memory answers the question,
//! `rewrite` asks for what is still missing. The wording and the demonstrations (an
//! invented lighthouse, as in the triple-extraction prompt) are hoprag's own.

/// Read (Eq. 1 and 4): the instructions.
pub const READ: &str = "\
You help answer a multi-hop question by reading passages and writing down the facts in \
them that lead to the answer.

Write each fact as a triple [subject, relation, object]: subject and object are specific \
names, dates, places or amounts written as in the passages, the relation is a short verb \
phrase. Replace pronouns with the names they stand for. Keep only facts the passages state \
that bear on the question, including facts about the people, places or works the question \
passes through on its way to the answer.

Answer with one JSON object {\"triples\": [[subject, relation, object], ...]}. If the \
passages hold nothing relevant, answer {\"triples\": []}.";

/// Added to [`READ`] when the gist memory is not empty (Eq. 4, n ≥ 2).
pub const READ_WITH_MEMORY: &str = "\
Some facts are known already; they are listed before the passages. Write the facts that \
add to them, not the known ones again.";

pub const READ_DEMO_USER: &str = "\
Passages:
[1] Harrowgate Lighthouse
Harrowgate Lighthouse is a granite tower on the northern cape of Velloria Island. It was \
designed by the engineer Tomas Brekke and first lit in 1872.
[2] Tomas Brekke
Tomas Brekke (1831–1904) was a Norwegian civil engineer. Born in Skarvik, he studied in \
Dresden before building harbours along the western coast.

Question: In which town was the designer of Harrowgate Lighthouse born?";

pub const READ_DEMO_ANSWER: &str = r#"{"triples": [["Harrowgate Lighthouse", "designed by", "Tomas Brekke"], ["Tomas Brekke", "born in", "Skarvik"]]}"#;

/// The shape of a read answer (see [`crate::llm::ChatRequest::schema`]): triples of three
/// non-empty strings, at most 30.
pub const READ_SCHEMA: &str = r#"{"type": "object",
 "properties": {"triples": {"type": "array", "maxItems": 30,
  "items": {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 3, "maxItems": 3}}},
 "required": ["triples"], "additionalProperties": false}"#;

/// Reason (Eq. 6).
pub const REASON: &str = "\
You decide whether a list of known facts is enough to answer a question.

If the facts together give the answer, reply {\"answerable\": true, \"answer\": \"<a short \
answer>\", \"reason\": \"<the facts that give it>\"}. Otherwise reply {\"answerable\": false, \
\"answer\": \"\", \"reason\": \"<what the facts establish so far and which information is \
still missing>\"}.

Judge by the facts only, not by what you know yourself. Answer with the JSON object alone.";

pub const REASON_DEMO_USER: &str = "\
Question: In which town was the designer of Harrowgate Lighthouse born?
Known facts:
- Harrowgate Lighthouse | designed by | Tomas Brekke
- Harrowgate Lighthouse | first lit in | 1872";

pub const REASON_DEMO_ANSWER: &str = r#"{"answerable": false, "answer": "", "reason": "The facts say Tomas Brekke designed Harrowgate Lighthouse, but not where Tomas Brekke was born."}"#;

/// The shape of a reason answer, its keys in the demonstration's order.
pub const REASON_SCHEMA: &str = r#"{"type": "object",
 "properties": {"answerable": {"type": "boolean"}, "answer": {"type": "string"}, "reason": {"type": "string"}},
 "required": ["answerable", "answer", "reason"], "additionalProperties": false}"#;

/// Rewrite (Eq. 7).
pub const REWRITE: &str = "\
You plan the next search for a multi-hop question that cannot be answered yet. You are \
given the question, the facts found so far and an explanation of what is missing.

Write one short, self-contained search query for the missing information: use the names \
the facts already give in place of the descriptions in the question, and ask for one thing \
only. Answer with one JSON object {\"query\": \"<the query>\"}.";

pub const REWRITE_DEMO_USER: &str = "\
Question: In which town was the designer of Harrowgate Lighthouse born?
Known facts:
- Harrowgate Lighthouse | designed by | Tomas Brekke
Missing: The facts say Tomas Brekke designed Harrowgate Lighthouse, but not where Tomas \
Brekke was born.";

pub const REWRITE_DEMO_ANSWER: &str = r#"{"query": "Where was Tomas Brekke born?"}"#;

/// The shape of a rewrite answer.
pub const REWRITE_SCHEMA: &str = r#"{"type": "object",
 "properties": {"query": {"type": "string", "minLength": 1}},
 "required": ["query"], "additionalProperties": false}"#;
