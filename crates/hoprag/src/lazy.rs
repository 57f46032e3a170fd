//! Values computed on first use and shared after that: the one mechanism behind every
//! lazy cache in the crate (the opened graph, the walk's passage response, GEAR's triple
//! index, loaded local models).
//!
//! Why not a mutex held while computing, or `OnceLock::get_or_init`: the computations
//! wait on rayon (a parallel iteration, the encoder), and a rayon worker that waits runs
//! other queued jobs on its own stack meanwhile. If one of those jobs asks for the same
//! value, it waits for a computation that can only finish once it returns itself: a
//! deadlock (issue 32: `ppr` in `hoprag eval` hung this way).
//!
//! Here the first caller runs the computation on a thread of its own with a rayon pool
//! of its own, and waits for that thread plainly (a join, which runs nothing else).
//! Other callers, rayon workers or not, wait plainly for the value too. Nobody waiting
//! can be holding up the computation: its parallel work runs only on its own pool's
//! threads, which no other job can reach. So the value is computed once, and no wait
//! can close a cycle. (A computation may itself ask for other lazy values; they run on
//! pools of their own the same way.)

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};

/// A value computed once, on first use.
pub struct Lazy<T> {
    value: OnceLock<T>,
    /// Whether a computation is under way; guarded by the mutex only for the instant it
    /// is read or set, never while computing.
    running: Mutex<bool>,
    finished: Condvar,
}

impl<T> Default for Lazy<T> {
    fn default() -> Self {
        Lazy { value: OnceLock::new(), running: Mutex::new(false), finished: Condvar::new() }
    }
}

impl<T: Send + Sync> Lazy<T> {
    pub fn new() -> Self {
        Self::default()
    }

    /// One whose value is known already.
    pub fn with_value(value: T) -> Self {
        let lazy = Self::default();
        let _ = lazy.value.set(value);
        lazy
    }

    /// The value, if it has been computed.
    pub fn get(&self) -> Option<&T> {
        self.value.get()
    }

    /// The value, waiting for it while another caller computes it; `None` if nobody
    /// has computed it or is computing it (or the computation failed).
    pub fn get_or_wait(&self) -> Option<&T> {
        let mut running = self.lock();
        loop {
            if let Some(value) = self.value.get() {
                return Some(value);
            }
            if !*running {
                return None;
            }
            running = self.finished.wait(running).unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Takes the value out, leaving it to be computed again.
    pub fn take(&mut self) -> Option<T> {
        self.value.take()
    }

    /// The value, computing it with `compute` if nobody has (yet).
    pub fn get_or_compute(&self, compute: impl FnOnce() -> T + Send) -> &T {
        match self.get_or_try_compute(|| Ok::<T, std::convert::Infallible>(compute())) {
            Ok(value) => value,
            Err(never) => match never {},
        }
    }

    /// The value, computing it with `compute` if nobody has. An error is returned to
    /// this caller and not kept: the next caller computes again.
    pub fn get_or_try_compute<E: Send>(&self, compute: impl FnOnce() -> Result<T, E> + Send) -> Result<&T, E> {
        if let Some(value) = self.value.get() {
            return Ok(value);
        }
        {
            let mut running = self.lock();
            loop {
                if let Some(value) = self.value.get() {
                    return Ok(value);
                }
                if !*running {
                    break;
                }
                // Releases the lock while waiting: the computing thread takes it to say
                // it is done.
                running = self.finished.wait(running).unwrap_or_else(PoisonError::into_inner);
            }
            *running = true;
        }
        // Cleared on every way out (a value, an error, a panic), waking the waiters: on
        // an error or panic one of them computes in turn.
        struct Finished<'a, T>(&'a Lazy<T>);
        impl<T> Drop for Finished<'_, T> {
            fn drop(&mut self) {
                *self.0.lock() = false;
                self.0.finished.notify_all();
            }
        }
        let _finished = Finished(self);
        let value = isolated(compute)?;
        // Nobody else computes while `running` is set, so this is the first value.
        let _ = self.value.set(value);
        Ok(self.value.get().expect("just set"))
    }
}

impl<T> Lazy<T> {
    /// Whether a computation is under way now.
    pub fn is_running(&self) -> bool {
        *self.lock()
    }

    fn lock(&self) -> MutexGuard<'_, bool> {
        // The flag is a single bool written in statements that cannot panic.
        self.running.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Lazy values by key (a cache whose entries are each computed once).
pub struct LazyMap<K, V> {
    /// Held only to find or insert an entry, never while computing one.
    entries: Mutex<HashMap<K, Arc<Lazy<V>>>>,
}

impl<K, V> Default for LazyMap<K, V> {
    fn default() -> Self {
        LazyMap { entries: Mutex::new(HashMap::new()) }
    }
}

impl<K: Eq + Hash, V: Clone + Send + Sync> LazyMap<K, V> {
    pub fn new() -> Self {
        Self::default()
    }

    /// The value for `key`, computed with `compute` if nobody has.
    pub fn get_or_compute(&self, key: K, compute: impl FnOnce() -> V + Send) -> V {
        self.entry(key).get_or_compute(compute).clone()
    }

    /// The value for `key`, computed with `compute` if nobody has; errors are not kept.
    pub fn get_or_try_compute<E: Send>(&self, key: K, compute: impl FnOnce() -> Result<V, E> + Send) -> Result<V, E> {
        self.entry(key).get_or_try_compute(compute).cloned()
    }

    /// The value for `key` if it has been computed; never waits for a computation.
    pub fn get(&self, key: &K) -> Option<V> {
        let entry = self.entries.lock().unwrap_or_else(PoisonError::into_inner).get(key).cloned();
        entry.and_then(|lazy| lazy.get().cloned())
    }

    /// Forgets the value for `key` (computed again on next use); callers holding it keep
    /// it.
    pub fn remove(&self, key: &K) -> Option<V> {
        let removed = self.entries.lock().unwrap_or_else(PoisonError::into_inner).remove(key);
        removed.and_then(|lazy| lazy.get().cloned())
    }

    /// Forgets the entry of `key` if no value was computed for it (after a computation
    /// that failed), so that failed keys take no room.
    pub fn remove_if_unset(&self, key: &K) {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        if entries.get(key).is_some_and(|lazy| lazy.get().is_none() && !lazy.is_running()) {
            entries.remove(key);
        }
    }

    /// The values computed so far.
    pub fn values(&self) -> Vec<V> {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries.values().filter_map(|lazy| lazy.get().cloned()).collect()
    }

    fn entry(&self, key: K) -> Arc<Lazy<V>> {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries.entry(key).or_default().clone()
    }
}

/// Runs `compute` on a new thread whose rayon calls go to a new pool of
/// [`crate::threads::get`] threads, and waits for it without running anything else.
fn isolated<R: Send>(compute: impl FnOnce() -> R + Send) -> R {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(crate::threads::get())
        .thread_name(|i| format!("hoprag-lazy-{i}"))
        .build()
        .expect("the OS refused threads for a one-time computation");
    std::thread::scope(|scope| {
        let computing = std::thread::Builder::new()
            .name("hoprag-lazy".into())
            .spawn_scoped(scope, || pool.install(compute))
            .expect("the OS refused a thread for a one-time computation");
        computing.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rayon::prelude::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    /// The interleaving that hung `hoprag eval`: the computation waits on rayon while
    /// the pool's queues hold jobs that ask for the same value. Each job asks for it
    /// from a 2-thread pool, many more jobs than threads; the computation itself runs a
    /// parallel iteration. Every job gets the one value; it is computed once.
    #[test]
    fn jobs_queued_behind_the_computation_get_the_value_computed_once() {
        let lazy = Lazy::<usize>::new();
        let computed = AtomicUsize::new(0);
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        let got: Vec<usize> = pool.install(|| {
            (0..64)
                .into_par_iter()
                .map(|_| {
                    *lazy.get_or_compute(|| {
                        computed.fetch_add(1, Ordering::SeqCst);
                        (0..16)
                            .into_par_iter()
                            .map(|i| {
                                std::thread::sleep(Duration::from_millis(2));
                                i
                            })
                            .sum()
                    })
                })
                .collect()
        });
        assert_eq!(got, vec![120; 64]);
        assert_eq!(computed.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn an_error_is_not_kept_and_the_next_caller_computes() {
        let lazy = Lazy::<u32>::new();
        assert_eq!(lazy.get_or_try_compute(|| Err::<u32, &str>("not yet")), Err("not yet"));
        assert!(lazy.get().is_none());
        assert_eq!(lazy.get_or_try_compute(|| Ok::<u32, &str>(7)), Ok(&7));
        assert_eq!(lazy.get_or_try_compute(|| Ok::<u32, &str>(8)), Ok(&7));
    }

    #[test]
    fn a_panicking_computation_leaves_the_value_to_the_next_caller() {
        let lazy = Lazy::<u32>::new();
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            lazy.get_or_compute(|| panic!("boom"));
        }));
        assert!(panicked.is_err());
        assert_eq!(*lazy.get_or_compute(|| 3), 3);
    }

    #[test]
    fn a_computation_may_ask_for_another_lazy_value() {
        let (outer, inner) = (Lazy::<usize>::new(), Lazy::<usize>::new());
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        let got: Vec<usize> = pool.install(|| {
            (0..32)
                .into_par_iter()
                .map(|_| *outer.get_or_compute(|| (0..8).into_par_iter().map(|_| *inner.get_or_compute(|| 2)).sum()))
                .collect()
        });
        assert_eq!(got, vec![16; 32]);
    }

    #[test]
    fn map_entries_are_computed_once_per_key() {
        let map = LazyMap::<u32, Arc<String>>::new();
        let computed = AtomicUsize::new(0);
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        let got: Vec<Arc<String>> = pool.install(|| {
            (0..40u32)
                .into_par_iter()
                .map(|i| {
                    map.get_or_compute(i % 4, || {
                        computed.fetch_add(1, Ordering::SeqCst);
                        Arc::new(format!("value {}", i % 4))
                    })
                })
                .collect()
        });
        assert!(got.iter().enumerate().all(|(i, v)| **v == format!("value {}", i % 4)));
        assert_eq!(computed.load(Ordering::SeqCst), 4);
    }
}
