//! Degrade, don't crash: a method whose LLM stages fail for a query (timeout, 5xx,
//! garbage it cannot use) answers that query with its LLM-free base ranking instead,
//! and says so in the trace. One bad answer never aborts an evaluation or a server
//! request.

use serde_json::json;

use super::{Query, Retrieval, Retriever, TraceStep};
use crate::error::Result;

/// The trace step that marks a query answered by the fallback ranking.
pub const FALLBACK_STEP: &str = "fallback";

/// `primary`, answering with `fallback` for a query on which it fails.
pub struct WithFallback {
    primary: Box<dyn Retriever>,
    fallback: Box<dyn Retriever>,
}

impl WithFallback {
    pub fn new(primary: Box<dyn Retriever>, fallback: Box<dyn Retriever>) -> Self {
        WithFallback { primary, fallback }
    }
}

impl Retriever for WithFallback {
    fn name(&self) -> &str {
        self.primary.name()
    }

    fn concurrency(&self) -> Option<usize> {
        self.primary.concurrency()
    }

    fn retrieve(&self, query: &Query, k: usize) -> Result<Retrieval> {
        match self.primary.retrieve(query, k) {
            Ok(r) => Ok(r),
            Err(e) => {
                log::warn!("{}: {e}; answering with {} for this query", self.primary.name(), self.fallback.name());
                let mut r = self.fallback.retrieve(query, k)?;
                r.trace.steps.insert(0, fallback_step(self.fallback.name(), &e.to_string()));
                Ok(r)
            }
        }
    }
}

/// The step that records a fallback to `to` and why.
pub fn fallback_step(to: &str, reason: &str) -> TraceStep {
    TraceStep { name: FALLBACK_STEP.into(), micros: 0, detail: json!({"to": to, "reason": reason}), llm: None }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use crate::retrieve::{Hit, Trace};

    struct Fixed(&'static str, Option<f32>);

    impl Retriever for Fixed {
        fn name(&self) -> &str {
            self.0
        }
        fn retrieve(&self, _: &Query, _: usize) -> Result<Retrieval> {
            match self.1 {
                Some(score) => Ok(Retrieval { hits: vec![Hit { passage: 1, score }], trace: Trace::default() }),
                None => Err(Error::Other("the LLM answered garbage".into())),
            }
        }
    }

    #[test]
    fn a_failing_method_answers_with_its_base_and_says_so() {
        let ok = WithFallback::new(Box::new(Fixed("m", Some(2.0))), Box::new(Fixed("base", Some(1.0))));
        let r = ok.retrieve(&Query::new("q"), 5).unwrap();
        assert_eq!(r.hits[0].score, 2.0);
        assert!(!r.trace.fell_back());
        let failing = WithFallback::new(Box::new(Fixed("m", None)), Box::new(Fixed("base", Some(1.0))));
        assert_eq!(failing.name(), "m");
        let r = failing.retrieve(&Query::new("q"), 5).unwrap();
        assert_eq!(r.hits[0].score, 1.0);
        assert!(r.trace.fell_back());
        assert!(r.trace.steps[0].detail["reason"].as_str().unwrap().contains("garbage"));
        let both = WithFallback::new(Box::new(Fixed("m", None)), Box::new(Fixed("base", None)));
        assert!(both.retrieve(&Query::new("q"), 5).is_err(), "a failing base is a real error");
    }
}
