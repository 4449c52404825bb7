//! The speed switches of [`Trainer`] for CUDA GPUs: the training step as a CUDA graph, cuDNN's
//! autotuner and TF32 (torch's names; `fit` sets them for the run and puts them back after);
//! and the tools that show where a step's time goes: the profiler and NVTX ranges.
use super::Trainer;
use crate::train::{Float32MatmulPrecision, ProfileSchedule};

/// The GPU's speed switches (CUDA graphs, cuDNN's benchmark mode, float32 matmul precision) and
/// the profiler (with NVTX ranges).
impl Trainer<'_> {
    /// Captures the training step (forward, loss, backward) as a CUDA graph after a few eager
    /// steps and replays it for every batch of the captured shape
    /// ([`StepGraph`](crate::train::StepGraph)): far fewer kernel launches, for small batches
    /// where the GPU waits for the host. The optimizer step, schedules, clipping, EMA, metrics
    /// and checkpoints run as without it. Where the step cannot be captured (CPU, DDP over
    /// ranks, gradient accumulation, float16 loss scaling, anomaly detection) `fit` says why
    /// once and runs eagerly. Default `false`.
    ///
    /// ```
    /// use trainbook::{dist::Dist, fit::Trainer};
    /// let dist = Dist::single(tch::Device::Cpu);
    /// let trainer = Trainer::new(&dist).cuda_graphs(true).cudnn_benchmark(false);
    /// assert!(trainer.config().cuda_graphs);
    /// ```
    pub fn cuda_graphs(mut self, on: bool) -> Self {
        self.cfg.cuda_graphs = on;
        self
    }

    /// `torch.backends.cudnn.benchmark` for the run: cuDNN times its convolution algorithms for
    /// each new shape and keeps the fastest. An error of `fit` in the deterministic mode,
    /// which needs it off. Default `false` (torch's).
    pub fn cudnn_benchmark(mut self, on: bool) -> Self {
        self.cfg.cudnn_benchmark = on;
        self
    }

    /// `torch.set_float32_matmul_precision` for the run (`High`: TF32 tensor cores for float32
    /// matrix products). Default: left as the process has it ("highest" unless changed).
    pub fn float32_matmul_precision(mut self, precision: Float32MatmulPrecision) -> Self {
        self.cfg.float32_matmul_precision = Some(precision);
        self
    }

    /// Records the steps `schedule` selects with libtorch's profiler (Kineto, what
    /// `torch.profiler.profile` drives), each rank's trace in `OUT/profile/` as
    /// `rankR.TIME_NS.pt.trace.json` (a Chrome trace, as torch's `export_chrome_trace` writes).
    /// A number `n` records `n` steps after one idle and one warm-up step
    /// (`torch.profiler.schedule(wait=1, warmup=1, active=n)`); steps are optimizer steps counted
    /// from the run's (or the resumed run's) start. Each step shows the loop's phases as ranges
    /// ([`phase`](crate::train::phase)); on CUDA it also asks for the kernels. Default: off.
    ///
    /// ```
    /// use trainbook::{dist::Dist, fit::Trainer, train::ProfileSchedule};
    /// let dist = Dist::single(tch::Device::Cpu);
    /// let trainer = Trainer::new(&dist).profile(3);
    /// assert_eq!(trainer.config().profile, Some(ProfileSchedule::new(1, 1, 3)?));
    /// # Ok::<(), trainbook::Error>(())
    /// ```
    pub fn profile(mut self, schedule: impl Into<ProfileSchedule>) -> Self {
        self.cfg.profile = Some(schedule.into());
        self
    }

    /// NVTX ranges for the whole run (torch's `emit_nvtx`): every operator and every phase of
    /// the loop as a range on Nsight Systems' timeline (`nsys profile ... ./program`). An error
    /// of `fit` in a build without CUDA, or together with [`Trainer::profile`]. Default `false`.
    pub fn emit_nvtx(mut self, on: bool) -> Self {
        self.cfg.emit_nvtx = on;
        self
    }
}
