//! Progress of training and evaluation epochs. The training loop reports through
//! [`ProgressReporter`] (it knows nothing about terminals or notebooks); the default reporter,
//! [`ConsoleProgress`], reads well everywhere: an `indicatif` bar in a terminal, and compact
//! lines on stdout in Jupyter (evcxr shows no terminal bars), in logs and when stderr is
//! redirected (torchrun, CI). Implement the trait to send progress elsewhere (a dashboard, a
//! Ray report, a test's collector).
use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use crate::display::in_notebook;

const BAR_TEMPLATE: &str =
    "{prefix:>6} [{bar:30}] {pos:>4}/{len:4} {elapsed_precise}<{eta_precise}  {msg}";

/// Where the training loop reports the progress of each epoch (on the main rank only).
pub trait ProgressReporter {
    /// An epoch labelled `label` ("train", "eval") of `total_batches` batches (0 if unknown)
    /// begins; the returned value receives its batches.
    fn begin(&self, label: &str, total_batches: usize) -> Box<dyn EpochProgress>;
}

/// The progress of one epoch, as a [`ProgressReporter`] began it.
pub trait EpochProgress {
    /// One more batch of `batch_samples` samples is done. `mean_loss` reads the epoch's mean
    /// loss so far from the device (a wait for the queued work): call it only when the loss
    /// is shown, not for every batch.
    fn advance(&mut self, batch_samples: usize, mean_loss: &mut dyn FnMut() -> f64);
    /// The epoch is over; `summary` is its one-line result ("loss 0.2310  acc 93.10% ...").
    fn finish(&mut self, summary: &str);
    /// The epoch resumes after `batches_done` batches (restored from a checkpoint): count
    /// from there. The default ignores it.
    fn resume_at(&mut self, batches_done: usize) {
        let _ = batches_done;
    }
}

/// The default [`ProgressReporter`]: a [`Progress`] per epoch (a bar in a terminal, lines in
/// notebooks and logs).
#[derive(Clone, Copy, Debug, Default)]
pub struct ConsoleProgress;

impl ProgressReporter for ConsoleProgress {
    fn begin(&self, label: &str, total_batches: usize) -> Box<dyn EpochProgress> {
        Box::new(Progress::new(label, total_batches, true))
    }
}

/// A reporter that shows nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoProgress;

impl ProgressReporter for NoProgress {
    fn begin(&self, _label: &str, _total_batches: usize) -> Box<dyn EpochProgress> {
        Box::new(NoProgress)
    }
}

impl EpochProgress for NoProgress {
    fn advance(&mut self, _batch_samples: usize, _mean_loss: &mut dyn FnMut() -> f64) {}
    fn finish(&mut self, _summary: &str) {}
}

impl EpochProgress for Progress {
    fn advance(&mut self, batch_samples: usize, mean_loss: &mut dyn FnMut() -> f64) {
        Progress::advance(self, batch_samples, mean_loss)
    }
    fn finish(&mut self, summary: &str) {
        Progress::finish(self, summary)
    }
    fn resume_at(&mut self, batches_done: usize) {
        Progress::resume_at(self, batches_done)
    }
}

/// Batch-by-batch progress of one epoch; see [`Progress::new`].
pub struct Progress {
    label: String,
    total: usize,
    mode: Mode,
    batches: usize,
    samples: u64,
    loss_sum: f64,
    /// The mean loss last shown (refreshed only when a line or the bar is redrawn).
    shown_loss: f64,
    last_refresh: Option<Instant>,
    start: Instant,
    finished: bool,
}

/// How often a terminal bar asks for a fresh loss (each ask waits for the device).
const BAR_REFRESH: Duration = Duration::from_millis(250);

enum Mode {
    /// Prints nothing (ranks other than the main one).
    Off,
    /// Terminal progress bar (on stderr).
    Bar(ProgressBar),
    /// One line every `every` batches, and at the end, on `out`.
    Plain { out: Box<dyn Write + Send>, every: usize, last_printed: usize },
}

impl Progress {
    /// Progress of `total_batches` batches (0 if unknown) labelled `label` ("train", "val").
    /// `enabled = false` prints nothing at all: pass `is_main_rank` in distributed jobs.
    ///
    /// In a notebook, or when stderr is not a terminal, it prints a plain line to stdout about
    /// every tenth of the epoch; in a terminal it draws a progress bar on stderr.
    pub fn new(label: &str, total_batches: usize, enabled: bool) -> Progress {
        if !enabled {
            return Progress::with_mode(label, total_batches, Mode::Off);
        }
        if in_notebook() || !std::io::stderr().is_terminal() {
            return Progress::plain(label, total_batches, true, Box::new(std::io::stdout()));
        }
        let bar = ProgressBar::new(total_batches as u64);
        if let Ok(style) = ProgressStyle::with_template(BAR_TEMPLATE) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_prefix(label.to_string());
        Progress::with_mode(label, total_batches, Mode::Bar(bar))
    }

    /// Plain-line progress written to `out`, whatever the environment (logs, tests).
    pub fn plain(
        label: &str,
        total_batches: usize,
        enabled: bool,
        out: Box<dyn Write + Send>,
    ) -> Progress {
        if !enabled {
            return Progress::with_mode(label, total_batches, Mode::Off);
        }
        // A tenth of the epoch, or every 10 batches when the length is unknown.
        let every = if total_batches == 0 { 10 } else { (total_batches / 10).max(1) };
        Progress::with_mode(label, total_batches, Mode::Plain { out, every, last_printed: 0 })
    }

    fn with_mode(label: &str, total: usize, mode: Mode) -> Progress {
        Progress {
            label: label.to_string(),
            total,
            mode,
            batches: 0,
            samples: 0,
            loss_sum: 0.0,
            shown_loss: f64::NAN,
            last_refresh: None,
            start: Instant::now(),
            finished: false,
        }
    }

    /// Starts counting after `batches_done` batches of the epoch, which an earlier run trained
    /// (a resumed epoch): the position shown counts them, the rate (img/s) does not.
    pub fn resume_at(&mut self, batches_done: usize) {
        self.batches = batches_done;
    }

    /// Records one batch of `batch_samples` samples whose mean loss was `batch_loss`.
    pub fn update(&mut self, batch_samples: usize, batch_loss: f64) {
        self.loss_sum += batch_loss * batch_samples as f64;
        let mean = self.loss_sum / (self.samples + batch_samples as u64) as f64;
        self.advance(batch_samples, || mean);
    }

    /// Records one batch of `batch_samples` samples; `mean_loss` (the per-sample mean loss of
    /// the epoch so far) is called only when the display is refreshed: about every tenth of
    /// the epoch in plain mode, at most every 250 ms for a bar, never when disabled. Training
    /// loops pass a closure that reads the device, so a step does not wait for it otherwise.
    pub fn advance(&mut self, batch_samples: usize, mean_loss: impl FnOnce() -> f64) {
        self.batches += 1;
        self.samples += batch_samples as u64;
        let last = self.batches == self.total;
        let refresh = match &self.mode {
            Mode::Off => false,
            Mode::Bar(_) => last || self.last_refresh.is_none_or(|t| t.elapsed() >= BAR_REFRESH),
            Mode::Plain { every, .. } => self.batches % *every == 0 || last,
        };
        if refresh {
            self.shown_loss = mean_loss();
            self.last_refresh = Some(Instant::now());
        }
        let status = self.status();
        match &mut self.mode {
            Mode::Off => {}
            Mode::Bar(bar) => {
                bar.set_position(self.batches as u64);
                if refresh {
                    bar.set_message(status);
                }
            }
            Mode::Plain { out, last_printed, .. } => {
                if refresh {
                    *last_printed = self.batches;
                    let line = progress_line(&self.label, self.batches, self.total, &status);
                    // Progress output is best effort: a closed stdout must not stop training.
                    let _ = writeln!(out, "{line}").and_then(|_| out.flush());
                }
            }
        }
    }

    /// Ends the epoch: prints the last progress line if it was not printed yet, then `summary`
    /// (e.g. "loss 0.2310  acc 93.1%"). Later calls do nothing.
    pub fn finish(&mut self, summary: &str) {
        if self.finished {
            return;
        }
        self.finished = true;
        let status = self.status();
        let summary =
            if summary.is_empty() { format!("done  {status}") } else { summary.to_string() };
        match &mut self.mode {
            Mode::Off => {}
            Mode::Bar(bar) => bar.finish_with_message(format!("{status}  | {summary}")),
            Mode::Plain { out, last_printed, .. } => {
                let mut text = String::new();
                if *last_printed != self.batches && self.batches > 0 {
                    text.push_str(&progress_line(&self.label, self.batches, self.total, &status));
                    text.push('\n');
                }
                text.push_str(&format!("{}  {}\n", self.label, summary));
                let _ = out.write_all(text.as_bytes()).and_then(|_| out.flush());
            }
        }
    }

    /// Batches recorded so far.
    pub fn batches(&self) -> usize {
        self.batches
    }

    /// Samples recorded so far.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// The per-sample mean loss as last shown (each batch weighted by its sample count); NaN
    /// before the first refresh.
    pub fn mean_loss(&self) -> f64 {
        self.shown_loss
    }

    /// Samples per second since the progress was created.
    pub fn samples_per_second(&self) -> f64 {
        let secs = self.start.elapsed().as_secs_f64();
        if secs > 0.0 {
            self.samples as f64 / secs
        } else {
            0.0
        }
    }

    fn status(&self) -> String {
        format!("loss {:.4}  {:.1} img/s", self.mean_loss(), self.samples_per_second())
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        // A bar dropped without `finish` (an error mid-epoch) stays visible as it was.
        if let Mode::Bar(bar) = &self.mode {
            if !self.finished {
                bar.abandon();
            }
        }
    }
}

/// `train  [ 40/400]  10.0%  loss 0.4312  812.3 img/s`
fn progress_line(label: &str, batch: usize, total: usize, status: &str) -> String {
    if total == 0 {
        return format!("{label}  [{batch}/?]  {status}");
    }
    let width = total.to_string().len();
    let pct = 100.0 * batch as f64 / total as f64;
    format!("{label}  [{batch:>width$}/{total}] {pct:5.1}%  {status}")
}

#[cfg(test)]
mod tests;

/// The bar of a download of `total` bytes (when the server says) from `url`: an `indicatif`
/// byte counter on stderr in a terminal, hidden elsewhere (a notebook, a log); one line on
/// stdout says what is downloaded either way, as torch.hub prints.
pub(crate) fn download_bar(total: Option<u64>, url: &str, dst: &std::path::Path) -> ProgressBar {
    println!("Downloading: \"{url}\" to {}", dst.display());
    if in_notebook() || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = total.map_or_else(ProgressBar::no_length, ProgressBar::new);
    bar.set_style(
        ProgressStyle::with_template(
            "{bytes:>10}/{total_bytes:10} [{bar:30}] {bytes_per_sec} {eta}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar
}
