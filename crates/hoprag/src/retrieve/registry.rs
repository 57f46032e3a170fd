//! Every retrieval method, once: its name, the configuration section of its parameters,
//! what it needs (a graph, an LLM), what it promises, and how it is built.
//!
//! Each method states this in its own file as a [`MethodSpec`]; [`METHODS`], beside the
//! methods' `mod` lines in `retrieve/mod.rs`, lists them, and [`MethodSections`] there
//! composes their parameters into the configuration. Everything that needs to know the
//! methods (the engine, `hoprag methods`, the server's method list and web page,
//! evaluation, benchmarks) reads that table, so adding a method is its own file plus its
//! lines in `retrieve/mod.rs`.

use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub use super::{MethodSections, DEFAULT_METHOD, METHODS};

use super::Retriever;
use crate::embed::Embedder;
use crate::error::{Error, Result};
use crate::graph::linking::{LinkParams, NerMode};
use crate::graph::GraphContext;
use crate::index::{Index, VectorIndex};
use crate::llm::Llm;

/// A retrieval method as the registry knows it.
pub struct MethodSpec {
    /// The name users give (`--method`, `"method"` in a request); `-` is read as `_`.
    pub name: &'static str,
    /// The configuration section holding its parameters, if it has any: methods of one
    /// paper share their paper's section (`gear` for `naive_ge`, `sync_ge` and `gear`).
    pub section: Option<&'static str>,
    /// What it does, in one line, without measured figures (those are in docs/).
    pub summary: &'static str,
    pub graph: GraphUse,
    pub llm: LlmUse,
    /// What its trace holds, for front ends that draw it.
    pub trace: TraceKind,
    /// Builds the method from its parameters and the opened index's resources.
    pub build: fn(&MethodSections, &dyn Resources) -> Result<Box<dyn Retriever>>,
}

/// What kind of graph an index has, as far as choosing a method goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GraphKind {
    None,
    /// Triples from the LLM-free heuristic extractor.
    Heuristic,
    /// Triples from an LLM (imported OpenIE, or `--extract llm`).
    Llm,
}

impl GraphKind {
    /// From the triple source an index's manifest records (`heuristic`, `llm:MODEL`, or
    /// an OpenIE file).
    pub fn of_source(source: Option<&str>) -> GraphKind {
        match source {
            None => GraphKind::None,
            Some("heuristic") => GraphKind::Heuristic,
            Some(_) => GraphKind::Llm,
        }
    }
}

/// Whether a method reads the index's entity graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GraphUse {
    No,
    Required,
    /// Through the method it chooses, where the index has a graph (`auto`).
    IfPresent,
}

/// What a method's trace holds, so that a front end (the web page) can draw it without
/// knowing the methods by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TraceKind {
    /// Ranked lists and their fusion.
    Lists,
    /// A walk over the entity graph (seeds, the walk, its heaviest nodes): the page's
    /// "follow the hops" view draws it.
    Walk,
    /// Triple beams over the graph (GEAR).
    Beams,
    /// A bridge passage, its expansion pool and an LLM judge's scores (BridgeRAG).
    Judge,
    /// A router's choice between rankings (RegimeRouter).
    Router,
    /// Another method's trace behind a first step naming the method chosen (`auto`).
    Choice,
}

/// Whether a method, as configured, asks an LLM anything.
#[derive(Clone, Copy)]
pub enum LlmUse {
    Never,
    Always,
    /// When its entity linking finds the query's mentions with the LLM (`link.ner`).
    ForMentions(fn(&MethodSections) -> &LinkParams),
    /// As the method it chooses for the index at hand does (`auto`): its choice for
    /// an index with this kind of graph.
    AsChosen(fn(&MethodSections, GraphKind) -> &str),
}

/// What every method is built from: the opened index generation and its models. The
/// engine implements it; methods see nothing else of it.
pub trait Resources {
    fn index(&self) -> Arc<Index>;
    /// The vector index dense searches go to: the index's own, or an exact scan when
    /// `dense.exact` asks for one.
    fn vectors(&self) -> Arc<dyn VectorIndex>;
    fn embedder(&self) -> Arc<dyn Embedder>;
    /// The entity graph with its query-time structures (loaded on first use), or an
    /// error saying how to build one.
    fn graph(&self) -> Result<Arc<GraphContext>>;
    fn graph_kind(&self) -> GraphKind;
    /// The chat model, for `method`'s error when there is none.
    fn llm(&self, method: &str) -> Result<Arc<dyn Llm>>;
    /// Queries an LLM method should run at once.
    fn llm_concurrency(&self) -> usize;
    /// The folder the index lives in, where it has one (models trained beside it).
    fn folder(&self) -> Option<&Path>;
    /// Another method, by spec, over the same resources and parameters (a composed
    /// method's inner one: GEAR's base retriever).
    fn method(&self, spec: &str) -> Result<Box<dyn Retriever>>;
    /// Another method, by spec, over the same resources with `sections` as its
    /// parameters (`auto`'s choice, with auto's dense guard).
    fn method_with(&self, spec: &str, sections: &MethodSections) -> Result<Box<dyn Retriever>>;
}

/// The method called `name` (`-` read as `_`), or None.
pub fn find(name: &str) -> Option<&'static MethodSpec> {
    let name = name.trim();
    METHODS.iter().copied().find(|m| m.name.len() == name.len() && m.name.bytes().eq(name.bytes().map(underscore)))
}

/// The method called `name`, or an error listing the known ones.
pub fn lookup(name: &str) -> Result<&'static MethodSpec> {
    find(name).ok_or_else(|| Error::Config(format!("unknown method {name:?}; known: {}", names().join(", "))))
}

/// Every method's name.
pub fn names() -> Vec<&'static str> {
    METHODS.iter().map(|m| m.name).collect()
}

fn underscore(b: u8) -> u8 {
    if b == b'-' {
        b'_'
    } else {
        b
    }
}

/// Splits a method spec `name[param=value,...]` into the method and its settings:
/// variants of one method side by side in one evaluation, e.g.
/// `regime_router[router=oracle]` next to `regime_router`. Values are JSON, or text.
pub fn parse_method_spec(spec: &str) -> Result<(&str, Vec<(&str, serde_json::Value)>)> {
    let Some((name, rest)) = spec.split_once('[') else {
        return Ok((spec.trim(), Vec::new()));
    };
    let inner = rest
        .strip_suffix(']')
        .ok_or_else(|| Error::Config(format!("method {spec:?}: expected name[param=value,...]")))?;
    let mut settings = Vec::new();
    for part in inner.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (key, value) = part
            .split_once('=')
            .ok_or_else(|| Error::Config(format!("method {spec:?}: {part:?} is not param=value")))?;
        let value =
            serde_json::from_str(value.trim()).unwrap_or_else(|_| serde_json::Value::String(value.trim().to_string()));
        settings.push((key.trim(), value));
    }
    Ok((name.trim(), settings))
}

impl std::fmt::Debug for MethodSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MethodSpec").field("name", &self.name).field("section", &self.section).finish_non_exhaustive()
    }
}

impl MethodSpec {
    /// Whether the method, with these parameters on an index with this kind of graph,
    /// asks the LLM anything.
    pub fn uses_llm(&self, sections: &MethodSections, graph: GraphKind) -> bool {
        match self.llm {
            LlmUse::Never => false,
            LlmUse::Always => true,
            LlmUse::ForMentions(link) => {
                let link = link(sections);
                link.links_mentions() && link.ner == NerMode::Llm
            }
            LlmUse::AsChosen(choice) => parse_method_spec(choice(sections, graph))
                .ok()
                .and_then(|(name, _)| find(name))
                .is_some_and(|chosen| !matches!(chosen.llm, LlmUse::AsChosen(_)) && chosen.uses_llm(sections, graph)),
        }
    }

    /// Whether the method can run on an index with this kind of graph.
    pub fn runs_on(&self, graph: GraphKind) -> bool {
        self.graph != GraphUse::Required || graph != GraphKind::None
    }

    /// Whether the method asks an LLM whatever its parameters (not only for query
    /// mentions, nor through the method it chooses).
    pub fn always_uses_llm(&self) -> bool {
        matches!(self.llm, LlmUse::Always)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_sections_are_unique_and_lookup_takes_either_separator() {
        let names = names();
        let mut sorted = names.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), names.len(), "{names:?}");
        for m in METHODS {
            assert!(std::ptr::eq(lookup(m.name).unwrap(), *m));
            assert!(std::ptr::eq(lookup(&m.name.replace('_', "-")).unwrap(), *m));
            assert!(!m.summary.is_empty() && !m.summary.contains("R@"), "{}: no measured figures", m.name);
        }
        assert!(lookup("nope").unwrap_err().to_string().contains(DEFAULT_METHOD));
    }

    #[test]
    fn every_section_is_a_section_of_the_parameters() {
        let sections = serde_json::to_value(MethodSections::default()).unwrap();
        for m in METHODS {
            assert!(m.section.is_none_or(|s| sections.get(s).is_some()), "{}: section {:?}", m.name, m.section);
        }
    }

    #[test]
    fn specs_split_into_name_and_settings() {
        let (name, settings) = parse_method_spec("m[alpha=0.5, router=oracle]").unwrap();
        assert_eq!(name, "m");
        assert_eq!(settings, vec![("alpha", serde_json::json!(0.5)), ("router", serde_json::json!("oracle"))]);
        assert!(parse_method_spec("x[alpha").is_err());
    }
}
