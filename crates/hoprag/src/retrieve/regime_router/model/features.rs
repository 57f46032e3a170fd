//! Surface-text features of RegimeRouter (the paper's §5.1–5.2): five router features
//! that proxy its predicates P1 (the question already names the hop-2 target) and P2
//! (the bridge introduces it), and five features of a bridge sentence for the
//! relation-bearing sentence selector. No model: capitalisation, numbers and word lists.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use crate::text::{sentences, surface_entities, SpanKind};

/// Words that make a question compare things it names (P1 proxy; the paper lists
/// "differ, same, versus, whereas"): they compare wherever they occur.
const COMPARISON_WORDS: &[&str] = &[
    "differ",
    "differs",
    "different",
    "difference",
    "same",
    "versus",
    "vs",
    "whereas",
    "compare",
    "compared",
    "comparison",
    "both",
    "neither",
];

/// Comparatives and ordinals compare only in a choice between named things ("Who was
/// born first, A or B?"); alone they are part of a description ("the first president",
/// "who later became"), so they count only in a question that offers a choice with "or".
const CHOICE_WORDS: &[&str] = &[
    "first", "last", "earlier", "later", "older", "younger", "oldest", "youngest", "more", "less", "fewer", "longer",
    "shorter", "larger", "smaller", "bigger", "higher", "lower", "closer", "farther", "further", "taller", "faster",
    "earliest", "latest",
];

/// Verbs that open a yes/no question (P1 proxy: such questions name both sides).
const YES_NO_VERBS: &[&str] = &[
    "is", "are", "was", "were", "do", "does", "did", "has", "have", "had", "can", "could", "will", "would", "should",
    "shall", "may", "might",
];

/// Word stems of verbs and nouns that state a relation between two entities; a sentence
/// holding one is likely to carry the bridge-to-target link. A word matches a stem when
/// it is the stem plus an inflection or derivation ([`STEM_ENDINGS`]), so "directed"
/// and "director" match "direct" but "start" does not match "star", nor "song" "son".
const RELATION_STEMS: &[&str] = &[
    "born",
    "died",
    "death",
    "married",
    "marri",
    "spouse",
    "wife",
    "husband",
    "son",
    "daughter",
    "father",
    "mother",
    "child",
    "parent",
    "brother",
    "sister",
    "direct",
    "produc",
    "wrote",
    "written",
    "writ",
    "compos",
    "perform",
    "sang",
    "sung",
    "star",
    "play",
    "found",
    "establish",
    "creat",
    "invent",
    "design",
    "built",
    "build",
    "own",
    "locat",
    "situat",
    "based",
    "headquarter",
    "capital",
    "member",
    "join",
    "lead",
    "led",
    "head",
    "succeed",
    "preced",
    "elect",
    "appoint",
    "serv",
    "won",
    "award",
    "nominat",
    "releas",
    "publish",
    "record",
    "sign",
    "acquir",
    "merg",
    "part of",
    "known as",
    "named",
    "name",
    "belong",
    "attend",
    "graduat",
    "studi",
    "educat",
    "work",
    "employ",
    "coach",
    "manag",
    "lie",
    "flow",
    "border",
    "contain",
    "includ",
];

/// What may follow a relation stem in a word that states the relation (a doubled last
/// consonant first is allowed too: "starring", "starred").
const STEM_ENDINGS: &[&str] = &[
    "", "s", "es", "e", "ed", "d", "ing", "er", "ers", "or", "ors", "ion", "ions", "tion", "ition", "ation", "ment",
    "age", "y", "ies", "ied", "ice",
];

/// The words of a text, lowercased, without surrounding punctuation.
fn words(text: &str) -> Vec<String> {
    text.split_whitespace()
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()).to_lowercase())
        .filter(|w| !w.is_empty())
        .collect()
}

/// Entity spans of one sentence the way the router counts them: capitalised names not at
/// the sentence start or of several words (a lone sentence-initial capital may be
/// grammar only), and numbers and dates.
fn counted_spans(sentence: &str) -> impl Iterator<Item = crate::text::EntitySpan> {
    surface_entities(sentence)
        .into_iter()
        .filter(|s| s.kind == SpanKind::Number || !s.sentence_initial || s.text.contains(' '))
}

/// Proper nouns of one sentence (or a question), lowercased.
pub fn proper_nouns(sentence: &str) -> Vec<String> {
    counted_spans(sentence).filter(|s| s.kind == SpanKind::Name).map(|s| s.text.to_lowercase()).collect()
}

/// Whether `needle`'s words occur as consecutive whole words of `haystack` (both as
/// [`words`] gives them).
fn contains_words(haystack: &[String], needle: &[String]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}

/// Proper nouns of `text` that do not occur in the question (as a span of its own, or
/// as whole words of it: "Paris" is in "the Paris Agreement", "Art" is not in "Arthur").
fn new_proper_nouns(text: &str, question: &str) -> usize {
    let q_words = words(question);
    let q_nouns: HashSet<String> = proper_nouns(question).into_iter().collect();
    proper_nouns(text).into_iter().filter(|n| !q_nouns.contains(n) && !contains_words(&q_words, &words(n))).count()
}

pub fn has_comparison_word(question: &str) -> bool {
    let w = words(question);
    let choice = w.iter().any(|x| x == "or");
    w.iter().any(|x| COMPARISON_WORDS.contains(&x.as_str()) || (choice && CHOICE_WORDS.contains(&x.as_str())))
}

pub fn starts_with_yes_no_verb(question: &str) -> bool {
    words(question).first().is_some_and(|w| YES_NO_VERBS.contains(&w.as_str()))
}

/// Whether `word` is `stem` inflected or derived (see [`STEM_ENDINGS`]).
fn stem_matches(word: &str, stem: &str) -> bool {
    let Some(rest) = word.strip_prefix(stem) else {
        return false;
    };
    if STEM_ENDINGS.contains(&rest) {
        return true;
    }
    // A doubled final consonant: star → starring.
    let last = stem.chars().last();
    let mut chars = rest.chars();
    chars.next().is_some_and(|c| Some(c) == last && !"aeiou".contains(c)) && STEM_ENDINGS[1..].contains(&chars.as_str())
}

pub fn has_relation_word(sentence: &str) -> bool {
    let w = words(sentence);
    RELATION_STEMS.iter().any(|stem| {
        if stem.contains(' ') {
            let phrase: Vec<String> = stem.split(' ').map(String::from).collect();
            contains_words(&w, &phrase)
        } else {
            w.iter().any(|x| stem_matches(x, stem))
        }
    })
}

/// The router's five features (the paper's §5.1, in its order).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RouterFeatures {
    pub q_comparison_word: bool,
    pub q_yes_no_start: bool,
    pub q_proper_nouns: usize,
    /// Proper nouns of B_rel that the question does not hold.
    pub b_rel_new_proper_nouns: usize,
    /// |B_rel| / |b| in characters.
    pub b_rel_fraction: f64,
}

impl RouterFeatures {
    pub const NAMES: [&'static str; 5] =
        ["q_comparison_word", "q_yes_no_start", "q_proper_nouns", "b_rel_new_proper_nouns", "b_rel_fraction"];

    pub fn compute(question: &str, b_rel: &str, bridge: &str) -> Self {
        let b_len = bridge.chars().count();
        RouterFeatures {
            q_comparison_word: has_comparison_word(question),
            q_yes_no_start: starts_with_yes_no_verb(question),
            q_proper_nouns: proper_nouns(question).len(),
            b_rel_new_proper_nouns: new_proper_nouns(b_rel, question),
            b_rel_fraction: if b_len == 0 { 0.0 } else { b_rel.chars().count() as f64 / b_len as f64 },
        }
    }

    pub fn to_vec(&self) -> Vec<f64> {
        let b = |x: bool| if x { 1.0 } else { 0.0 };
        vec![
            b(self.q_comparison_word),
            b(self.q_yes_no_start),
            self.q_proper_nouns as f64,
            self.b_rel_new_proper_nouns as f64,
            self.b_rel_fraction,
        ]
    }
}

/// The selector's features of one bridge sentence (the paper's §5.2).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SentenceFeatures {
    /// Proper nouns the question does not hold.
    pub new_proper_nouns: usize,
    pub relation_word: bool,
    /// Position in the passage: 0 for the first sentence, approaching 1 for the last.
    pub position: f64,
    /// Length in words.
    pub words: usize,
    /// Entity spans (names and numbers) per word.
    pub entity_density: f64,
}

impl SentenceFeatures {
    pub const NAMES: [&'static str; 5] = ["new_proper_nouns", "relation_word", "position", "words", "entity_density"];

    pub fn compute(sentence: &str, index: usize, count: usize, question: &str) -> Self {
        let n_words = words(sentence).len();
        let entities = counted_spans(sentence).count();
        SentenceFeatures {
            new_proper_nouns: new_proper_nouns(sentence, question),
            relation_word: has_relation_word(sentence),
            position: index as f64 / count.max(1) as f64,
            words: n_words,
            entity_density: if n_words == 0 { 0.0 } else { entities as f64 / n_words as f64 },
        }
    }

    pub fn to_vec(&self) -> Vec<f64> {
        vec![
            self.new_proper_nouns as f64,
            if self.relation_word { 1.0 } else { 0.0 },
            self.position,
            self.words as f64,
            self.entity_density,
        ]
    }
}

/// A passage's sentences with their selector features.
pub fn sentence_features(passage: &str, question: &str) -> Vec<(String, SentenceFeatures)> {
    let s = sentences(passage);
    let n = s.len();
    s.into_iter().enumerate().map(|(i, x)| (x.to_string(), SentenceFeatures::compute(x, i, n, question))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn router_features_by_hand() {
        let q = "Which film came out first, Blue Harbor or The Last Lighthouse?";
        let bridge = "Blue Harbor is a 1998 drama. It was directed by Mara Quint in Lisbon.";
        let b_rel = "It was directed by Mara Quint in Lisbon.";
        let f = RouterFeatures::compute(q, b_rel, bridge);
        assert!(f.q_comparison_word, "'first' is a comparison word");
        assert!(!f.q_yes_no_start);
        // "Blue Harbor", "The Last Lighthouse" ("Which" is a function word).
        assert_eq!(f.q_proper_nouns, 2);
        // "Mara Quint" and "Lisbon" are new; "It" is a function word.
        assert_eq!(f.b_rel_new_proper_nouns, 2);
        // 40 of 69 characters.
        assert!((f.b_rel_fraction - 40.0 / 69.0).abs() < 1e-12, "{}", f.b_rel_fraction);

        let yn = RouterFeatures::compute("Were Mara Quint and Otto Bell both painters?", "", "");
        assert!(yn.q_yes_no_start && yn.q_comparison_word);
        assert_eq!((yn.q_proper_nouns, yn.b_rel_new_proper_nouns, yn.b_rel_fraction), (2, 0, 0.0));
        assert_eq!(yn.to_vec(), vec![1.0, 1.0, 2.0, 0.0, 0.0]);
    }

    #[test]
    fn comparison_words_need_a_comparison() {
        // Ordinals and comparatives in a description are not comparisons...
        assert!(!has_comparison_word("Who was the first president of the country where Lake Oru lies?"));
        assert!(!has_comparison_word("What did the man who later founded Ardent study?"));
        assert!(!has_comparison_word("How many more years did the war last?"));
        // ...in a choice they are; the paper's own words always are.
        assert!(has_comparison_word("Which came out first, Blue Harbor or Red Dawn?"));
        assert!(has_comparison_word("Are Otto Bell and Mara Quint of the same nationality?"));
        assert!(has_comparison_word("How does the climate differ between them?"));
    }

    #[test]
    fn names_and_relation_words_match_whole_words() {
        // "Art" is not in "Arthur", "Ann" not in "Annapolis"; "Paris" is in the question.
        assert_eq!(new_proper_nouns("It was sold by Art to Ann in Paris.", "Where did Arthur go in Paris?"), 2);
        assert_eq!(new_proper_nouns("It was given to Ann.", "What is Annapolis known for?"), 1);
        assert_eq!(new_proper_nouns("It was signed in Paris.", "What was the Paris Agreement?"), 0);
        // Stems match their inflections, not other words that begin with them.
        assert!(has_relation_word("It was directed by Mara Quint."));
        assert!(has_relation_word("The film starring Otto Bell."));
        assert!(has_relation_word("She is the director."));
        assert!(has_relation_word("It is part of the county."));
        assert!(!has_relation_word("The song started a significant headline."));
        assert!(!has_relation_word("A ledger of the department."));
    }

    #[test]
    fn sentence_features_by_hand() {
        let q = "Who directed Blue Harbor?";
        let passage = "Blue Harbor is a drama. It was directed by Mara Quint in 1998. Critics liked it.";
        let f = sentence_features(passage, q);
        assert_eq!(f.len(), 3);
        let (s1, a) = &f[1];
        assert_eq!(s1, "It was directed by Mara Quint in 1998.");
        assert_eq!(a.new_proper_nouns, 1, "Mara Quint");
        assert!(a.relation_word, "directed");
        assert!((a.position - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(a.words, 8);
        // Two spans (Mara Quint, 1998) over 8 words.
        assert!((a.entity_density - 0.25).abs() < 1e-12);
        let (_, c) = &f[2];
        assert!(!c.relation_word);
        assert_eq!((c.new_proper_nouns, c.words), (0, 3));
        assert_eq!(f[0].1.new_proper_nouns, 0, "Blue Harbor is in the question");
    }
}
