//! A blocking counting semaphore, so the library can bound in-flight requests without an
//! async runtime.

use std::sync::{Condvar, Mutex, PoisonError};

pub(crate) struct Semaphore {
    free: Mutex<usize>,
    released: Condvar,
}

/// A slot held until dropped.
pub(crate) struct Permit<'a> {
    semaphore: &'a Semaphore,
}

impl Semaphore {
    /// `permits` must be at least 1, or every `acquire` would wait forever.
    pub(crate) fn new(permits: usize) -> Self {
        assert!(permits > 0, "a semaphore needs at least one permit");
        Semaphore { free: Mutex::new(permits), released: Condvar::new() }
    }

    /// Waits until a slot is free and takes it.
    pub(crate) fn acquire(&self) -> Permit<'_> {
        // The count is changed in single statements that cannot panic, so a poisoned
        // lock (a panic elsewhere in a holder's thread) still guards a valid count.
        let free = self.free.lock().unwrap_or_else(PoisonError::into_inner);
        let mut free = self.released.wait_while(free, |n| *n == 0).unwrap_or_else(PoisonError::into_inner);
        *free -= 1;
        Permit { semaphore: self }
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        *self.semaphore.free.lock().unwrap_or_else(PoisonError::into_inner) += 1;
        self.semaphore.released.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    #[test]
    fn never_more_holders_than_permits() {
        let semaphore = Semaphore::new(2);
        let (inside, most) = (AtomicUsize::new(0), AtomicUsize::new(0));
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    let _permit = semaphore.acquire();
                    let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(20));
                    inside.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        let most = most.load(Ordering::SeqCst);
        assert!((1..=2).contains(&most), "{most} holders at once");
        assert_eq!(*semaphore.free.lock().unwrap(), 2, "every permit returned");
    }
}
