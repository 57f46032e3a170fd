//! Questions with gold passages, read from the standard multi-hop benchmark formats and
//! matched to the passages of an index.
//!
//! | format | gold | hop order | type |
//! |---|---|---|---|
//! | HippoRAG MuSiQue (v1/v2) | `paragraphs[].is_supporting` | `question_decomposition[].paragraph_support_idx` (none where the last entry's is null) | hop count from the id prefix (`2hop`, `3hop`, ..) |
//! | raw HotpotQA | distinct `supporting_facts` titles | none | `type` |
//! | raw 2WikiMultiHopQA | distinct `supporting_facts` titles | `evidences` for `compositional` and `inference` questions (the last triple's subject is the last hop); none for comparisons | `type` |
//! | JSONL | `gold_titles` or `gold_ids` | the list order when the line says `"hop_ordered": true`; none by default | `type` |
//!
//! Where there is no hop order, LastHop is not defined ("n/a"), never 0 of 0.

mod formats;
mod matching;

pub use formats::{load_dataset, DatasetFormat};
pub use matching::{resolve_gold, GoldIssue, GoldMatchCounts, ResolvedDataset};

use serde::{Deserialize, Serialize};

use crate::corpus::PassageIdx;

/// A reference to a gold passage as the dataset states it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum GoldRef {
    /// A passage id of the index.
    Id(String),
    /// A title, with the passage text where the dataset gives it (titles repeat in
    /// MuSiQue, so text disambiguates).
    Title { title: String, text: Option<String> },
}

impl GoldRef {
    pub fn describe(&self) -> String {
        match self {
            GoldRef::Id(id) => format!("id {id:?}"),
            GoldRef::Title { title, .. } => format!("title {title:?}"),
        }
    }
}

/// A question as read from a dataset file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Question {
    pub id: String,
    pub text: String,
    /// Gold passages; in hop order when `hop_ordered`.
    pub gold: Vec<GoldRef>,
    pub hop_ordered: bool,
    /// Question type for breakdowns (HotpotQA/2Wiki `type`, MuSiQue hop count).
    pub qtype: Option<String>,
    /// Reference answers (first is canonical), where the dataset has them.
    pub answers: Vec<String>,
}

/// A question whose gold has been matched to index passages.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EvalQuestion {
    pub id: String,
    pub text: String,
    /// Matched gold passages, in hop order when known.
    pub gold: Vec<PassageIdx>,
    /// Gold passages the dataset names, matched or not: the recall denominator, so an
    /// unmatched gold passage counts as missed instead of vanishing.
    pub gold_total: usize,
    /// The dataset gives hop order, so LastHop is defined for this question.
    #[serde(default)]
    pub hop_ordered: bool,
    /// The last hop's gold passage, where hop order is known and it was matched (with
    /// hop order and no match, the last hop counts as missed).
    pub last_hop: Option<PassageIdx>,
    pub qtype: Option<String>,
    pub answers: Vec<String>,
}
