//! The training step as a CUDA graph ([`StepGraph`]): what `torch.cuda.graph` does for a
//! whole-network capture, for [`train_epoch`](crate::train::train_epoch) and `fit`. The first
//! steps run eagerly on a side stream (cuDNN, cuBLAS and the autograd engine start there); the
//! next one is captured (gradients set to None, forward, loss and backward) into a graph with
//! static input buffers; from then on each batch of the same shape is copied into the buffers
//! and the graph is replayed: a few launches instead of the hundreds of small kernels of a
//! ResNet step at batch 16, where the GPU otherwise waits for the host. The optimizer step,
//! clipping, EMA and the metrics run eagerly after it on the same tensors (the gradients the
//! graph writes), so schedules and every optimizer work unchanged, with the same kernels as the
//! eager step. A model of several inputs (a batch with extra inputs) gets a static buffer for
//! each. A batch of another shape (the last, partial one) runs eagerly. Under DDP the
//! collectives stay out of the graph: the strategy's exchanges run eagerly around each replay
//! (rank 0's buffers before, the gradients' all-reduce after). Where the step cannot be
//! captured (CPU, DDP's find_unused_parameters or a compression hook, accumulation, float16
//! loss scaling, anomaly detection, a build without `cuda`) it runs eagerly and says why once;
//! `graph.rs` wraps the C++ shim.
mod graph;

use tch::{Device, Tensor};

use self::graph::{set_grads, CudaGraph};
use super::strategy::{SingleProcess, Strategy};
use crate::optim::Optimizer;
use crate::Result;

/// Warm-up steps before the capture when none is given (as in torch's whole-network example).
pub const DEFAULT_WARMUP_STEPS: usize = 3;

/// The forward pass, loss and backward pass of one training step, on the given batch (its
/// images, its target, then its extra inputs): returns the model's output and the mean loss.
pub(crate) type ForwardBackward<'f> = dyn FnMut(&[Tensor]) -> Result<(Tensor, Tensor)> + 'f;

/// The forward pass, loss and backward pass of a step of images and targets (a loop of one's
/// own: [`StepGraph::step`]).
pub type ImageStep<'f> = dyn FnMut(&Tensor, &Tensor) -> Result<(Tensor, Tensor)> + 'f;

/// The batch's tensors as the step's inputs: the images, the target, the extra inputs.
fn inputs_of(x: &Tensor, y: &Tensor) -> [Tensor; 2] {
    [x.shallow_clone(), y.shallow_clone()]
}

/// The training step captured as a CUDA graph and replayed for every batch of the captured
/// shape (`Trainer::cuda_graphs(true)`; the examples' `--cuda-graphs`). One per model and
/// optimizer, kept for the whole run.
///
/// In a loop of one's own, [`step`](Self::step) runs zero_grad, forward, loss and backward
/// (on a GPU as a replay after the warm-up); the optimizer step follows as usual:
///
/// ```
/// use tch::nn::{self, Module};
/// use tch::{Device, Kind, Tensor};
/// use trainbook::train::{Optimizer, StepGraph};
/// let vs = nn::VarStore::new(Device::Cpu);
/// let lin = nn::linear(vs.root(), 4, 3, Default::default());
/// let mut opt = Optimizer::sgd(&vs, 0.1, 0.0);
/// let mut graph = StepGraph::new();
/// let x = Tensor::randn([8, 4], (Kind::Float, Device::Cpu));
/// let y = Tensor::zeros([8], (Kind::Int64, Device::Cpu));
/// let (_output, loss) = graph.step(Device::Cpu, (&x, &y), &mut opt, &mut |x, y| {
///     let output = lin.forward(x);
///     let loss = output.cross_entropy_for_logits(y);
///     loss.backward();
///     Ok((output, loss))
/// })?;
/// opt.step()?;
/// // On the CPU the step ran eagerly, and the graph says why.
/// assert!(loss.double_value(&[]) > 0.0);
/// assert!(graph.eager_reason().unwrap().contains("not on a CUDA GPU"));
/// # Ok::<(), trainbook::Error>(())
/// ```
///
/// `fit` and `train_epoch` take one through `Trainer::cuda_graphs(true)` and
/// [`EpochOptions::cuda_graph`](crate::train::EpochOptions::cuda_graph).
pub struct StepGraph {
    warmup: usize,
    state: State,
    replays: u64,
    eager_steps: u64,
}

enum State {
    Unchecked,
    Eager(String),
    Warming { graph: CudaGraph, done: usize },
    Captured(Box<Captured>),
}

/// What the capture left: the graph, its input buffers and outputs, and the gradients it writes.
struct Captured {
    graph: CudaGraph,
    /// The static input buffers: the images, the target, then any extra inputs.
    inputs: Vec<Tensor>,
    output: Tensor,
    loss: Tensor,
    params: Vec<Tensor>,
    grads: Vec<Tensor>,
    /// Which of the optimizer's parameters required gradients at the capture.
    trainable: Vec<bool>,
}

impl Default for StepGraph {
    fn default() -> Self {
        StepGraph::new()
    }
}

impl StepGraph {
    /// A step graph captured after [`DEFAULT_WARMUP_STEPS`] eager steps.
    pub fn new() -> StepGraph {
        StepGraph {
            warmup: DEFAULT_WARMUP_STEPS,
            state: State::Unchecked,
            replays: 0,
            eager_steps: 0,
        }
    }

    /// Eager warm-up steps before the capture (at least 1).
    pub fn warmup_steps(mut self, n: usize) -> StepGraph {
        self.warmup = n.max(1);
        self
    }

    /// Steps that ran as a replay of the graph so far (the capture's own step included).
    pub fn replays(&self) -> u64 {
        self.replays
    }

    /// Steps that ran eagerly so far: warm-up steps, batches of another shape, and every step
    /// when the graph cannot be used.
    pub fn eager_steps(&self) -> u64 {
        self.eager_steps
    }

    /// Why the step runs eagerly, once that is known (after the first step).
    pub fn eager_reason(&self) -> Option<&str> {
        match &self.state {
            State::Eager(why) => Some(why),
            _ => None,
        }
    }

    /// Whether the graph is captured.
    pub fn is_captured(&self) -> bool {
        matches!(self.state, State::Captured(_))
    }

    /// Why `device` rules the capture out, if it does (anomaly detection on, or not a CUDA GPU).
    pub(crate) fn device_blocker(device: Device) -> Option<String> {
        if super::is_anomaly_enabled().unwrap_or(false) {
            return Some("anomaly detection checks every backward function on the host".into());
        }
        (!matches!(device, Device::Cuda(_)))
            .then(|| format!("the model is on {device:?}, not on a CUDA GPU"))
    }

    /// One training step of a loop of one's own: gradients set to None, then `fwd_bwd` (the
    /// forward pass, the loss and the backward pass of the batch `(x, y)`, returning the
    /// model's output and the mean loss), run eagerly for the warm-up steps and batches of
    /// another shape, else as a replay of the captured graph. Returns the output and loss
    /// (the graph's own tensors when replayed: read or copy them before the next step); the
    /// gradients are in the parameters' `.grad` for the optimizer step that follows. Under DDP
    /// use [`step_with`](Self::step_with): a `Ddp` called inside `step` would run its
    /// exchanges inside the capture.
    pub fn step(
        &mut self,
        device: Device,
        (x, y): (&Tensor, &Tensor),
        optimizer: &mut Optimizer,
        fwd_bwd: &mut ImageStep<'_>,
    ) -> Result<(Tensor, Tensor)> {
        self.step_with(&SingleProcess, device, (x, y), optimizer, fwd_bwd)
    }

    /// [`step`](Self::step) under a [`Strategy`] (a [`Ddp`](crate::train::Ddp) of one's own),
    /// whose `pre_forward` and `run_backward` `fwd_bwd` calls: they exchange nothing during the
    /// capture, and the strategy's exchanges run around each replay (DDP: rank 0's buffers
    /// before, the gradients' all-reduce after). What the strategy rules out (DDP's
    /// find_unused_parameters, say) keeps the step eager, as on the CPU.
    pub fn step_with(
        &mut self,
        strategy: &dyn Strategy,
        device: Device,
        (x, y): (&Tensor, &Tensor),
        optimizer: &mut Optimizer,
        fwd_bwd: &mut ImageStep<'_>,
    ) -> Result<(Tensor, Tensor)> {
        let blocker = || strategy.cuda_graph_blocker().or_else(|| Self::device_blocker(device));
        self.check(device, blocker, false);
        let mut on_inputs = |t: &[Tensor]| fwd_bwd(&t[0], &t[1]);
        let inputs = inputs_of(x, y);
        match self.advance((device, strategy, false), &inputs, optimizer, &mut on_inputs)? {
            Some(out) => Ok(out),
            None => {
                optimizer.zero_grad();
                fwd_bwd(x, y)
            }
        }
    }

    /// [`step`](Self::step) for `train_epoch`: `Ok(None)` when the caller runs the step
    /// eagerly itself (`blocker` names why the epoch's settings rule the graph out, or the
    /// batch has another shape than the captured one). Said on the main rank: why the step is
    /// eager, and the capture (with `progress` on).
    pub(crate) fn train_step(
        &mut self,
        (device, strategy, progress): (Device, &dyn Strategy, bool),
        blocker: impl FnOnce() -> Option<String>,
        inputs: &[Tensor],
        optimizer: &mut Optimizer,
        fwd_bwd: &mut ForwardBackward<'_>,
    ) -> Result<Option<(Tensor, Tensor)>> {
        let main = strategy.is_main();
        self.check(device, blocker, main);
        self.advance((device, strategy, main && progress), inputs, optimizer, fwd_bwd)
    }

    /// On the first step: warm up, or run eagerly for good with the reason (said if `say`).
    fn check(&mut self, device: Device, blocker: impl FnOnce() -> Option<String>, say: bool) {
        if let State::Unchecked = self.state {
            let graph = match blocker() {
                Some(why) => Err(why),
                None => CudaGraph::new(device).map_err(|e| e.to_string()),
            };
            self.state = match graph {
                Ok(graph) => State::Warming { graph, done: 0 },
                Err(why) => Self::give_up(say, why),
            };
        }
    }

    /// The step on `inputs`: a warm-up step, the capture, a replay, or `None` (eager); the
    /// strategy's exchanges run around the capture and each replay, outside the graph.
    fn advance(
        &mut self,
        (device, strategy, say): (Device, &dyn Strategy, bool),
        inputs: &[Tensor],
        optimizer: &mut Optimizer,
        fwd_bwd: &mut ForwardBackward<'_>,
    ) -> Result<Option<(Tensor, Tensor)>> {
        let warmup = self.warmup;
        match &mut self.state {
            State::Unchecked | State::Eager(_) => {
                self.eager_steps += 1;
                Ok(None)
            }
            State::Warming { graph, done } if *done < warmup => {
                *done += 1;
                self.eager_steps += 1;
                optimizer.zero_grad();
                graph.on_side_stream(|| fwd_bwd(inputs))?.map(Some)
            }
            State::Warming { .. } => {
                self.capture((device, strategy, say), inputs, optimizer, fwd_bwd)
            }
            State::Captured(c) if c.trainable != trainable(optimizer) => {
                // What trains changed (a backbone unfrozen): warm up and capture again.
                self.state = State::Warming { graph: CudaGraph::new(device)?, done: 0 };
                self.advance((device, strategy, say), inputs, optimizer, fwd_bwd)
            }
            State::Captured(c) => {
                let same = |a: &Tensor, b: &Tensor| {
                    a.size() == b.size() && a.stride() == b.stride() && a.kind() == b.kind()
                };
                let fits = c.inputs.len() == inputs.len()
                    && c.inputs.iter().zip(inputs).all(|(a, b)| same(a, b));
                if !fits {
                    self.eager_steps += 1;
                    return Ok(None);
                }
                for (buffer, input) in c.inputs.iter_mut().zip(inputs) {
                    buffer.copy_(input);
                }
                c.replay(strategy)?;
                self.replays += 1;
                Ok(Some((c.output.shallow_clone(), c.loss.shallow_clone())))
            }
        }
    }

    /// Captures the step on this batch and replays it once (the capture runs nothing). A
    /// capture that fails makes the step eager for good, saying why; this batch then runs
    /// eagerly too.
    fn capture(
        &mut self,
        (device, strategy, say): (Device, &dyn Strategy, bool),
        inputs: &[Tensor],
        optimizer: &mut Optimizer,
        fwd_bwd: &mut ForwardBackward<'_>,
    ) -> Result<Option<(Tensor, Tensor)>> {
        let State::Warming { graph, .. } = std::mem::replace(&mut self.state, State::Unchecked)
        else {
            unreachable!("capture follows the warm-up")
        };
        let mut graph = graph;
        // As torch.cuda.graph's __enter__ (torch/cuda/graphs.py): the queued work done, the
        // allocator's unused cached blocks (the warm-up's) given back before the capture.
        if let Device::Cuda(index) = device {
            tch::Cuda::synchronize(index as i64);
            crate::cuda::empty_cache(device)?;
        }
        let buffers: Vec<Tensor> = inputs.iter().map(|t| t.detach().copy()).collect();
        optimizer.zero_grad();
        strategy.set_graph_capture(true);
        let captured = graph.capture(|| fwd_bwd(&buffers));
        strategy.set_graph_capture(false);
        match captured {
            Ok((output, loss)) => {
                let (params, grads): (Vec<Tensor>, Vec<Tensor>) = optimizer
                    .param_tensors()
                    .filter(|p| p.grad().defined())
                    .map(|p| (p.shallow_clone(), p.grad()))
                    .unzip();
                let (output, loss) = (output.detach(), loss.detach());
                let trainable = trainable(optimizer);
                let mut c =
                    Captured { graph, inputs: buffers, output, loss, params, grads, trainable };
                c.replay(strategy)?;
                if say {
                    println!(
                        "trainbook: CUDA graphs: the training step (forward, loss, backward) \
                         is captured for batches of {:?} after {} eager steps; the optimizer \
                         step runs after each replay",
                        c.inputs[0].size(),
                        self.warmup
                    );
                }
                let out = (c.output.shallow_clone(), c.loss.shallow_clone());
                self.state = State::Captured(Box::new(c));
                self.replays += 1;
                Ok(Some(out))
            }
            Err(e) => {
                self.state = Self::give_up(say, format!("the capture failed: {e}"));
                self.eager_steps += 1;
                Ok(None)
            }
        }
    }

    /// The eager state with `why`, said if `say`.
    fn give_up(say: bool, why: String) -> State {
        if say {
            println!("trainbook: CUDA graphs off, the training step runs eagerly: {why}");
        }
        State::Eager(why)
    }
}

/// Whether each of the optimizer's parameters requires a gradient.
fn trainable(optimizer: &Optimizer) -> Vec<bool> {
    optimizer.param_tensors().map(Tensor::requires_grad).collect()
}

impl Captured {
    /// The gradients the graph writes become the parameters' `.grad` again (an eager step or a
    /// `zero_grad` in between replaced them), then the graph runs between the strategy's
    /// exchanges (DDP: rank 0's buffers before, the gradients' all-reduce after).
    fn replay(&mut self, strategy: &dyn Strategy) -> Result<()> {
        let params: Vec<&Tensor> = self.params.iter().collect();
        let grads: Vec<&Tensor> = self.grads.iter().collect();
        set_grads(&params, &grads)?;
        strategy.before_graph_replay()?;
        {
            let _range = crate::train::phase_range(crate::train::phase::GRAPH_REPLAY);
            self.graph.replay()?;
        }
        strategy.after_graph_replay()
    }
}
