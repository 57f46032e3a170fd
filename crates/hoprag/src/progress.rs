//! Progress reporting for long steps, decoupled from any terminal library: the CLI
//! draws bars, a server or a test passes [`Silent`].

pub trait Progress: Sync {
    /// A new step with `total` units of work (0 if unknown).
    fn start(&self, step: &str, total: u64);
    fn advance(&self, n: u64);
    fn finish(&self);
}

/// Reports nothing.
pub struct Silent;

impl Progress for Silent {
    fn start(&self, _: &str, _: u64) {}
    fn advance(&self, _: u64) {}
    fn finish(&self) {}
}

/// Logs (debug) the wall time from its creation to its drop.
pub(crate) struct LogTime(&'static str, std::time::Instant);

impl LogTime {
    pub(crate) fn start(what: &'static str) -> Self {
        LogTime(what, std::time::Instant::now())
    }
}

impl Drop for LogTime {
    fn drop(&mut self) {
        log::debug!("{}: {:.1} ms", self.0, self.1.elapsed().as_secs_f64() * 1e3);
    }
}
