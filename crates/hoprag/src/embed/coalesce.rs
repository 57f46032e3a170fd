//! Concurrent callers' texts embedded in one call.
//!
//! A query's forward pass is bound by streaming the model's weights from memory (42 MB
//! for MiniLM), not by arithmetic: two queries in one pass cost little more than one.
//! Under concurrent load (the server) the first caller becomes the *leader*: it embeds
//! everything queued, its own texts included, hands each caller its vectors, and repeats
//! until the queue is empty; callers that arrive meanwhile wait for their share. A lone
//! caller is its own leader at the cost of one uncontended lock.
//!
//! Callers on a rayon worker thread (eval's parallel questions, graph building) bypass
//! the queue: a worker that waits inside rayon runs other queued work, which may call
//! the embedder again on the same thread while it leads, and blocking there would
//! deadlock. Their batches are large already.

use std::sync::mpsc;
use std::sync::{Mutex, MutexGuard};

use super::{Embedder, TextKind};
use crate::error::{Error, Result};

pub struct Coalescing<E> {
    inner: E,
    queue: Mutex<Queue>,
}

#[derive(Default)]
struct Queue {
    jobs: Vec<Job>,
    leader: bool,
}

struct Job {
    texts: Vec<String>,
    kind: TextKind,
    reply: mpsc::Sender<Result<Vec<Vec<f32>>>>,
}

impl<E: Embedder> Coalescing<E> {
    pub fn new(inner: E) -> Self {
        Coalescing { inner, queue: Mutex::new(Queue::default()) }
    }

    fn lock(&self) -> MutexGuard<'_, Queue> {
        // A panic while holding the lock leaves the queue itself consistent.
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs queued jobs, one embedder call per kind, until none are left.
    fn lead(&self) {
        // If the embedder panics, the jobs still queued are dropped (their callers get an
        // error instead of waiting for ever) and the next caller leads.
        struct OnPanic<'a, E: Embedder>(&'a Coalescing<E>);
        impl<E: Embedder> Drop for OnPanic<'_, E> {
            fn drop(&mut self) {
                if std::thread::panicking() {
                    let mut queue = self.0.lock();
                    queue.jobs.clear();
                    queue.leader = false;
                }
            }
        }
        let _guard = OnPanic(self);
        loop {
            let jobs = {
                let mut queue = self.lock();
                if queue.jobs.is_empty() {
                    // Under the lock: a caller that queues after this leads itself.
                    queue.leader = false;
                    return;
                }
                std::mem::take(&mut queue.jobs)
            };
            for kind in [TextKind::Query, TextKind::Passage] {
                let group: Vec<&Job> = jobs.iter().filter(|j| j.kind == kind).collect();
                if !group.is_empty() {
                    self.run(&group, kind);
                }
            }
        }
    }

    fn run(&self, group: &[&Job], kind: TextKind) {
        let texts: Vec<String> = group.iter().flat_map(|j| j.texts.iter().cloned()).collect();
        let vectors = match self.inner.embed(&texts, kind) {
            Ok(v) if v.len() == texts.len() => v,
            Ok(v) => return fail(group, format!("embedder returned {} vectors for {} texts", v.len(), texts.len())),
            Err(e) => return fail(group, e.to_string()),
        };
        let mut vectors = vectors.into_iter();
        for job in group {
            // A caller that gave up has dropped its receiver; nothing to do then.
            let _ = job.reply.send(Ok(vectors.by_ref().take(job.texts.len()).collect()));
        }
    }
}

/// Answers every job of a failed call with the same error.
fn fail(group: &[&Job], message: String) {
    for job in group {
        let _ = job.reply.send(Err(Error::Embedding(message.clone())));
    }
}

impl<E: Embedder> Embedder for Coalescing<E> {
    fn id(&self) -> &str {
        self.inner.id()
    }

    fn dim(&self) -> usize {
        self.inner.dim()
    }

    fn token_counts(&self, texts: &[String]) -> Option<Vec<usize>> {
        self.inner.token_counts(texts)
    }

    /// Not coalesced: a build's batches, large already.
    fn embed_spans(
        &self,
        texts: &[String],
        spans: &[Vec<std::ops::Range<usize>>],
    ) -> Option<Result<Vec<super::ReadText>>> {
        self.inner.embed_spans(texts, spans)
    }

    fn embed(&self, texts: &[String], kind: TextKind) -> Result<Vec<Vec<f32>>> {
        if rayon::current_thread_index().is_some() {
            return self.inner.embed(texts, kind);
        }
        let (reply, answer) = mpsc::channel();
        let lead = {
            let mut queue = self.lock();
            queue.jobs.push(Job { texts: texts.to_vec(), kind, reply });
            !std::mem::replace(&mut queue.leader, true)
        };
        if lead {
            self.lead();
        }
        // Answered by the leader that took the job; dropped unanswered only if it panicked.
        answer.recv().unwrap_or_else(|_| Err(Error::Embedding("the embedding call serving this request failed".into())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Barrier};

    /// Vectors that name their text; counts calls; sleeps so that callers overlap.
    struct Echo {
        calls: AtomicUsize,
    }

    impl Embedder for Echo {
        fn id(&self) -> &str {
            "echo"
        }
        fn dim(&self) -> usize {
            2
        }
        fn embed(&self, texts: &[String], kind: TextKind) -> Result<Vec<Vec<f32>>> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(std::time::Duration::from_millis(20));
            if texts.iter().any(|t| t == "fail") {
                return Err(Error::Embedding("refused".into()));
            }
            let k = if kind == TextKind::Query { 1.0 } else { 2.0 };
            Ok(texts.iter().map(|t| vec![t.parse::<f32>().unwrap(), k]).collect())
        }
    }

    #[test]
    fn concurrent_callers_share_calls_and_each_gets_its_own_vectors() {
        let embedder = Arc::new(Coalescing::new(Echo { calls: AtomicUsize::new(0) }));
        let start = Arc::new(Barrier::new(8));
        let handles: Vec<_> = (0..8)
            .map(|i| {
                let (embedder, start) = (embedder.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    let kind = if i % 2 == 0 { TextKind::Query } else { TextKind::Passage };
                    let texts = vec![format!("{i}"), format!("{}", i + 100)];
                    (i, kind, embedder.embed(&texts, kind).unwrap())
                })
            })
            .collect();
        for h in handles {
            let (i, kind, vectors) = h.join().unwrap();
            let k = if kind == TextKind::Query { 1.0 } else { 2.0 };
            assert_eq!(vectors, vec![vec![i as f32, k], vec![(i + 100) as f32, k]]);
        }
        let calls = embedder.inner.calls.load(Ordering::SeqCst);
        assert!(calls < 8, "8 overlapping callers made {calls} calls");
        // Alone, a caller still gets its answer (it leads itself).
        assert_eq!(embedder.embed(&["7".into()], TextKind::Query).unwrap(), vec![vec![7.0, 1.0]]);
    }

    #[test]
    fn rayon_workers_embed_directly_and_never_wait_on_each_other() {
        use rayon::prelude::*;
        let embedder = Coalescing::new(Echo { calls: AtomicUsize::new(0) });
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        let got: Vec<Vec<Vec<f32>>> = pool.install(|| {
            (0..16).into_par_iter().map(|i| embedder.embed(&[format!("{i}")], TextKind::Query).unwrap()).collect()
        });
        assert_eq!(got, (0..16).map(|i| vec![vec![i as f32, 1.0]]).collect::<Vec<_>>());
        assert_eq!(embedder.inner.calls.load(Ordering::SeqCst), 16);
    }

    #[test]
    fn a_failed_call_is_an_error_and_leaves_no_leader_behind() {
        let embedder = Coalescing::new(Echo { calls: AtomicUsize::new(0) });
        let err = embedder.embed(&["fail".into()], TextKind::Query).unwrap_err();
        assert!(err.to_string().contains("refused"), "{err}");
        assert_eq!(embedder.embed(&["3".into()], TextKind::Query).unwrap(), vec![vec![3.0, 1.0]]);
    }
}
