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

/// Runs `f` with its parallel work on a pool of low-priority threads (nice 19 where the
/// platform has it), as many as rayon's global pool has: work no request waits for (the
/// walk an edit left unsolved) then takes only the cores that serving leaves idle, and
/// splits its work as it would on the global pool (same parts, so the same sums to the
/// bit). Where no such pool can be made, `f` runs as it would have.
pub fn in_background<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    static POOL: std::sync::LazyLock<Option<rayon::ThreadPool>> = std::sync::LazyLock::new(|| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(rayon::current_num_threads())
            .thread_name(|i| format!("hoprag-background-{i}"))
            .start_handler(|_| lower_priority())
            .build()
            .map_err(|e| log::warn!("no background thread pool: {e}"))
            .ok()
    });
    match &*POOL {
        Some(pool) => pool.install(f),
        None => f(),
    }
}

fn lower_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: setpriority changes the calling thread's nice value (a Linux thread has its
    // own); it reads and writes no memory of ours.
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, 0, 19);
    }
}
