//! How many threads hoprag's own compute runs on: the embedder's encoder and the local
//! LLM read this one setting (`--threads` / `HOPRAG_THREADS`), by default every core the
//! process may use. Retrieval's data parallelism (rayon) is left to rayon's own default.

use std::sync::atomic::{AtomicUsize, Ordering};

/// 0 = not set: fall back to `HOPRAG_THREADS`, then to the cores available.
static THREADS: AtomicUsize = AtomicUsize::new(0);

/// Sets the thread count for the rest of the process (the CLI's `--threads`).
pub fn set(n: usize) {
    THREADS.store(n.max(1), Ordering::Relaxed);
}

/// The thread count: [`set`], else `HOPRAG_THREADS`, else the cores available.
pub fn get() -> usize {
    match THREADS.load(Ordering::Relaxed) {
        0 => from_env().unwrap_or_else(available),
        n => n,
    }
}

fn from_env() -> Option<usize> {
    std::env::var("HOPRAG_THREADS").ok()?.trim().parse::<usize>().ok().filter(|&n| n > 0)
}

fn available() -> usize {
    std::thread::available_parallelism().map(usize::from).unwrap_or(1)
}
