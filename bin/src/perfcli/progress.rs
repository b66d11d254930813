//! A progress bar on stderr for runs longer than 2 s: shown only once a row has run that long
//! (short rows print nothing extra), never with `--json` or when stderr is not a terminal
//! (logs and pipes stay clean), and cleared before the row's line is printed.

use bth_perf::drive::ConnApp;
use bth_perf::{PerfApp, Role};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::time::{Duration, Instant};
use tcp_bth::Connection;

/// Rows shorter than this get no bar.
const SHOW_AFTER: Duration = Duration::from_secs(2);
/// Redraw at most this often (the app runs every driver turn).
const EVERY: Duration = Duration::from_millis(100);

/// Messages done so far, and how many the row has if known.
pub trait Progress {
    fn progress(&self) -> (u64, Option<u64>);
}

impl<R: Role> Progress for PerfApp<R> {
    fn progress(&self) -> (u64, Option<u64>) {
        PerfApp::progress(self)
    }
}

/// Whether bars may be drawn at all: not with `--json`, and only to a terminal.
pub fn wanted(json: bool) -> bool {
    !json && std::io::stderr().is_terminal()
}

pub struct Bar {
    enabled: bool,
    label: String,
    /// `--duration`: the bar shows the time, the message count beside it.
    duration: Option<Duration>,
    born: Instant,
    last: Option<Instant>,
    bar: Option<ProgressBar>,
}

impl Bar {
    pub fn new(enabled: bool, label: String, duration: Option<Duration>) -> Bar {
        Bar {
            enabled,
            label,
            duration,
            born: Instant::now(),
            last: None,
            bar: None,
        }
    }

    pub fn update(&mut self, done: u64, total: Option<u64>) {
        let now = Instant::now();
        if !self.enabled
            || now - self.born < SHOW_AFTER
            || self.last.is_some_and(|t| now - t < EVERY)
        {
            return;
        }
        self.last = Some(now);
        let (label, duration, born) = (&self.label, self.duration, self.born);
        let bar = self.bar.get_or_insert_with(|| {
            let template = match (duration, total) {
                (Some(_), _) => "{prefix} [{elapsed_precise}] {wide_bar} {msg}",
                (None, Some(_)) => "{prefix} [{elapsed_precise}] {wide_bar} {pos}/{len} messages",
                (None, None) => "{prefix} {spinner} [{elapsed_precise}] {pos} messages",
            };
            let len = duration.map(|d| d.as_millis() as u64).or(total);
            let b = ProgressBar::with_draw_target(len, ProgressDrawTarget::stderr())
                .with_elapsed(now - born);
            if let Ok(style) = ProgressStyle::with_template(template) {
                b.set_style(style);
            }
            b.set_prefix(label.clone());
            b
        });
        match duration {
            Some(d) => {
                let ms = (now - born).min(d).as_millis() as u64;
                bar.set_position(ms);
                bar.set_message(format!("{done} messages"));
            }
            None => {
                if let Some(t) = total {
                    bar.set_length(t);
                }
                bar.set_position(done);
            }
        }
    }

    pub fn finish(&mut self) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
    }
}

/// An app with its bar.
pub struct WithBar<'a, A> {
    pub app: &'a mut A,
    pub bar: Bar,
}

impl<A: ConnApp + Progress> ConnApp for WithBar<'_, A> {
    fn step(&mut self, c: &mut Connection, now: Duration) -> bool {
        let over = self.app.step(c, now);
        let (done, total) = self.app.progress();
        self.bar.update(done, total);
        if over {
            self.bar.finish();
        }
        over
    }
}

impl<A> Drop for WithBar<'_, A> {
    fn drop(&mut self) {
        self.bar.finish();
    }
}
