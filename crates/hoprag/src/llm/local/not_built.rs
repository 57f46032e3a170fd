//! The local runtime of a build without the `local-llm` feature: the same type, which
//! can never be loaded, so that every caller compiles unchanged and gets
//! [`crate::llama::not_built`]'s error instead of a model.

use std::sync::Arc;

use super::{Generation, LocalModel};
use crate::error::Result;
use crate::llm::{ChatRequest, ChatResponse, Llm};

/// No value of this type exists in such a build.
pub enum LocalLlm {}

impl LocalLlm {
    pub fn load(model: &LocalModel) -> Result<Arc<LocalLlm>> {
        Err(crate::llama::not_built(&format!("the local chat model {}", model.label)))
    }

    pub fn threads(&self) -> usize {
        match *self {}
    }

    pub fn prompt(&self, _request: &ChatRequest) -> Result<Vec<u32>> {
        match *self {}
    }

    pub fn generate_exactly(&self, _request: &ChatRequest) -> Result<Generation> {
        match *self {}
    }
}

impl Llm for LocalLlm {
    fn id(&self) -> &str {
        match *self {}
    }

    fn chat(&self, _request: &ChatRequest) -> Result<ChatResponse> {
        match *self {}
    }
}
