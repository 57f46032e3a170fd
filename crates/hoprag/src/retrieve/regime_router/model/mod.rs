//! RegimeRouter's models: the relation-bearing sentence selector and the Q / Union router
//! (two logistic regressions over surface-text features), their training without human
//! labels, and the saved model file. The retrieval method itself is
//! [`RegimeRouter`](super::RegimeRouter).
//!
//! A model file holds the model trained on every training question and the five
//! cross-fitted fold models. A question that was in the training set is always scored
//! by the fold model that did not see it, so evaluating on the training questions gives
//! honest out-of-fold numbers; any other question gets the full model.

pub mod features;
mod logistic;
mod train;

pub use features::{RouterFeatures, SentenceFeatures};
pub use logistic::{LogisticRegression, DEFAULT_C};
pub use train::{routes_both_ways, train, LabelDiagnostics, ThresholdOutcome, TrainingReport, TrainingSet};

use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::corpus::PassageIdx;
use crate::error::{Error, Result};
use crate::index::Matrix;

/// File name of a router model inside an index directory (used when present).
pub const MODEL_FILE: &str = "router.json";

const FORMAT: u32 = 1;

/// The model shipped with hoprag (docs/seed-methods.md says what it was trained on and
/// how it does); retrain on your own data with `hoprag train-router`.
const DEFAULT_MODEL: &str = include_str!("default_model.json");

/// A selector and a router that go together: the router was trained on the sentences
/// this selector picks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Classifiers {
    /// P(sentence is the relation-bearing sentence | its features).
    pub selector: LogisticRegression,
    /// P(Union ranks the hop-2 passage better than the question alone | router features).
    pub router: LogisticRegression,
}

/// Fold models, each with the questions it was not trained on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fold {
    pub classifiers: Classifiers,
    /// [`question_key`]s of the held-out questions.
    pub held_out: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RegimeModel {
    pub format: u32,
    /// What it was trained on, for people reading the file.
    pub trained_on: Vec<String>,
    pub full: Classifiers,
    pub folds: Vec<Fold>,
    pub report: TrainingReport,
    /// The model shipped with hoprag (set on loading it, never read from a file): it was
    /// trained on other corpora than the index it runs on.
    #[serde(skip)]
    pub built_in: bool,
}

/// The classifiers chosen for one question, and which model they come from.
pub struct ForQuestion<'a> {
    pub classifiers: &'a Classifiers,
    /// "full", or "fold N" when the question was held out of fold N's training.
    pub source: String,
}

/// A bridge sentence chosen as B_rel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Selection {
    pub index: usize,
    pub sentence: String,
    pub probability: f64,
}

impl Classifiers {
    pub fn select(&self, question: &str, bridge: &str) -> Option<Selection> {
        select(&self.selector, question, bridge)
    }

    /// P(Union) for the question, its B_rel and bridge.
    pub fn route(&self, features: &RouterFeatures) -> f64 {
        self.router.predict(&features.to_vec())
    }

    fn check(&self, what: &str) -> Result<()> {
        self.selector.check(SentenceFeatures::NAMES.len(), &format!("{what}: selector"))?;
        self.router.check(RouterFeatures::NAMES.len(), &format!("{what}: router"))
    }
}

impl RegimeModel {
    pub fn for_question(&self, question: &str) -> ForQuestion<'_> {
        let key = question_key(question);
        for (i, fold) in self.folds.iter().enumerate() {
            if fold.held_out.contains(&key) {
                return ForQuestion { classifiers: &fold.classifiers, source: format!("fold {}", i + 1) };
            }
        }
        ForQuestion { classifiers: &self.full, source: "full".into() }
    }

    /// The model shipped with hoprag.
    pub fn default_model() -> Result<RegimeModel> {
        Ok(RegimeModel { built_in: true, ..Self::parse(DEFAULT_MODEL, "the built-in router model")? })
    }

    pub fn load(path: &Path) -> Result<RegimeModel> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        Self::parse(&text, &path.display().to_string())
    }

    /// The model of `path`, else the index's own `router.json`, else the built-in one.
    pub fn resolve(path: Option<&Path>, index_folder: Option<&Path>) -> Result<RegimeModel> {
        match (path, index_folder.map(|f| f.join(MODEL_FILE))) {
            (Some(p), _) => Self::load(p),
            (None, Some(beside)) if beside.is_file() => Self::load(&beside),
            (None, _) => Self::default_model(),
        }
    }

    fn parse(text: &str, what: &str) -> Result<RegimeModel> {
        let model: RegimeModel = serde_json::from_str(text)
            .map_err(|e| Error::Config(format!("{what}: not a router model: {e} (line {})", e.line())))?;
        if model.format != FORMAT {
            return Err(Error::Config(format!("{what}: model format {} (this hoprag reads {FORMAT})", model.format)));
        }
        model.full.check(what)?;
        for (i, f) in model.folds.iter().enumerate() {
            f.classifiers.check(&format!("{what}: fold {}", i + 1))?;
        }
        Ok(model)
    }

    pub fn save(&self, path: &Path) -> Result<()> {
        let text = serde_json::to_string_pretty(self).map_err(|e| Error::Other(e.to_string()))?;
        std::fs::write(path, text + "\n").map_err(|e| Error::io(path, e))
    }
}

/// The bridge sentence `selector` finds most likely to carry the relation to the next
/// hop (the first on ties), or none for an empty bridge.
pub fn select(selector: &LogisticRegression, question: &str, bridge: &str) -> Option<Selection> {
    let mut best: Option<Selection> = None;
    for (index, (sentence, f)) in features::sentence_features(bridge, question).into_iter().enumerate() {
        let probability = selector.predict(&f.to_vec());
        if best.as_ref().is_none_or(|b| probability > b.probability) {
            best = Some(Selection { index, sentence, probability });
        }
    }
    best
}

/// Identifies a question by its text (case and spacing ignored), for held-out lookups.
pub fn question_key(question: &str) -> String {
    let normal = crate::text::normalize_whitespace(&question.to_lowercase());
    hex::encode(&Sha256::digest(normal.as_bytes())[..8])
}

/// How the two actions rank a pool that dense search scored against the question.
///
/// Q keeps the dense order; Union scores c by (1 − α)·cos(q, c) + α·cos(B_rel, c).
pub fn union_ranking(
    pool: &[(PassageIdx, f32)],
    b_rel: &[f32],
    alpha: f32,
    vectors: &Matrix,
) -> Vec<(PassageIdx, f32)> {
    let mut out: Vec<(PassageIdx, f32)> = pool
        .iter()
        .map(|&(c, q_cos)| {
            let b_cos: f32 = vectors.row(c).iter().zip(b_rel).map(|(x, y)| x * y).sum();
            (c, (1.0 - alpha) * q_cos + alpha * b_cos)
        })
        .collect();
    crate::rank::sort_hits(&mut out);
    out
}

/// The passage after the bridge in the reasoning chain: the next gold passage where hop
/// order is known (none when the bridge is the last hop), else the first gold passage
/// that is not the bridge. None when the bridge is not gold.
pub fn next_hop(gold: &[PassageIdx], ordered: bool, bridge: PassageIdx) -> Option<PassageIdx> {
    let pos = gold.iter().position(|&g| g == bridge)?;
    if ordered {
        gold.get(pos + 1).copied()
    } else {
        gold.iter().copied().find(|&g| g != bridge)
    }
}

/// 1-based rank of `target` in `ranking`, or one past the end when it is absent.
pub fn rank_of(ranking: &[(PassageIdx, f32)], target: PassageIdx) -> usize {
    ranking.iter().position(|&(p, _)| p == target).map_or(ranking.len() + 1, |i| i + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lr(weights: Vec<f64>, intercept: f64) -> LogisticRegression {
        let d = weights.len();
        LogisticRegression { mean: vec![0.0; d], std: vec![1.0; d], weights, intercept }
    }

    fn model() -> RegimeModel {
        // A selector that likes relation words, a router that likes new proper nouns.
        let full = Classifiers {
            selector: lr(vec![0.0, 3.0, 0.0, 0.0, 0.0], -1.0),
            router: lr(vec![-2.0, -2.0, 0.0, 1.5, 0.0], -1.0),
        };
        let mut fold = full.clone();
        fold.router.intercept = -10.0;
        RegimeModel {
            format: FORMAT,
            trained_on: vec!["hand-made".into()],
            full,
            folds: vec![Fold { classifiers: fold, held_out: vec![question_key("Who  directed Blue Harbor?")] }],
            report: TrainingReport::default(),
            built_in: false,
        }
    }

    #[test]
    fn selects_the_relation_sentence_and_routes_by_hand_computed_probability() {
        let m = model();
        let q = "Who directed Blue Harbor?";
        let bridge = "Blue Harbor is a drama. It was directed by Mara Quint. Critics liked it.";
        let chosen = m.for_question("Where was the director of Blue Harbor born?");
        assert_eq!(chosen.source, "full");
        let s = chosen.classifiers.select(q, bridge).unwrap();
        assert_eq!((s.index, s.sentence.as_str()), (1, "It was directed by Mara Quint."));
        assert!((s.probability - 1.0 / (1.0 + (-2.0f64).exp())).abs() < 1e-12);
        let f = RouterFeatures::compute(q, &s.sentence, bridge);
        // z = -1 + 1.5 * 1 new proper noun = 0.5.
        assert!((chosen.classifiers.route(&f) - 1.0 / (1.0 + (-0.5f64).exp())).abs() < 1e-12);
        assert!(m.full.select(q, "").is_none());
    }

    #[test]
    fn the_built_in_model_routes_its_training_questions_both_ways() {
        // A router that sends every query to Q is `never` in disguise (the model shipped
        // before had a full-model Union share of 0 on its training questions).
        let m = RegimeModel::default_model().unwrap();
        let share = m.report.full_union_share;
        assert!(share > 0.0 && share < 1.0, "full model sends {share} of its training questions to Union");
        assert!(m.report.union_labels > 0 && m.report.q_labels > 0);
        // The paper's training set: 2Wiki (2wiki-hipporag and 2wiki-dev), cross-fitted,
        // with the no-regret threshold its out-of-fold outcomes chose.
        assert!(m.trained_on.iter().all(|t| t.contains("2wiki")), "{:?}", m.trained_on);
        assert_eq!(m.folds.len(), 5);
        assert!(m.report.selected_threshold.is_some() && m.built_in);
    }

    #[test]
    fn held_out_questions_get_their_fold_model() {
        let m = model();
        let chosen = m.for_question("who directed blue harbor?");
        assert_eq!(chosen.source, "fold 1");
        assert_eq!(chosen.classifiers.router.intercept, -10.0);
    }

    #[test]
    fn a_saved_model_round_trips_and_a_broken_one_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("router.json");
        let m = model();
        m.save(&path).unwrap();
        assert_eq!(RegimeModel::load(&path).unwrap(), m);
        assert_eq!(RegimeModel::resolve(None, Some(dir.path())).unwrap(), m, "the index's own model is found");

        let mut broken = serde_json::to_value(&m).unwrap();
        broken["full"]["router"]["weights"] = serde_json::json!([1.0, 2.0]);
        std::fs::write(&path, broken.to_string()).unwrap();
        let e = RegimeModel::load(&path).unwrap_err().to_string();
        assert!(e.contains("router") && e.contains("expected 5 features"), "{e}");
        std::fs::write(&path, "{").unwrap();
        assert!(RegimeModel::load(&path).unwrap_err().to_string().contains("not a router model"));
    }

    #[test]
    fn union_ranking_mixes_the_two_cosines() {
        let vectors = Matrix::from_flat(2, vec![1.0, 0.0, 0.0, 1.0, 0.6, 0.8]);
        let pool = vec![(0, 0.9), (2, 0.7), (1, 0.5)];
        let r = union_ranking(&pool, &[0.0, 1.0], 0.5, &vectors);
        // 0: .45 + 0; 2: .35 + .4 = .75; 1: .25 + .5 = .75 → ties by index.
        assert_eq!(r.iter().map(|x| x.0).collect::<Vec<_>>(), vec![1, 2, 0]);
        assert!((r[0].1 - 0.75).abs() < 1e-6);
        assert_eq!(rank_of(&r, 0), 3);
        assert_eq!(rank_of(&r, 7), 4);
    }

    #[test]
    fn next_hop_follows_hop_order_when_known() {
        assert_eq!(next_hop(&[4, 7, 9], true, 7), Some(9));
        assert_eq!(next_hop(&[4, 7, 9], true, 9), None);
        assert_eq!(next_hop(&[4, 7], false, 7), Some(4));
        assert_eq!(next_hop(&[4, 7], false, 1), None);
    }
}
