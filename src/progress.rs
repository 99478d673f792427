//! A progress bar on stderr while reading files, drawn only on a terminal.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::time::Instant;

pub struct Progress {
    bar: Option<ProgressBar>,
    started: Instant,
}

impl Progress {
    /// `total_bytes`: sum of the input files' sizes, when known.
    pub fn new(enabled: bool, total_bytes: Option<u64>) -> Self {
        let target = ProgressDrawTarget::stderr();
        if !enabled || target.is_hidden() {
            return Progress { bar: None, started: Instant::now() };
        }
        let bar = match total_bytes {
            Some(n) => ProgressBar::with_draw_target(Some(n), target),
            None => ProgressBar::with_draw_target(None, target),
        };
        let template = if total_bytes.is_some() {
            "{wide_bar} {bytes}/{total_bytes} {binary_bytes_per_sec} {msg} eta {eta}"
        } else {
            "{spinner} {bytes} {binary_bytes_per_sec} {msg}"
        };
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style);
        }
        Progress { bar: Some(bar), started: Instant::now() }
    }

    /// `bytes`: input consumed so far over all files; `packets`: packets read so far.
    pub fn update(&self, bytes: u64, packets: u64) {
        if let Some(bar) = &self.bar {
            bar.set_position(bytes);
            let secs = self.started.elapsed().as_secs_f64().max(1e-3);
            bar.set_message(format!("{} pkts, {:.2} Mpkt/s", packets, packets as f64 / secs / 1e6));
        }
    }

    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
