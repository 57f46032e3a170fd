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

/// Wall time of a computation's phases, for the debug log.
pub(crate) struct Phases {
    last: std::time::Instant,
    done: Vec<(&'static str, f64)>,
}

impl Phases {
    pub(crate) fn new() -> Self {
        Phases { last: std::time::Instant::now(), done: Vec::new() }
    }

    pub(crate) fn mark(&mut self, name: &'static str) {
        let now = std::time::Instant::now();
        self.done.push((name, (now - self.last).as_secs_f64() * 1e3));
        self.last = now;
    }
}

impl std::fmt::Display for Phases {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, (name, ms)) in self.done.iter().enumerate() {
            write!(f, "{}{name} {ms:.1} ms", if i > 0 { ", " } else { "" })?;
        }
        Ok(())
    }
}
