//! The run's set-up, before its first step, and what it puts back after: the loaders' own
//! settings (the batch limits `limit_train_batches`/`limit_val_batches` and the training
//! batches' mixing, `mixup_cutmix`), the process-wide switches (autograd's anomaly detection,
//! cuDNN's benchmark and the float32 matmul precision, as [`FitConfig`] asks, and NVTX ranges;
//! torch's are process-wide too), the weight trail's writer (`FitConfig::weight_trail`, rank 0
//! only; see [`crate::trail`]), the run's callbacks (the built-in logs its flags ask for, then
//! the user's) and those callbacks told where the run starts.
use std::sync::{Arc, Mutex};

use crate::data::{DataLoader, Dataset};
use crate::dist::Dist;
use crate::fit::callbacks::{
    epoch_line, metrics_log, step_csv, tensorboard, val_steps_log, Callbacks, FitStart,
};
use crate::fit::config::FitConfig;
use crate::trail::{program_checksum, TrailHeader, TrailRecorder};
use crate::train::{
    determinism, emit_nvtx, float32_matmul_precision, set_cudnn_benchmark,
    set_float32_matmul_precision, AnomalyGuard, Float32MatmulPrecision, NvtxRanges,
};
use crate::transforms::MixUpCutMix;
use crate::Result;

use super::Run;

/// The callbacks of the run `cfg` configures: the epoch line and the metrics log, the
/// mid-epoch validations' log (with `val_every_steps`), new step logs (with
/// [`FitConfig::step_log`]; `steps.csv` with a column for each of its training metrics), then
/// the user's own callbacks.
pub(crate) fn run_callbacks(cfg: &FitConfig) -> Callbacks {
    let mut all = Callbacks::default();
    all.push(Arc::new(Mutex::new(epoch_line::EpochLine::default())));
    all.push(Arc::new(Mutex::new(metrics_log::MetricsLog::default())));
    if cfg.val_every_steps.is_some() {
        all.push(Arc::new(Mutex::new(val_steps_log::ValStepsLog::default())));
    }
    if cfg.step_log {
        let names = cfg.train_metrics.iter().map(|m| m.name().to_string()).collect();
        all.push(Arc::new(Mutex::new(step_csv::StepCsv::with_metrics(names))));
        all.push(Arc::new(Mutex::new(tensorboard::TensorBoardLog::default())));
    }
    cfg.callbacks.each_shared(|c| all.push(c));
    all
}

/// The loaders' own settings, as they were before the run.
pub(crate) struct LoaderSettings {
    limits: (Option<usize>, Option<usize>),
    mix: Option<MixUpCutMix>,
}

impl LoaderSettings {
    /// Sets what `cfg` asks for on `train` and `val` and returns what they had; an error (a bad
    /// alpha) leaves them as they were.
    pub fn apply<A: Dataset + 'static, B: Dataset + 'static>(
        cfg: &FitConfig,
        train: &mut DataLoader<A>,
        val: &mut DataLoader<B>,
    ) -> Result<LoaderSettings> {
        let classes = train.dataset().classes().len();
        let mix = cfg.mixup_cutmix.map(|(a, b)| MixUpCutMix::new(a, b, classes)).transpose()?;
        let before = LoaderSettings {
            limits: (train.batch_limit(), val.batch_limit()),
            mix: train.batch_mixing().cloned(),
        };
        if mix.is_some() {
            train.set_batch_mix(mix);
        }
        train.set_limit_batches(cfg.limit_train_batches.or(before.limits.0));
        val.set_limit_batches(cfg.limit_val_batches.or(before.limits.1));
        Ok(before)
    }

    /// Puts the loaders' own settings back.
    pub fn restore<A: Dataset + 'static, B: Dataset + 'static>(
        self,
        train: &mut DataLoader<A>,
        val: &mut DataLoader<B>,
    ) {
        train.set_batch_mix(self.mix);
        train.set_limit_batches(self.limits.0);
        val.set_limit_batches(self.limits.1);
    }
}

/// The switches as they were before the run, put back on drop.
pub(crate) struct RunSwitches {
    _anomaly: Option<AnomalyGuard>,
    _nvtx: Option<NvtxRanges>,
    benchmark: Option<bool>,
    precision: Option<Float32MatmulPrecision>,
}

impl RunSwitches {
    /// Sets what `cfg` asks for; an error (cuDNN's benchmark in the deterministic mode, say)
    /// leaves every switch as it was.
    pub fn apply(cfg: &FitConfig) -> Result<RunSwitches> {
        let mut switches =
            RunSwitches { _anomaly: None, _nvtx: None, benchmark: None, precision: None };
        if cfg.cudnn_benchmark {
            let before = determinism()?.cudnn_benchmark;
            set_cudnn_benchmark(true)?;
            switches.benchmark = Some(before);
        }
        if let Some(p) = cfg.float32_matmul_precision {
            let before = float32_matmul_precision()?;
            set_float32_matmul_precision(p)?;
            switches.precision = Some(before);
        }
        switches._anomaly = cfg.detect_anomaly.then(AnomalyGuard::enable).transpose()?;
        switches._nvtx = cfg.emit_nvtx.then(emit_nvtx).transpose()?;
        Ok(switches)
    }
}

impl Drop for RunSwitches {
    fn drop(&mut self) {
        if let Some(on) = self.benchmark {
            let _ = set_cudnn_benchmark(on);
        }
        if let Some(p) = self.precision {
            let _ = set_float32_matmul_precision(p);
        }
    }
}

/// The weight trail's writer on rank 0 when the run keeps one; a resumed run
/// (`resumed_steps`: its checkpoint's step) keeps the lines up to that step.
pub(crate) fn start_trail(
    dist: &Dist,
    cfg: &FitConfig,
    resumed_steps: Option<u64>,
    (train_samples, batch_size): (usize, usize),
) -> Result<Option<TrailRecorder>> {
    let Some(every) = cfg.weight_trail.filter(|_| dist.is_main()) else { return Ok(None) };
    let (program, program_crc32) = program_checksum();
    let header = TrailHeader {
        every,
        trainbook: env!("CARGO_PKG_VERSION").to_string(),
        program,
        program_crc32,
        world_size: dist.world_size(),
        seed: cfg.seed,
        config: cfg.config.clone(),
        train_samples,
        batch_size,
    };
    TrailRecorder::start(&cfg.out, header, resumed_steps).map(Some)
}

impl Run<'_> {
    /// The callbacks learn where the run starts (the metrics log then holds the epochs before
    /// `first_epoch`).
    pub(super) fn begin(&mut self, first_epoch: u64) -> Result<()> {
        let start = FitStart {
            rank: self.dist.rank(),
            world_size: self.dist.world_size(),
            out: &self.cfg.out,
            first_epoch,
            steps_done: self.ckpt.global_step(),
            resumed: self.resumed_from.is_some(),
            epochs: self.cfg.epochs,
            history: &self.history,
        };
        self.callbacks.each(|c| c.on_fit_start(&start))
    }
}
