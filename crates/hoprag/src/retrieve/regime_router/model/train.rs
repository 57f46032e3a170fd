//! Training RegimeRouter without human labels.
//!
//! - Selector: the paper's oracle definition of B_rel, the sentence of a gold bridge
//!   passage that names the next gold passage's title. Every sentence of such a bridge
//!   is an example (positive if it names the title); bridges with no naming sentence are
//!   skipped and counted.
//! - Router: self-supervised from embeddings, with the paper's margin label (its
//!   Theorem 2). The bridge b is the gold hop-1 passage (the first gold passage where
//!   hop order is known, else the gold passage the question's dense search ranks
//!   highest) and the target g the next gold passage; B_rel is the sentence of b the
//!   selector picks. With S_x = cos(x, g) − mean over the dense pool of cos(x, c), the
//!   label is Union when S_{B_rel} > S_q: then Union's score (1 − α)·cos(q, ·) +
//!   α·cos(B_rel, ·) separates g from the pool by more than the question's alone, for
//!   every α > 0. Questions with a single gold passage, or a bridge without sentences,
//!   carry no label and are counted.
//! - Cross-fitting: five folds by a hash of the question text; each fold's selector and
//!   router are trained on the other folds only, and its questions are scored by them.
//! - A router that sends every training question the same way is refused: it would
//!   pass for a trained model while doing what `never` (or `always`) does.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::features::{sentence_features, RouterFeatures};
use super::logistic::{LogisticRegression, DEFAULT_C};
use super::{question_key, rank_of, select, union_ranking, Classifiers, Fold, RegimeModel, FORMAT};
use crate::corpus::PassageIdx;
use crate::dataset::EvalQuestion;
use crate::embed::{embed_all, Embedder, TextKind};
use crate::error::{Error, Result};
use crate::index::{Index, VectorIndex};
use crate::progress::Progress;
use crate::retrieve::Query;

/// The questions of one dataset on the index of its corpus.
pub struct TrainingSet<'a> {
    pub name: String,
    pub index: &'a Index,
    pub questions: &'a [EvalQuestion],
    /// One per question, with embeddings.
    pub queries: &'a [Query],
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TrainingReport {
    pub questions: usize,
    pub folds: usize,
    pub pool: usize,
    pub alpha: f32,
    pub selector_examples: usize,
    pub selector_positives: usize,
    /// Gold bridges with no sentence naming the next passage's title (skipped).
    pub bridges_without_naming_sentence: usize,
    pub bridges_with_naming_sentence: usize,
    /// Router labels (full model): Union's margin larger / Q's at least as large.
    pub union_labels: usize,
    pub q_labels: usize,
    /// Questions without a router label: one gold passage only, or a bridge without
    /// sentences.
    pub unlabelled_no_next_hop: usize,
    /// Out-of-fold router accuracy over the labelled questions, and what always
    /// predicting the majority label would score.
    pub cross_fitted_accuracy: f64,
    pub majority_accuracy: f64,
    pub cross_fitted_n: usize,
    /// Share of labelled questions the cross-fitted routers sent to Union.
    pub cross_fitted_union_share: f64,
    /// Share of labelled questions the full model sends to Union.
    #[serde(default)]
    pub full_union_share: f64,
    /// Where the signal is (or is not), measured on the labelled questions with the
    /// full model's B_rel; absent from models trained before it was measured.
    #[serde(default)]
    pub diagnostics: Option<LabelDiagnostics>,
    /// Out-of-fold R@5 outcome of routing at each threshold τ: questions whose next
    /// passage Union brings into the pool's top 5 (wins) or drops from it (losses),
    /// among those with P(Union) ≥ τ by the fold model that did not see them.
    #[serde(default)]
    pub out_of_fold_by_threshold: Vec<ThresholdOutcome>,
    /// The no-regret threshold: the τ with the most out-of-fold wins over losses, the
    /// highest on ties; none (route nothing) when no τ wins more than it loses.
    #[serde(default)]
    pub selected_threshold: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ThresholdOutcome {
    pub threshold: f64,
    pub routed: usize,
    pub wins: usize,
    pub losses: usize,
}

/// Thresholds the no-regret choice considers: the paper's 0.5 and up.
const THRESHOLDS: [f64; 10] = [0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95];

/// Each threshold's out-of-fold outcome, and the no-regret choice among them.
fn select_threshold(oof: &[(f64, RankOutcome)]) -> (Vec<ThresholdOutcome>, Option<f64>) {
    let table: Vec<ThresholdOutcome> = THRESHOLDS
        .iter()
        .map(|&t| {
            let routed: Vec<&RankOutcome> = oof.iter().filter(|(p, _)| *p >= t).map(|(_, r)| r).collect();
            ThresholdOutcome {
                threshold: t,
                routed: routed.len(),
                wins: routed.iter().filter(|r| r.union <= 5 && r.q > 5).count(),
                losses: routed.iter().filter(|r| r.q <= 5 && r.union > 5).count(),
            }
        })
        .collect();
    let net = |o: &ThresholdOutcome| o.wins as i64 - o.losses as i64;
    // Highest τ among the best: the same evidence with fewer questions exposed.
    let best = table
        .iter()
        .filter(|o| net(o) > 0)
        .max_by(|a, b| net(a).cmp(&net(b)).then(a.threshold.total_cmp(&b.threshold)));
    let chosen = best.map(|o| o.threshold);
    (table, chosen)
}

/// What the margin labels and the five features carry, measured on the training
/// questions (the full model's B_rel, Union at the training α, the dense pool).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LabelDiagnostics {
    /// Union moves the target passage into / out of the top 5 of the pool
    /// ("always Union" at R@5: the oracle router's headroom is `into_top5`).
    pub union_into_top5: usize,
    pub union_out_of_top5: usize,
    /// Union ranks the target higher / lower / the same as Q (anywhere in the pool,
    /// absent = one past its end).
    pub union_rank_better: usize,
    pub union_rank_worse: usize,
    pub union_rank_same: usize,
    /// Labelled questions whose gold bridge is the dense top 1 (the bridge the method
    /// reads at query time; training reads the gold one).
    pub bridge_is_dense_top1: usize,
    /// Share of labelled questions whose margin label agrees with "Union ranks the
    /// target higher than Q".
    pub margin_label_agrees_with_rank: f64,
    /// Area under the ROC curve of each router feature against the margin label (0.5:
    /// no signal; below 0.5: signal the other way), in `RouterFeatures::NAMES` order.
    pub feature_auc: Vec<(String, f64)>,
    /// The same against "Union moves the target into the top 5" (what R@5 gains from).
    pub feature_auc_top5_gain: Vec<(String, f64)>,
}

/// Mann–Whitney AUC of `x` for positives against negatives (ties count a half); 0.5
/// when a class is empty.
fn auc(x: &[f64], y: &[bool]) -> f64 {
    let pos: Vec<f64> = x.iter().zip(y).filter(|p| *p.1).map(|p| *p.0).collect();
    let neg: Vec<f64> = x.iter().zip(y).filter(|p| !*p.1).map(|p| *p.0).collect();
    if pos.is_empty() || neg.is_empty() {
        return 0.5;
    }
    let mut s = 0.0;
    for a in &pos {
        for b in &neg {
            s += if a > b {
                1.0
            } else if a == b {
                0.5
            } else {
                0.0
            };
        }
    }
    s / (pos.len() * neg.len()) as f64
}

struct Item<'a> {
    key: String,
    text: &'a str,
    embedding: &'a [f32],
    gold: &'a [PassageIdx],
    ordered: bool,
    index: &'a Index,
    pool: Vec<(PassageIdx, f32)>,
    fold: usize,
}

/// A router example: features and label, or why there is none.
enum RouterExample {
    Labelled(RouterFeatures, bool, RankOutcome),
    NoNextHop,
}

/// The target's 1-based rank in the pool under Q and under Union (one past the end when
/// absent).
#[derive(Clone, Copy)]
struct RankOutcome {
    q: usize,
    union: usize,
    /// The gold bridge is the dense top 1, the bridge the method reads at query time.
    bridge_is_top1: bool,
}

/// Trains the full model and the cross-fitted fold models.
pub fn train(
    sets: &[TrainingSet],
    embedder: &dyn Embedder,
    pool: usize,
    alpha: f32,
    folds: usize,
    progress: &dyn Progress,
) -> Result<RegimeModel> {
    if folds < 2 {
        return Err(Error::Config("cross-fitting needs at least 2 folds".into()));
    }
    let mut items = Vec::new();
    for set in sets {
        if set.queries.len() != set.questions.len() {
            return Err(Error::Other(format!("{}: one query per question is needed", set.name)));
        }
        let vectors = set.index.exact_index();
        for (q, query) in set.questions.iter().zip(set.queries) {
            let embedding = query.embedding.as_ref().ok_or_else(|| Error::Other("queries need embeddings".into()))?;
            let key = question_key(&q.text);
            let fold = (u64::from_str_radix(&key[..8], 16).unwrap_or(0) % folds as u64) as usize;
            items.push(Item {
                fold,
                key,
                text: &q.text,
                embedding,
                gold: &q.gold,
                ordered: q.last_hop.is_some(),
                index: set.index,
                pool: vectors.search(embedding, pool)?,
            });
        }
    }
    let mut cache = EmbeddingCache { embedder, vectors: HashMap::new() };
    let mut report = TrainingReport { questions: items.len(), folds, pool, alpha, ..TrainingReport::default() };

    // Selector examples come from gold alone, once per question.
    let selector_examples: Vec<Vec<(Vec<f64>, bool)>> = items
        .iter()
        .map(|item| {
            let (examples, with, without) = selector_examples(item);
            report.bridges_with_naming_sentence += with;
            report.bridges_without_naming_sentence += without;
            examples
        })
        .collect();

    let fit = |train: &dyn Fn(usize) -> bool, cache: &mut EmbeddingCache, what: &str| -> Result<Classifiers> {
        let (x, y): (Vec<Vec<f64>>, Vec<bool>) = selector_examples
            .iter()
            .enumerate()
            .filter(|(i, _)| train(*i))
            .flat_map(|(_, e)| e.iter().cloned())
            .unzip();
        let selector = LogisticRegression::fit(&x, &y, DEFAULT_C)
            .map_err(|e| Error::Config(format!("{what}: sentence selector: {e}")))?;
        let trained: Vec<usize> = (0..items.len()).filter(|&i| train(i)).collect();
        let examples = router_examples(&items, &trained, &selector, alpha, cache, progress)?;
        let (x, y): (Vec<Vec<f64>>, Vec<bool>) = examples
            .into_iter()
            .filter_map(|e| match e {
                RouterExample::Labelled(f, l, _) => Some((f.to_vec(), l)),
                _ => None,
            })
            .unzip();
        let router =
            LogisticRegression::fit(&x, &y, DEFAULT_C).map_err(|e| Error::Config(format!("{what}: router: {e}")))?;
        Ok(Classifiers { selector, router })
    };

    let mut fold_models = Vec::new();
    let (mut correct, mut scored, mut to_union) = (0, 0, 0);
    let mut out_of_fold = Vec::new();
    for f in 0..folds {
        let classifiers = fit(&|i| items[i].fold != f, &mut cache, &format!("fold {}", f + 1))?;
        let held: Vec<usize> = (0..items.len()).filter(|&i| items[i].fold == f).collect();
        for example in router_examples(&items, &held, &classifiers.selector, alpha, &mut cache, progress)? {
            if let RouterExample::Labelled(features, label, ranks) = example {
                let p = classifiers.route(&features);
                out_of_fold.push((p, ranks));
                let union = p >= 0.5;
                scored += 1;
                correct += usize::from(union == label);
                to_union += usize::from(union);
            }
        }
        fold_models.push(Fold { classifiers, held_out: held.iter().map(|&i| items[i].key.clone()).collect() });
    }
    let full = fit(&|_| true, &mut cache, "full model")?;

    let all: Vec<usize> = (0..items.len()).collect();
    let mut labelled = Vec::new();
    for e in router_examples(&items, &all, &full.selector, alpha, &mut cache, progress)? {
        match e {
            RouterExample::Labelled(f, l, r) => {
                if l {
                    report.union_labels += 1;
                } else {
                    report.q_labels += 1;
                }
                labelled.push((f, l, r));
            }
            RouterExample::NoNextHop => report.unlabelled_no_next_hop += 1,
        }
    }
    report.diagnostics = Some(diagnose(&labelled));
    let features: Vec<RouterFeatures> = labelled.iter().map(|e| e.0).collect();
    report.full_union_share = routes_both_ways(&full, &features)?;
    for examples in &selector_examples {
        report.selector_examples += examples.len();
        report.selector_positives += examples.iter().filter(|e| e.1).count();
    }
    let labelled = (report.union_labels + report.q_labels).max(1) as f64;
    report.majority_accuracy = report.union_labels.max(report.q_labels) as f64 / labelled;
    report.cross_fitted_n = scored;
    report.cross_fitted_accuracy = correct as f64 / scored.max(1) as f64;
    report.cross_fitted_union_share = to_union as f64 / scored.max(1) as f64;
    (report.out_of_fold_by_threshold, report.selected_threshold) = select_threshold(&out_of_fold);

    Ok(RegimeModel {
        format: FORMAT,
        trained_on: sets.iter().map(|s| format!("{} ({} questions)", s.name, s.questions.len())).collect(),
        full,
        folds: fold_models,
        report,
        built_in: false,
    })
}

/// The selector's examples from one question's gold chain: for each (bridge, next)
/// pair of gold passages (consecutive ones where hop order is known, every ordered pair
/// otherwise) whose bridge names the next title in some sentence, all of the bridge's
/// sentences. Returns the examples and the numbers of bridges with and without a naming
/// sentence.
fn selector_examples(item: &Item) -> (Vec<(Vec<f64>, bool)>, usize, usize) {
    let pairs: Vec<(PassageIdx, PassageIdx)> = if item.ordered {
        item.gold.windows(2).map(|w| (w[0], w[1])).collect()
    } else {
        item.gold.iter().flat_map(|&a| item.gold.iter().filter(move |&&b| b != a).map(move |&b| (a, b))).collect()
    };
    let (mut out, mut with, mut without) = (Vec::new(), 0, 0);
    for (bridge, next) in pairs {
        let title = item.index.passage(next).title.trim().to_lowercase();
        if title.is_empty() {
            without += 1;
            continue;
        }
        let sentences = sentence_features(&item.index.passage(bridge).text, item.text);
        let labels: Vec<bool> = sentences.iter().map(|(s, _)| s.to_lowercase().contains(&title)).collect();
        if labels.iter().any(|&l| l) {
            with += 1;
            out.extend(sentences.into_iter().zip(labels).map(|((_, f), l)| (f.to_vec(), l)));
        } else if item.ordered {
            without += 1;
        }
    }
    // Without hop order most pairs run the wrong way round: a question lacks a naming
    // sentence only when none of its pairs has one.
    if !item.ordered && with == 0 && item.gold.len() > 1 {
        without += 1;
    }
    (out, with, without)
}

/// Label and feature diagnostics over the labelled examples.
fn diagnose(examples: &[(RouterFeatures, bool, RankOutcome)]) -> LabelDiagnostics {
    let mut d = LabelDiagnostics::default();
    let mut agree = 0;
    for (_, label, r) in examples {
        d.union_into_top5 += usize::from(r.union <= 5 && r.q > 5);
        d.union_out_of_top5 += usize::from(r.q <= 5 && r.union > 5);
        match r.union.cmp(&r.q) {
            std::cmp::Ordering::Less => d.union_rank_better += 1,
            std::cmp::Ordering::Greater => d.union_rank_worse += 1,
            std::cmp::Ordering::Equal => d.union_rank_same += 1,
        }
        agree += usize::from(*label == (r.union < r.q));
        d.bridge_is_dense_top1 += usize::from(r.bridge_is_top1);
    }
    // Rounded to what a report needs, so that the values read back from a model file
    // equal the ones written (serde_json's parse may differ in the last bit otherwise).
    let round = |x: f64| (x * 1e4).round() / 1e4;
    d.margin_label_agrees_with_rank = round(agree as f64 / examples.len().max(1) as f64);
    let margin: Vec<bool> = examples.iter().map(|e| e.1).collect();
    let gain: Vec<bool> = examples.iter().map(|e| e.2.union <= 5 && e.2.q > 5).collect();
    for (j, name) in RouterFeatures::NAMES.iter().enumerate() {
        let x: Vec<f64> = examples.iter().map(|e| e.0.to_vec()[j]).collect();
        d.feature_auc.push((name.to_string(), round(auc(&x, &margin))));
        d.feature_auc_top5_gain.push((name.to_string(), round(auc(&x, &gain))));
    }
    d
}

/// The share of `features` the classifiers send to Union; an error when that is none
/// or all of them: such a router routes nothing, whatever its training report says.
pub fn routes_both_ways(classifiers: &Classifiers, features: &[RouterFeatures]) -> Result<f64> {
    let union = features.iter().filter(|f| classifiers.route(f) >= 0.5).count();
    if union == 0 || union == features.len() {
        let way = if union == 0 { "Q (the question alone)" } else { "Union" };
        return Err(Error::Config(format!(
            "the trained router sends all {} labelled training questions to {way}: it would only replay one \
             action, so it is not saved; train on more (or more varied) questions",
            features.len()
        )));
    }
    Ok(union as f64 / features.len() as f64)
}

/// The gold hop-1 passage of an item and the passage after it: in hop order where it
/// is known, else the gold passage the question's dense search ranks highest (hop 1 is
/// the one the question itself finds) and the best-ranked other one.
fn hop1_and_next(item: &Item) -> Option<(PassageIdx, PassageIdx)> {
    if item.gold.len() < 2 {
        return None;
    }
    if item.ordered {
        return Some((item.gold[0], item.gold[1]));
    }
    let vectors = item.index.vectors();
    let cos = |p: PassageIdx| -> f32 { vectors.row(p).iter().zip(item.embedding).map(|(a, b)| a * b).sum() };
    let mut by_score: Vec<(PassageIdx, f32)> = item.gold.iter().map(|&g| (g, cos(g))).collect();
    crate::rank::sort_hits(&mut by_score);
    Some((by_score[0].0, by_score[1].0))
}

/// Score separation margin S_x = cos(x, target) − mean over the pool of cos(x, c).
fn margin(x: &[f32], target: PassageIdx, pool: &[(PassageIdx, f32)], vectors: &crate::index::Matrix) -> f64 {
    let cos = |p: PassageIdx| -> f64 { vectors.row(p).iter().zip(x).map(|(a, b)| (a * b) as f64).sum() };
    let mean = pool.iter().map(|&(c, _)| cos(c)).sum::<f64>() / pool.len().max(1) as f64;
    cos(target) - mean
}

/// Router examples for `which` items, with B_rel chosen by `selector` from the gold
/// hop-1 bridge.
fn router_examples(
    items: &[Item],
    which: &[usize],
    selector: &LogisticRegression,
    alpha: f32,
    cache: &mut EmbeddingCache,
    progress: &dyn Progress,
) -> Result<Vec<RouterExample>> {
    let mut pending = Vec::new();
    for &i in which {
        let item = &items[i];
        let Some((bridge, target)) = hop1_and_next(item) else {
            pending.push(Err(RouterExample::NoNextHop));
            continue;
        };
        let bridge_text = &item.index.passage(bridge).text;
        match select(selector, item.text, bridge_text) {
            Some(s) => pending.push(Ok((i, bridge, target, s.sentence, bridge_text))),
            None => pending.push(Err(RouterExample::NoNextHop)),
        }
    }
    let texts: Vec<String> = pending.iter().filter_map(|p| p.as_ref().ok().map(|p| p.3.clone())).collect();
    cache.fill(&texts, progress)?;
    Ok(pending
        .into_iter()
        .map(|p| match p {
            Err(e) => e,
            Ok((i, bridge, target, b_rel, bridge_text)) => {
                let item = &items[i];
                let vectors = item.index.vectors();
                let b_vec = &cache.vectors[&b_rel];
                let s_b = margin(b_vec, target, &item.pool, vectors);
                let s_q = margin(item.embedding, target, &item.pool, vectors);
                let ranks = RankOutcome {
                    q: rank_of(&item.pool, target),
                    union: rank_of(&union_ranking(&item.pool, b_vec, alpha, vectors), target),
                    bridge_is_top1: item.pool.first().is_some_and(|p| p.0 == bridge),
                };
                RouterExample::Labelled(RouterFeatures::compute(item.text, &b_rel, bridge_text), s_b > s_q, ranks)
            }
        })
        .collect())
}

/// Query embeddings of B_rel sentences, computed once per distinct sentence.
struct EmbeddingCache<'a> {
    embedder: &'a dyn Embedder,
    vectors: HashMap<String, Vec<f32>>,
}

impl EmbeddingCache<'_> {
    fn fill(&mut self, texts: &[String], progress: &dyn Progress) -> Result<()> {
        let mut missing: Vec<String> = texts.iter().filter(|t| !self.vectors.contains_key(*t)).cloned().collect();
        missing.sort();
        missing.dedup();
        if missing.is_empty() {
            return Ok(());
        }
        progress.start("embedding bridge sentences", missing.len() as u64);
        let vectors = embed_all(self.embedder, &missing, TextKind::Query, 64, &|n| progress.advance(n as u64));
        progress.finish();
        self.vectors.extend(missing.into_iter().zip(vectors?));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(q: usize, union: usize) -> RankOutcome {
        RankOutcome { q, union, bridge_is_top1: true }
    }

    #[test]
    fn auc_counts_pairs_and_ties() {
        assert_eq!(auc(&[3.0, 2.0, 1.0], &[true, false, false]), 1.0);
        assert_eq!(auc(&[1.0, 2.0], &[true, false]), 0.0);
        // One tie between the positive and a negative: (1 + 0.5) / 2.
        assert_eq!(auc(&[2.0, 2.0, 1.0], &[true, false, false]), 0.75);
        assert_eq!(auc(&[1.0, 2.0], &[true, true]), 0.5, "no negatives: no signal");
    }

    #[test]
    fn the_threshold_routes_only_where_out_of_fold_wins_outnumber_losses() {
        // P(Union) 0.9 wins a top-5 place, 0.6 loses one, 0.52 wins one.
        let oof = [(0.9, outcome(8, 3)), (0.6, outcome(2, 7)), (0.52, outcome(9, 4)), (0.3, outcome(9, 1))];
        let (table, chosen) = select_threshold(&oof);
        assert_eq!((table[0].routed, table[0].wins, table[0].losses), (3, 2, 1));
        // τ 0.65 to 0.9 route the 0.9 question alone: 1W/0L, the same net as τ 0.5's 2W/1L;
        // the highest of the best is kept.
        assert_eq!(chosen, Some(0.9));
        // Nothing but losses: route nothing.
        let (_, none) = select_threshold(&[(0.8, outcome(1, 9)), (0.7, outcome(6, 6))]);
        assert_eq!(none, None);
    }
}
