//! `OUT/steps.csv`: one row per optimizer step (step, epoch, batches done, loss, learning rate,
//! gradient norm, the run's own training metrics, wall time), written by rank 0 as the steps are read from the device, for a
//! live plot (`pandas.read_csv`) or a later look. A resumed run keeps the rows up to its
//! checkpoint's step and writes the rest again, so the file always reads as one run.
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::fit::callbacks::{Callback, FitStart};
use crate::train::StepRecord;
use crate::{Result, WithPath};

/// The file's first line without training metrics of one's own (theirs go before `wall_time`).
pub const STEPS_CSV_HEADER: &str = "step,epoch,batches_done,loss,lr,grad_norm,wall_time";

/// The `steps.csv` logger (a [`Callback`]; the `Trainer` adds it unless the step log is off).
#[derive(Default)]
pub(crate) struct StepCsv {
    file: Option<(PathBuf, BufWriter<File>)>,
    /// The names of the run's own training metrics: a column each, before `wall_time`.
    metrics: Vec<String>,
}

impl StepCsv {
    /// The logger of a run whose own training metrics are named `metrics`.
    pub(crate) fn with_metrics(metrics: Vec<String>) -> StepCsv {
        StepCsv { file: None, metrics }
    }

    /// The header: [`STEPS_CSV_HEADER`] with a column per own training metric before
    /// `wall_time`.
    fn header(&self) -> String {
        let mut columns: Vec<&str> = STEPS_CSV_HEADER.split(',').collect();
        let time = columns.pop().unwrap_or("wall_time");
        columns.extend(self.metrics.iter().map(String::as_str));
        columns.push(time);
        columns.join(",")
    }
}

/// A row; numbers in Rust's shortest form that reads back to the same value (empty: none).
fn row(s: &StepRecord) -> String {
    let norm = s.grad_norm.map_or(String::new(), |n| n.to_string());
    let own: String = s.metrics.iter().map(|(_, v)| format!("{v},")).collect();
    format!(
        "{},{},{},{},{},{norm},{own}{:.3}",
        s.step, s.epoch, s.batches_done, s.loss, s.lr, s.wall_time
    )
}

/// Keeps the header and the rows of steps up to `steps_done` (a resumed run's checkpoint),
/// written to a new file that replaces the old one at once. A file whose header is not
/// `header` (written with other training metrics) is an error naming both, and stays.
fn keep_rows_up_to(path: &Path, steps_done: u64, header: &str) -> Result<()> {
    let mut old = BufReader::new(File::open(path).with_path(path)?).lines();
    let first = old.next().transpose().with_path(path)?.unwrap_or_default();
    if first != header {
        return Err(crate::Error::InvalidArgument(format!(
            "{}: its columns are {first:?}, this run's are {header:?} (other training metrics): \
             resume with the Trainer::train_metric list it was written with, or move it away",
            path.display()
        )));
    }
    let columns = header.split(',').count();
    let tmp = path.with_extension("csv.tmp");
    let mut new = BufWriter::new(File::create(&tmp).with_path(&tmp)?);
    writeln!(new, "{header}").with_path(&tmp)?;
    for line in old {
        let line = line.with_path(path)?;
        // A row cut short by a kill has no step to keep by: it goes.
        let step = line.split(',').next().and_then(|s| s.parse::<u64>().ok());
        if step.is_some_and(|s| s <= steps_done) && line.split(',').count() == columns {
            writeln!(new, "{line}").with_path(&tmp)?;
        }
    }
    new.flush().with_path(&tmp)?;
    drop(new);
    std::fs::rename(&tmp, path).with_path(path)
}

impl Callback for StepCsv {
    fn on_fit_start(&mut self, start: &FitStart) -> Result<()> {
        if start.rank != 0 {
            return Ok(());
        }
        let path = start.out.join("steps.csv");
        std::fs::create_dir_all(start.out).with_path(start.out)?;
        let header = self.header();
        let file = if start.resumed && path.exists() {
            keep_rows_up_to(&path, start.steps_done, &header)?;
            OpenOptions::new().append(true).open(&path).with_path(&path)?
        } else {
            let mut f = File::create(&path).with_path(&path)?;
            writeln!(f, "{header}").with_path(&path)?;
            f
        };
        self.file = Some((path, BufWriter::new(file)));
        Ok(())
    }

    fn on_train_steps(&mut self, steps: &[StepRecord]) -> Result<()> {
        if let Some((path, out)) = &mut self.file {
            for s in steps {
                writeln!(out, "{}", row(s)).with_path(&*path)?;
            }
            out.flush().with_path(&*path)?;
        }
        Ok(())
    }

    fn on_fit_end(&mut self, _report: &crate::fit::FitReport) -> Result<()> {
        if let Some((path, mut out)) = self.file.take() {
            out.flush().with_path(&path)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(n: u64, loss: f64) -> StepRecord {
        StepRecord {
            step: n,
            epoch: 0,
            batches_done: n as usize,
            loss,
            lr: 0.1,
            grad_norm: (n % 2 == 0).then_some(1.5),
            wall_time: 1e9,
            metrics: Vec::new(),
        }
    }

    fn start(out: &Path, resumed: bool, steps_done: u64) -> FitStart<'_> {
        FitStart {
            rank: 0,
            world_size: 1,
            out,
            first_epoch: 0,
            steps_done,
            resumed,
            epochs: 1,
            history: &[],
        }
    }

    #[test]
    fn rows_read_back_exactly_and_a_resume_drops_the_steps_it_repeats() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = StepCsv::default();
        log.on_fit_start(&start(dir.path(), false, 0)).unwrap();
        let losses = [std::f64::consts::LN_10, 0.1 + 0.2, 1.0 / 3.0, 7.0];
        let steps: Vec<StepRecord> = (1..=4).map(|n| step(n, losses[n as usize - 1])).collect();
        log.on_train_steps(&steps).unwrap();
        let path = dir.path().join("steps.csv");
        // A kill in the middle of a row leaves half of it.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"5,0,5,0.4")
            .unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], STEPS_CSV_HEADER);
        let back: Vec<f64> =
            lines[1..5].iter().map(|l| l.split(',').nth(3).unwrap().parse().unwrap()).collect();
        assert_eq!(back, losses, "the losses read back bit for bit");
        assert_eq!(lines[2].split(',').nth(5), Some("1.5"));
        assert_eq!(lines[1].split(',').nth(5), Some(""), "no norm: an empty field");

        // Resumed from the checkpoint of step 2: steps 3 and 4 will be trained again.
        let mut log = StepCsv::default();
        log.on_fit_start(&start(dir.path(), true, 2)).unwrap();
        log.on_train_steps(&[step(3, 0.5)]).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let steps: Vec<&str> = text.lines().skip(1).map(|l| l.split(',').next().unwrap()).collect();
        assert_eq!(steps, ["1", "2", "3"]);
        assert!(text.lines().last().unwrap().starts_with("3,0,3,0.5,"));

        // A new run (no resume) starts the file over; other ranks write nothing.
        let mut log = StepCsv::default();
        log.on_fit_start(&start(dir.path(), false, 0)).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), format!("{STEPS_CSV_HEADER}\n"));
        let other = tempfile::tempdir().unwrap();
        let mut log = StepCsv::default();
        log.on_fit_start(&FitStart { rank: 1, ..start(other.path(), false, 0) }).unwrap();
        log.on_train_steps(&[step(1, 1.0)]).unwrap();
        assert!(!other.path().join("steps.csv").exists());
    }

    #[test]
    fn training_metrics_are_columns_before_the_time_and_a_resume_with_others_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("steps.csv");
        let named = || StepCsv::with_metrics(vec!["f1_macro".into(), "auroc".into()]);
        let mut log = named();
        log.on_fit_start(&start(dir.path(), false, 0)).unwrap();
        let own = vec![("f1_macro".to_string(), 0.1 + 0.2), ("auroc".to_string(), 0.5)];
        log.on_train_steps(&[StepRecord { metrics: own, ..step(1, 2.0) }]).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            text,
            "step,epoch,batches_done,loss,lr,grad_norm,f1_macro,auroc,wall_time\n\
             1,0,1,2,0.1,,0.30000000000000004,0.5,1000000000.000\n"
        );
        // Resumed with the same metrics: the row is kept.
        named().on_fit_start(&start(dir.path(), true, 1)).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
        // Resumed without them: an error naming both headers, and the file stays as it was.
        let err = StepCsv::default().on_fit_start(&start(dir.path(), true, 1)).unwrap_err();
        assert!(err.to_string().contains("f1_macro,auroc,wall_time"), "{err}");
        assert!(err.to_string().contains("grad_norm,wall_time"), "{err}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
    }
}
