//! A real model asked for BridgeRAG's judge alone, for placing it on the simulated
//! judge's curve: every other request (the SVO queries, the entities) fails, counted, so
//! those stages take the LLM-free fallback they take under [`super::SimulatedJudge`], and
//! the model judges the very pools the curve was measured on. Its agreement with the
//! gold ([`super::JudgeAgreement`]) is then an accuracy comparable with the curve's P.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::llm::{ChatRequest, ChatResponse, Llm};
use crate::retrieve::bridge_rag::prompts::parse_judge_request;

pub struct JudgeOnly {
    model: Arc<dyn Llm>,
    id: String,
    refused: AtomicU64,
}

impl JudgeOnly {
    pub fn new(model: Arc<dyn Llm>) -> Self {
        let id = format!("judge-only({})", model.id());
        JudgeOnly { model, id, refused: AtomicU64::new(0) }
    }

    /// Requests that were no judge call (answered by the stages' fallback).
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// What a report made with it says in its header.
    pub fn header(&self) -> String {
        format!(
            "JUDGE ONLY: {} answers BridgeRAG's judge; its SVO and entity stages take their LLM-free fallback (the \
             simulated judge's pools)",
            self.model.id()
        )
    }
}

impl Llm for JudgeOnly {
    fn id(&self) -> &str {
        // The model's own: its answers are the model's, cached under its key.
        self.model.id()
    }

    fn chat(&self, request: &ChatRequest) -> Result<ChatResponse> {
        if parse_judge_request(request).is_none() {
            self.refused.fetch_add(1, Ordering::Relaxed);
            return Err(Error::Other(format!("{}: only BridgeRAG's judge is asked", self.id)));
        }
        self.model.chat(request)
    }

    fn reject(&self, request: &ChatRequest) {
        self.model.reject(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::Usage;
    use crate::retrieve::bridge_rag::prompts::{judge_request, JudgeContext, PromptPassage};

    struct Echo;
    impl Llm for Echo {
        fn id(&self) -> &str {
            "echo"
        }
        fn chat(&self, _: &ChatRequest) -> Result<ChatResponse> {
            let usage = Usage::default();
            Ok(ChatResponse { text: "[]".into(), usage, cached: false, retries: 0, latency_ms: 0.0 })
        }
    }

    #[test]
    fn only_the_judge_reaches_the_model() {
        let j = JudgeOnly::new(Arc::new(Echo));
        let candidates = [PromptPassage { title: "T".into(), text: "text".into() }];
        assert_eq!(j.chat(&judge_request("Q?", JudgeContext::QuestionOnly, &candidates, 10, 100)).unwrap().text, "[]");
        let other = ChatRequest::new(vec![crate::llm::Message::user("Write SVO queries for: Q?")]);
        let err = j.chat(&other).unwrap_err().to_string();
        assert!(err.contains("only BridgeRAG's judge"), "{err}");
        assert_eq!(j.refused(), 1);
    }
}
