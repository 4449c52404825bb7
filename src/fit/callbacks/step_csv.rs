//! `OUT/steps.csv`: one row per optimizer step (step, epoch, batches done, loss, learning rate,
//! gradient norm, wall time), written by rank 0 as the steps are read from the device, for a
//! live plot (`pandas.read_csv`) or a later look. A resumed run keeps the rows up to its
//! checkpoint's step and writes the rest again, so the file always reads as one run.
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::fit::callbacks::{Callback, FitStart};
use crate::train::StepRecord;
use crate::{Result, WithPath};

/// The file's first line.
pub const STEPS_CSV_HEADER: &str = "step,epoch,batches_done,loss,lr,grad_norm,wall_time";

/// The `steps.csv` logger (a [`Callback`]; the `Trainer` adds it unless the step log is off).
#[derive(Default)]
pub(crate) struct StepCsv {
    file: Option<(PathBuf, BufWriter<File>)>,
}

/// A row; numbers in Rust's shortest form that reads back to the same value (empty: none).
fn row(s: &StepRecord) -> String {
    let norm = s.grad_norm.map_or(String::new(), |n| n.to_string());
    format!(
        "{},{},{},{},{},{norm},{:.3}",
        s.step, s.epoch, s.batches_done, s.loss, s.lr, s.wall_time
    )
}

/// Keeps the header and the rows of steps up to `steps_done` (a resumed run's checkpoint),
/// written to a new file that replaces the old one at once.
fn keep_rows_up_to(path: &Path, steps_done: u64) -> Result<()> {
    let old = BufReader::new(File::open(path).with_path(path)?);
    let tmp = path.with_extension("csv.tmp");
    let mut new = BufWriter::new(File::create(&tmp).with_path(&tmp)?);
    writeln!(new, "{STEPS_CSV_HEADER}").with_path(&tmp)?;
    for line in old.lines().skip(1) {
        let line = line.with_path(path)?;
        // A row cut short by a kill has no step to keep by: it goes.
        let step = line.split(',').next().and_then(|s| s.parse::<u64>().ok());
        if step.is_some_and(|s| s <= steps_done) && line.split(',').count() == 7 {
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
        let file = if start.resumed && path.exists() {
            keep_rows_up_to(&path, start.steps_done)?;
            OpenOptions::new().append(true).open(&path).with_path(&path)?
        } else {
            let mut f = File::create(&path).with_path(&path)?;
            writeln!(f, "{STEPS_CSV_HEADER}").with_path(&path)?;
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
}
