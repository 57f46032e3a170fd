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
