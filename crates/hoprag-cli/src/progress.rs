//! Progress bars on stderr (indicatif), hidden with --quiet, --json or off a terminal.

use std::sync::Mutex;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

pub struct Bars {
    bar: Mutex<Option<ProgressBar>>,
    visible: bool,
}

impl Bars {
    pub fn new(visible: bool) -> Self {
        Bars { bar: Mutex::new(None), visible }
    }
}

impl hoprag::progress::Progress for Bars {
    fn start(&self, step: &str, total: u64) {
        let bar = if total > 0 { ProgressBar::new(total) } else { ProgressBar::new_spinner() };
        if !self.visible {
            bar.set_draw_target(ProgressDrawTarget::hidden());
        }
        let template = if total > 0 {
            "{msg:>22} [{bar:30}] {pos}/{len} ({per_sec}, eta {eta})"
        } else {
            "{msg:>22} {spinner} {elapsed}"
        };
        bar.set_style(ProgressStyle::with_template(template).expect("valid template").progress_chars("=> "));
        bar.set_message(step.to_string());
        bar.enable_steady_tick(Duration::from_millis(200));
        if let Some(old) = self.bar.lock().expect("progress lock").replace(bar) {
            old.finish_and_clear();
        }
    }

    fn advance(&self, n: u64) {
        if let Some(b) = self.bar.lock().expect("progress lock").as_ref() {
            b.inc(n);
        }
    }

    fn finish(&self) {
        if let Some(b) = self.bar.lock().expect("progress lock").take() {
            b.finish_and_clear();
        }
    }
}
