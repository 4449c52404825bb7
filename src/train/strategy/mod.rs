//! The strategy of a training step: the [`Strategy`] trait that [`train_epoch`](super::train_epoch)
//! and [`evaluate`](super::evaluate) call around each step, and [`SingleProcess`], the strategy
//! of one process (distributed training's is [`Ddp`], in `ddp.rs`).
mod ddp;

use tch::Tensor;

pub use ddp::{Ddp, DdpOptions};

use super::metrics::RunningMetrics;
use crate::Result;

/// How a training step runs across processes (Lightning's "strategy"): what happens around
/// forward and backward, how metrics and labels are combined over ranks, and which rank
/// speaks. Distributed training ([`Ddp`]) broadcasts buffers before the
/// forward pass and averages gradients during the backward pass; [`SingleProcess`] does
/// nothing. `sync` is false for the micro-batches of an accumulation window that do not end
/// it (no gradient exchange, as inside torch's `no_sync`).
///
/// ```
/// use trainbook::train::{SingleProcess, Strategy};
/// assert_eq!((SingleProcess.world_size(), SingleProcess.is_main()), (1, true));
/// assert_eq!(SingleProcess.gather_f64(2.5).unwrap(), vec![2.5]);
/// ```
pub trait Strategy {
    /// Runs before each forward pass of training.
    fn pre_forward(&self, _sync: bool) -> Result<()> {
        Ok(())
    }
    /// Runs the backward pass of `loss` (and whatever must happen around it).
    fn run_backward(&self, loss: &Tensor, _sync: bool) -> Result<()> {
        Ok(loss.f_backward()?)
    }
    /// Sums metrics over all ranks (identity for a single process).
    fn reduce_metrics(&self, metrics: RunningMetrics) -> Result<RunningMetrics> {
        Ok(metrics)
    }
    /// Gathers the predicted and true labels of all ranks (identity for a single process).
    fn gather_labels(&self, predicted: Tensor, labels: Tensor) -> Result<(Tensor, Tensor)> {
        Ok((predicted, labels))
    }
    /// `values` summed element-wise over all ranks (identity for a single process); every rank
    /// passes as many.
    fn sum_f64s(&self, values: Vec<f64>) -> Result<Vec<f64>> {
        Ok(values)
    }
    /// Every rank's value of `x`, in rank order (`[x]` for a single process).
    fn gather_f64(&self, x: f64) -> Result<Vec<f64>> {
        Ok(vec![x])
    }
    /// The number of ranks taking part (1 for a single process).
    fn world_size(&self) -> usize {
        1
    }
    /// Whether this rank prints and writes files (rank 0).
    fn is_main(&self) -> bool {
        true
    }
    /// Why a training step under this strategy cannot be captured as a CUDA graph
    /// ([`StepGraph`](super::StepGraph)), if it cannot (`None`: it can).
    fn cuda_graph_blocker(&self) -> Option<String> {
        None
    }
    /// A CUDA graph keeps the strategy's collectives out of the captured step: from
    /// `set_graph_capture(true)` to `set_graph_capture(false)` (the capture),
    /// [`pre_forward`](Self::pre_forward) and [`run_backward`](Self::run_backward) exchange
    /// nothing; what they exchange runs eagerly around each replay instead.
    fn set_graph_capture(&self, _capturing: bool) {}
    /// Before each replay of a captured step: what [`pre_forward`](Self::pre_forward) exchanges
    /// ([`Ddp`]: rank 0's buffers).
    fn before_graph_replay(&self) -> Result<()> {
        Ok(())
    }
    /// After each replay of a captured step: what the backward pass exchanges ([`Ddp`]: the
    /// gradients averaged over the ranks, bucket by bucket as c10d's Reducer averages them).
    fn after_graph_replay(&self) -> Result<()> {
        Ok(())
    }
}

/// A single process: every step is local, metrics are this process's own.
pub struct SingleProcess;
impl Strategy for SingleProcess {}
