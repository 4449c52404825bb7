//! Where a run starts: from scratch, or from the newest intact checkpoint. The core comes back
//! first (weights, optimizer, RNGs, the metrics of the epoch's first part and the metrics log),
//! then every part of the run in one loop by its key ([`Stateful`]); a part the checkpoint
//! holds no state for starts fresh, from the restored weights.
use std::path::{Path, PathBuf};

use tch::nn::VarStore;

use crate::checkpoint::{restore_parts, Checkpoint, Checkpointer};
use crate::dist::Dist;
use crate::stateful::Stateful;
use crate::train::{read_records, EpochRecord, Optimizer, RunningMetrics};
use crate::Result;

/// Where the run starts.
#[derive(Default)]
pub(crate) struct Start {
    /// The first epoch to train (0-based).
    pub epoch: u64,
    /// Batches of that epoch already trained.
    pub skip: usize,
    /// The epoch's sums so far.
    pub metrics: RunningMetrics,
    /// The checkpoint resumed from: (directory, epoch, batches done).
    pub resumed_from: Option<(PathBuf, u64, u64)>,
    /// The records of the epochs before `epoch`, from `metrics.jsonl`.
    pub history: Vec<EpochRecord>,
    /// The checkpoint itself, for its parts ([`resume_parts`]).
    pub checkpoint: Option<Checkpoint>,
}

/// Restores the newest intact checkpoint (when `resume` is on and there is one) into the
/// model and the optimizer, and says where the run starts.
pub(crate) fn resume(
    dist: &Dist,
    resume: bool,
    ckpt: &mut Checkpointer,
    (vs, opt): (&mut VarStore, &mut Optimizer),
    log: &Path,
) -> Result<Start> {
    let latest = if resume { ckpt.latest(dist)? } else { None };
    let Some(c) = latest else {
        return Ok(Start::default());
    };
    let at = ckpt.restore(&c, dist, vs, opt)?;
    dist.println(format!(
        "resuming from {} (epoch {}, {} batches done, step {})",
        at.dir.display(),
        at.epoch + 1,
        at.batches_done,
        at.global_step
    ));
    let history = if log.exists() {
        read_records(log)?.into_iter().filter(|r| r.epoch < at.epoch).collect()
    } else {
        Vec::new()
    };
    Ok(Start {
        epoch: at.epoch,
        skip: at.batches_done as usize,
        metrics: at.epoch_metrics,
        resumed_from: Some((at.dir.clone(), at.epoch, at.batches_done)),
        history,
        checkpoint: Some(c),
    })
}

/// Puts the run's `parts` back from the checkpoint resumed from (nothing for a new run); a
/// part it holds no state for starts fresh, and the run says so.
pub(crate) fn resume_parts(
    dist: &Dist,
    from: Option<&Checkpoint>,
    parts: &mut [&mut dyn Stateful],
) -> Result<()> {
    let Some(c) = from else { return Ok(()) };
    for key in restore_parts(c, parts)? {
        dist.println(format!(
            "the checkpoint holds no state for `{key}` (the run that wrote it had none): it starts fresh here"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::{open_checkpoint, Policy, TrainState, EMA_FILE, MODEL_FILE};
    use crate::fit::parts::run_schedule::RunSchedule;
    use crate::fit::EarlyStopping;
    use crate::train::{GradScaler, LrSchedule, ModelEma, Monitor, StepLR};
    use tch::nn::{self, VarStore};
    use tch::{Device, Kind, Tensor};

    /// A checkpoint of format 1, written by trainbook before the parts had one shape (the
    /// writer is described in the folder's README.md).
    const FORMAT_1: &str =
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/checkpoint-v1/step-000000001");

    /// The same names with equal tensors, in any order.
    fn same(a: &[(String, Tensor)], b: &[(String, Tensor)]) -> bool {
        let sorted = |v: &[(String, Tensor)]| {
            let mut v: Vec<(String, Tensor)> =
                v.iter().map(|(n, t)| (n.clone(), t.shallow_clone())).collect();
            v.sort_by(|x, y| x.0.cmp(&y.0));
            v
        };
        let (a, b) = (sorted(a), sorted(b));
        a.len() == b.len() && a.iter().zip(&b).all(|((n, x), (m, y))| n == m && x.equal(y))
    }

    /// The fixture's model (`fc`: Linear(3, 2)), its optimizer (SGD with momentum) and the run's
    /// four parts as the writer had them configured.
    struct Run {
        vs: VarStore,
        opt: Optimizer,
        schedule: RunSchedule,
        scaler: GradScaler,
        early: EarlyStopping,
    }

    fn fresh_run() -> Run {
        let vs = VarStore::new(Device::Cpu);
        let _fc = nn::linear(vs.root() / "fc", 3, 2, Default::default());
        let opt = Optimizer::sgd(&vs, 0.1, 0.9);
        let step: Box<dyn LrSchedule> = Box::new(StepLR::new(2, 0.5));
        let schedule = RunSchedule::new(Some(step.as_ref()), 1).unwrap();
        let (scaler, early) =
            (GradScaler::new(Device::Cpu), EarlyStopping::new(Monitor::ValLoss, 3));
        Run { vs, opt, schedule, scaler, early }
    }

    #[test]
    fn a_format_1_checkpoint_restores_every_part_through_the_one_loop() {
        let c = open_checkpoint(FORMAT_1.as_ref()).unwrap();
        assert_eq!(c.manifest.format_version, 1);
        // What format 1 wrote, read as plain JSON beside the reader under test.
        let raw: serde_json::Value =
            serde_json::from_slice(&std::fs::read(c.dir.join("manifest.json")).unwrap()).unwrap();
        let mut r = fresh_run();
        let mut ckpt = Checkpointer::new(c.dir.parent().unwrap(), Policy::default());
        ckpt.restore(&c, &Dist::single(Device::Cpu), &mut r.vs, &mut r.opt).unwrap();
        let mut ema = ModelEma::new(&r.vs, 0.5).unwrap();
        let model_only: Vec<(String, Tensor)> =
            ema.state_dict().into_iter().map(|(n, t)| (n, t.copy())).collect();
        let mut parts: Vec<&mut dyn Stateful> =
            vec![&mut r.schedule, &mut r.scaler, &mut r.early, &mut ema];
        let missing = restore_parts(&c, &mut parts).unwrap();
        assert!(missing.is_empty(), "{missing:?}");
        assert_eq!(r.schedule.state(), raw["scheduler"]);
        let scaler = r.scaler.state();
        assert_eq!(scaler.scale, raw["grad_scaler"]["scale"].as_f64().unwrap());
        assert_eq!(scaler.growth_tracker, raw["grad_scaler"]["growth_tracker"].as_i64().unwrap());
        let early = &raw["parts"]["early_stopping"];
        assert_eq!(r.early.best(), early["best"].as_f64());
        assert_eq!(r.early.wait(), early["wait"].as_u64().unwrap());
        let saved_ema = crate::checkpoint::read_tensors_file(&c, EMA_FILE).unwrap().unwrap();
        assert!(same(&ema.state_dict(), &saved_ema), "the EMA holds ema.safetensors");
        assert!(!same(&model_only, &saved_ema), "the fixture's average is not the model");
        let saved_model = crate::checkpoint::read_tensors_file(&c, MODEL_FILE).unwrap().unwrap();
        assert!(same(&crate::models::state_dict(&r.vs), &saved_model));
        // The weights are the writer's: arange(6)/10 and [0.5, -0.5] after one SGD step of 0.1
        // on gradients of 1 (float32: within one rounding of 0.1 per value).
        let w = r.vs.variables()["fc.weight"].shallow_clone();
        let expected = Tensor::arange(6, (Kind::Float, Device::Cpu)).view([2, 3]) / 10.0 - 0.1;
        assert!(w.allclose(&expected, 0.0, 1e-7, false), "{w}");
    }

    #[test]
    fn parts_written_in_format_2_come_back_and_a_missing_part_is_named() {
        let work = tempfile::tempdir().unwrap();
        let dist = Dist::single(Device::Cpu);
        let c = open_checkpoint(FORMAT_1.as_ref()).unwrap();
        let mut r = fresh_run();
        Checkpointer::new(work.path(), Policy::default())
            .restore(&c, &dist, &mut r.vs, &mut r.opt)
            .unwrap();
        let mut ema = ModelEma::new(&r.vs, 0.5).unwrap();
        restore_parts(&c, &mut [&mut r.schedule, &mut r.scaler, &mut r.early, &mut ema]).unwrap();
        let mut ckpt = Checkpointer::new(work.path(), Policy::default());
        let parts: [&dyn Stateful; 4] = [&r.schedule, &r.scaler, &r.early, &ema];
        let state = || TrainState::new(&r.vs, &r.opt, 1).with_parts(&parts);
        let dir = ckpt.save_now(&dist, state).unwrap();
        let again = open_checkpoint(&dir).unwrap();
        assert_eq!(again.manifest.format_version, crate::checkpoint::FORMAT_VERSION);
        let keys: Vec<&str> = again.manifest.parts.keys().map(String::as_str).collect();
        assert_eq!(keys, ["early_stopping", "ema", "grad_scaler", "schedule"]);
        assert!(again.manifest.files.contains_key(EMA_FILE), "the part's tensors are listed");
        let mut back = fresh_run();
        let mut ema_back = ModelEma::new(&back.vs, 0.5).unwrap();
        let mut early_other = EarlyStopping::new(Monitor::ValAcc, 3);
        let mut parts: [&mut dyn Stateful; 4] =
            [&mut back.schedule, &mut back.scaler, &mut early_other, &mut ema_back];
        assert!(restore_parts(&again, &mut parts).unwrap().is_empty());
        assert_eq!(back.schedule.state(), r.schedule.state());
        assert_eq!(back.scaler.state(), r.scaler.state());
        // Early stopping keeps its counters only for the metric it monitors (as before).
        assert_eq!((early_other.best(), r.early.best().is_some()), (None, true));
        assert!(same(&ema_back.state_dict(), &ema.state_dict()));
        // A part the writer did not have is left fresh and named.
        let mut other = GradScaler::new(Device::Cpu);
        struct Renamed<'a>(&'a mut GradScaler);
        impl Stateful for Renamed<'_> {
            fn state_key(&self) -> String {
                "other_scaler".into()
            }
            fn state_dict(&self) -> Result<crate::PartState> {
                self.0.state_dict()
            }
            fn load_state_dict(&mut self, s: crate::PartState) -> Result<()> {
                self.0.load_state_dict(s)
            }
        }
        let missing = restore_parts(&again, &mut [&mut Renamed(&mut other)]).unwrap();
        assert_eq!(missing, ["other_scaler"]);
        assert_eq!(other.state(), GradScaler::new(Device::Cpu).state());
        // A state that does not fit is an error naming the checkpoint and the part.
        let small = VarStore::new(Device::Cpu);
        let _ = (small.root() / "fc").zeros("weight", &[1, 3]);
        let mut wrong = ModelEma::new(&small, 0.5).unwrap();
        let err = restore_parts(&again, &mut [&mut wrong]).unwrap_err().to_string();
        assert!(err.contains("part `ema`") && err.contains(&dir.display().to_string()), "{err}");
    }
}
