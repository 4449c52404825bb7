//! The speed switches of [`Trainer`] for CUDA GPUs: the training step as a CUDA graph, cuDNN's
//! autotuner and TF32 (torch's names; `fit` sets them for the run and puts them back after).
use super::Trainer;
use crate::train::Float32MatmulPrecision;

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
}
