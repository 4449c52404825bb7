//! What the examples run besides training, on [`RunArgs`]: the metrics of `--metric`,
//! `--test-only` and `--lr-find` (and [`RunArgs::instead_of_training`], which runs whichever
//! was asked for).
use trainbook::prelude::*;
use trainbook::train::Monitor;

use super::RunArgs;

/// The checkpoint `--test-only` evaluates: `resume` when given (a checkpoint folder, or a run
/// folder whose `checkpoints/` holds its latest), else `out`'s latest. Errors name the path
/// when it holds no checkpoint.
pub fn checkpoint_to_test(
    dist: &Dist,
    out: &std::path::Path,
    resume: Option<&std::path::Path>,
) -> anyhow::Result<trainbook::checkpoint::Checkpoint> {
    use trainbook::checkpoint::{open_checkpoint, Checkpointer, Policy, MANIFEST};
    let path = resume.unwrap_or(out);
    if path.join(MANIFEST).is_file() {
        return Ok(open_checkpoint(path)?);
    }
    let root = match path.join("checkpoints").is_dir() {
        true => path.join("checkpoints"),
        false => path.to_path_buf(),
    };
    let ckpt = Checkpointer::new(&root, Policy::default()).latest(dist)?;
    ckpt.ok_or_else(|| {
        let flag = if resume.is_some() { "--resume" } else { "no --weights given and OUT" };
        anyhow::anyhow!("--test-only: {flag}: no checkpoint in {}", path.display())
    })
}

impl RunArgs {
    /// `--test-only`: evaluates the model over `loader` with `trainer`'s settings (the example's
    /// own, its loss included: [`Trainer::test`]) and prints the result; the weights are those
    /// of `--resume PATH` when given ([`checkpoint_to_test`]), else those already loaded when
    /// `weights_loaded` (the example's --weights), else OUT's latest checkpoint's. Errors when
    /// there is none of them.
    pub fn test_only<D: trainbook::data::Dataset + 'static>(
        &self,
        dist: &Dist,
        trainer: &Trainer,
        vs: &mut tch::nn::VarStore,
        net: &dyn tch::nn::ModuleT,
        loader: &mut trainbook::data::DataLoader<D>,
        (out, weights_loaded): (&std::path::Path, bool),
    ) -> anyhow::Result<()> {
        use trainbook::checkpoint::{read_tensors_file, MODEL_FILE};
        if self.resume.is_some() || !weights_loaded {
            let ckpt = checkpoint_to_test(dist, out, self.resume.as_deref())?;
            let tensors = read_tensors_file(&ckpt, MODEL_FILE)?
                .ok_or_else(|| anyhow::anyhow!("{}: no {MODEL_FILE}", ckpt.dir.display()))?;
            trainbook::models::load_state_dict(vs, &tensors, true)?;
            dist.println(format!("--test-only: the weights of {}", ckpt.dir.display()));
        }
        let summary = trainer.test(vs, net, loader)?;
        dist.println(format!("test: {summary}"));
        Ok(())
    }

    /// `trainer` measuring `--metric`'s metrics of a model with `classes` outputs, and the
    /// built-in metric `--monitor-metric` names when it is not among them, and
    /// `--train-metric`'s on the training batches; an error naming the flag when a name is
    /// unknown or the model has no classes (`classes` 0: regression).
    pub fn metrics<'d>(
        &self,
        trainer: Trainer<'d>,
        classes: usize,
    ) -> trainbook::Result<Trainer<'d>> {
        let mut names = self.metrics.clone();
        if let Some(Monitor::Metric(m)) = self.monitor {
            if !names.contains(&m.name) {
                names.push(m.name.clone());
            }
        }
        let builtin = |flag: &str, name: &str| {
            if classes == 0 {
                return Err(trainbook::Error::InvalidArgument(format!(
                    "{flag} {name}: this example's model predicts values, not classes"
                )));
            }
            trainbook::train::builtin_metric(name, classes).map_err(|e| match e {
                trainbook::Error::InvalidArgument(why) => {
                    trainbook::Error::InvalidArgument(format!("{flag}: {why}"))
                }
                other => other,
            })
        };
        let mut trainer = trainer;
        for name in names {
            trainer = trainer.metric(builtin("--metric", &name)?);
        }
        for name in &self.train_metrics {
            trainer = trainer.train_metric(builtin("--train-metric", name)?);
        }
        Ok(trainer)
    }

    /// `--test-only`, `--lr-find` or `--find-batch-size`, when one was asked for: runs it (the
    /// test on `eval`, the others on `train`; see [`test_only`](Self::test_only),
    /// [`lr_find`](Self::lr_find) and [`find_batch_size`](Self::find_batch_size))
    /// and says `true`, so that the example ends without training.
    pub fn instead_of_training<A, B>(
        &self,
        (dist, trainer, (out, weights_loaded)): (&Dist, &Trainer, (&std::path::Path, bool)),
        (vs, net, opt): (&mut tch::nn::VarStore, &dyn tch::nn::ModuleT, &mut Optimizer),
        (train, eval): (&mut trainbook::data::DataLoader<A>, &mut trainbook::data::DataLoader<B>),
    ) -> anyhow::Result<bool>
    where
        A: trainbook::data::Dataset + 'static,
        B: trainbook::data::Dataset + 'static,
    {
        if self.resume.is_some() && !self.test_only {
            anyhow::bail!(
                "--resume: only with --test-only (a run continues from its own OUT/checkpoints)"
            );
        }
        if self.test_only {
            self.test_only(dist, trainer, vs, net, eval, (out, weights_loaded))?;
        } else if self.lr_find {
            self.lr_find(dist, trainer, (vs, net, opt), train, out)?;
        } else if self.find_batch_size {
            self.find_batch_size(dist, trainer, (vs, net, opt), train)?;
        } else {
            return Ok(false);
        }
        Ok(true)
    }

    /// `--lr-find`: the range test with `trainer`'s settings over `loader`; prints the curve's
    /// suggestion (fastai's valley) and, on rank 0, writes `OUT/lr_find.png`.
    pub fn lr_find<D: trainbook::data::Dataset + 'static>(
        &self,
        dist: &Dist,
        trainer: &Trainer,
        (vs, net, opt): (&mut tch::nn::VarStore, &dyn tch::nn::ModuleT, &mut Optimizer),
        loader: &mut trainbook::data::DataLoader<D>,
        out: &std::path::Path,
    ) -> anyhow::Result<()> {
        let options = trainbook::train::LrFindOptions::default();
        let found = trainer.lr_find(vs, net, opt, loader, options)?;
        let line = match found.suggestion {
            Some((lr, loss)) => {
                format!("suggested learning rate {lr:.2e} (smoothed loss {loss:.4} there)")
            }
            None => "no suggestion: too few steps before the loss diverged".into(),
        };
        dist.println(format!("lr_find: {} steps, {line}", found.lrs.len()));
        if dist.is_main() {
            std::fs::create_dir_all(out)?;
            let path = out.join("lr_find.png");
            trainbook::figures::lr_find_plot(&found)?.save(&path)?;
            println!("wrote {}", path.display());
        }
        Ok(())
    }

    /// `--find-batch-size`: the batch-size finder with `trainer`'s settings over `loader`'s
    /// data, limited by `--max-memory-gib`; prints each trial and the largest batch that fitted.
    pub fn find_batch_size<D: trainbook::data::Dataset + 'static>(
        &self,
        dist: &Dist,
        trainer: &Trainer,
        (vs, net, opt): (&mut tch::nn::VarStore, &dyn tch::nn::ModuleT, &mut Optimizer),
        loader: &mut trainbook::data::DataLoader<D>,
    ) -> anyhow::Result<()> {
        let max_memory = match self.max_memory_gib {
            Some(gib) if gib > 0.0 && gib.is_finite() => Some((gib * (1u64 << 30) as f64) as u64),
            Some(gib) => anyhow::bail!("--max-memory-gib {gib}: give a positive number of GiB"),
            None => None,
        };
        let find = trainbook::train::BatchSizeFindOptions { max_memory, ..Default::default() };
        let found = trainer.find_batch_size(vs, net, opt, loader, find)?;
        for t in &found.trials {
            let peak =
                t.peak_bytes.map_or("-".into(), |b| format!("{:.1} MiB", b as f64 / 1048576.0));
            let verdict = match &t.reason {
                None => "fits".to_string(),
                Some(why) => format!("does not fit: {why}"),
            };
            dist.println(format!("batch {:>6}: peak {peak}, {verdict}", t.batch_size));
        }
        dist.println(format!("largest batch size that fits: {}", found.batch_size));
        Ok(())
    }
}
