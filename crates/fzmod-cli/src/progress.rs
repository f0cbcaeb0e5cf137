//! The progress line of streamed runs on standard error: chunks done of the total and the
//! array's MB/s. Shown on a terminal (unless -q) or with --progress; never on standard output,
//! which may carry the data. On a terminal the line is redrawn in place; elsewhere (a log)
//! one line is printed every few seconds and at the end.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

pub struct Progress {
    verb: &'static str,
    total: u64,
    start: Instant,
    last: Option<Instant>,
    terminal: bool,
    enabled: bool,
}

impl Progress {
    pub fn new(verb: &'static str, total: u64, forced: bool, quiet: bool) -> Progress {
        let terminal = std::io::stderr().is_terminal();
        let enabled = forced || (terminal && !quiet);
        Progress { verb, total, start: Instant::now(), last: None, terminal, enabled }
    }

    /// `done` chunks of the total, `bytes` of the array through so far.
    pub fn update(&mut self, done: u64, bytes: u64) {
        let now = Instant::now();
        let every = if self.terminal { Duration::from_millis(200) } else { Duration::from_secs(5) };
        let due = self.last.is_none_or(|t| now - t >= every) || done == self.total;
        if !self.enabled || !due {
            return;
        }
        self.last = Some(now);
        let secs = (now - self.start).as_secs_f64();
        let line = format!(
            "fzmod: {} {done}/{} chunks, {:.1} MB in {secs:.1} s, {:.1} MB/s",
            self.verb,
            self.total,
            bytes as f64 / 1e6,
            bytes as f64 / 1e6 / secs.max(1e-9)
        );
        let mut err = std::io::stderr().lock();
        // A progress line that cannot be written is not worth failing the run for.
        let _ = if self.terminal { write!(err, "\r{line}\x1b[K") } else { writeln!(err, "{line}") };
    }

    /// Clear the line on a terminal (a log keeps its last line).
    pub fn finish(&self) {
        if self.enabled && self.terminal && self.last.is_some() {
            let _ = write!(std::io::stderr().lock(), "\r\x1b[K");
        }
    }
}
