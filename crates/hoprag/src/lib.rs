//! hoprag: a multi-hop retrieval engine for retrieval-augmented generation.
//!
//! The crate is organised by seam, one folder per idea:
//! - [`corpus`]: passages and the loaders that turn files into them;
//! - [`filter`]: metadata filters on passages' `meta`, evaluated per passage or column-wise;
//! - [`dataset`]: questions with gold passages, from the standard benchmark formats;
//! - [`embed`]: the [`Embedder`](embed::Embedder) trait, the in-process MiniLM model and
//!   OpenAI-compatible endpoints;
//! - [`models`]: the local model cache (embedders and chat models) and `fetch`;
//! - [`llama`]: llama.cpp's process-wide backend and its model-file quantizer, below
//!   both `models` and the local chat runtime in `llm`;
//! - [`index`]: an opened index generation, with its [`LexicalIndex`](index::LexicalIndex)
//!   and [`VectorIndex`](index::VectorIndex) seams;
//! - [`store`]: where indexes are kept, the [`Store`](store::Store) seam: a folder, or
//!   PostgreSQL with pgvector (feature `postgres`);
//! - [`fusion`]: rank and score fusion pieces shared by the methods;
//! - [`graph`]: triples, the entity graph, query entity linking, Personalized PageRank;
//! - [`retrieve`]: the [`Retriever`](retrieve::Retriever) trait and one file per method;
//! - [`eval`]: the papers' metrics, significance tests and report formats;
//! - [`answer`]: short answers from retrieved passages with an LLM (the QA step).
//! - [`response`]: what a retrieval returns to a caller (the HTTP server, crate
//!   `hoprag-serve`, `hoprag query --json` and Python share it);
//! - [`rank`]: the one order of ranked scores (best first, NaN last);
//! - [`threads`]: the one thread-count setting of the embedder and the local LLM.

pub mod answer;
pub mod config;
pub mod corpus;
pub mod dataset;
pub mod embed;
pub mod engine;
pub mod error;
pub mod eval;
pub mod files;
pub mod filter;
pub mod fusion;
pub mod graph;
pub mod http;
pub mod index;
pub mod lazy;
pub mod llama;
pub mod llm;
pub mod models;
pub mod progress;
pub mod rank;
pub mod response;
pub mod retrieve;
mod simd;
pub mod store;
pub mod text;
pub mod threads;

pub use config::Config;
pub use corpus::{Passage, PassageIdx};
pub use engine::Engine;
pub use error::{Error, Result};
/// RegimeRouter's models, at the path the CLI and tests have always used.
pub use retrieve::regime_router::model as regime;
