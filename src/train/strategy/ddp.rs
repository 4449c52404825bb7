//! `Ddp`: data-parallel training that is torch's `DistributedDataParallel`, driven through
//! c10d's own `Reducer` (the binding in `dist/reducer.rs`):
//! - at wrap time the ranks check that they hold the same parameter shapes, then every
//!   parameter and buffer is broadcast from rank 0 in coalesced chunks;
//! - before each forward pass the buffers (BatchNorm running statistics) are broadcast from
//!   rank 0 in one coalesced collective (torch's `broadcast_buffers=True`), and after the
//!   first iteration the gradient buckets are rebuilt in the order gradients arrived;
//! - during the backward pass each bucket (1 MB first, 25 MB after) is all-reduced as soon as
//!   its gradients are ready, overlapping communication with the rest of the backward pass;
//! - [`Ddp::no_sync`] (and `accumulate(k)` in the training loop) skips the exchange for
//!   gradient accumulation;
//! - with the step as a CUDA graph, the capture exchanges nothing, and each replay is followed
//!   by the Reducer's averaging done by hand over its own buckets (`Reducer::average_gradients`)
//!   and preceded by the buffers' broadcast.
use std::cell::Cell;

use tch::nn::VarStore;
use tch::{Kind, Tensor};

use super::Strategy;
use crate::dist::{CommHook, Dist, Reducer, ReducerConfig};
use crate::models::named_parameters;
use crate::train::RunningMetrics;
use crate::{Error, Result};

const MB: f64 = 1024.0 * 1024.0;
/// torch DDP's `broadcast_bucket_size` for module states and buffers.
const BROADCAST_BUCKET_BYTES: usize = 250 * 1024 * 1024;
/// torch DDP's `dist._DEFAULT_FIRST_BUCKET_BYTES`.
const FIRST_BUCKET_BYTES: usize = 1024 * 1024;

/// Options of [`Ddp::wrap_with`], named and defaulted as torch's `DistributedDataParallel`.
#[derive(Clone, Debug, PartialEq)]
pub struct DdpOptions {
    /// Search the graph from the loss for parameters that got no gradient this step and mark
    /// them ready (needed when some parameters are skipped in some steps). Default false.
    pub find_unused_parameters: bool,
    /// Make each `.grad` a view into its communication bucket (saves a copy and memory).
    /// Default false.
    pub gradient_as_bucket_view: bool,
    /// Gradient bucket cap in MiB. `None`: 25 MiB, with a 1 MiB first bucket (torch's default);
    /// `Some(x)`: every bucket, the first included, up to `x` MiB.
    pub bucket_cap_mb: Option<f64>,
    /// Broadcast rank 0's buffers at wrap time and before every synchronised forward pass.
    /// Default true.
    pub broadcast_buffers: bool,
    /// Promise that the set of used parameters and the order of their gradients are the same
    /// every step; the Reducer records them in the first step (exchanging all buckets at its
    /// end) and then reduces without searching the graph. Default false.
    pub static_graph: bool,
    /// How gradient buckets are exchanged. Default plain all-reduce.
    pub comm_hook: CommHook,
}

impl Default for DdpOptions {
    fn default() -> Self {
        DdpOptions {
            find_unused_parameters: false,
            gradient_as_bucket_view: false,
            bucket_cap_mb: None,
            broadcast_buffers: true,
            static_graph: false,
            comm_hook: CommHook::AllReduce,
        }
    }
}

/// A model held by a `VarStore`, wrapped for data-parallel training over `dist`'s group:
/// torch's `DistributedDataParallel(model)`. Call [`before_forward`](Self::before_forward)
/// before each forward pass and [`backward`](Self::backward) instead of `loss.backward()`
/// (or hand it to `train_epoch` as its [`Strategy`]). In a world of one it exchanges nothing.
///
/// # Example
///
/// ```no_run
/// # fn main() -> trainbook::Result<()> {
/// use tch::nn::{ModuleT, VarStore};
/// use trainbook::dist::Dist;
/// use trainbook::train::Ddp;
/// use trainbook::models::MnistNet;
/// use trainbook::train::{CrossEntropyLoss, Optimizer};
/// let dist = Dist::init()?;
/// let vs = VarStore::new(dist.device());
/// let net = MnistNet::new(&vs.root());
/// let ddp = Ddp::wrap(&vs, &dist)?; // every rank now holds rank 0's weights
/// let mut opt = Optimizer::adam(&vs, 1e-3);
/// let x = tch::Tensor::randn([8, 1, 28, 28], (tch::Kind::Float, dist.device()));
/// let y = tch::Tensor::zeros([8], (tch::Kind::Int64, dist.device()));
/// ddp.before_forward()?;
/// let loss = CrossEntropyLoss::new().mean(&net.forward_t(&x, true), &y);
/// opt.zero_grad();
/// ddp.backward(&loss)?; // gradients averaged over the ranks while backward runs
/// opt.step()?;
/// # Ok(()) }
/// ```
pub struct Ddp<'a> {
    dist: &'a Dist,
    opts: DdpOptions,
    /// Buffers in torch's module order (BatchNorm running statistics).
    buffers: Vec<(String, Tensor)>,
    /// `None` in a world of one: there is nothing to exchange.
    reducer: Option<Reducer>,
    /// torch's `require_backward_grad_sync` (false inside `no_sync`).
    sync: Cell<bool>,
    /// torch's `require_forward_param_sync`: buffers are broadcast only after a synced step.
    forward_sync: Cell<bool>,
    /// Set by `before_forward`, cleared by `backward`: catches a backward without a forward.
    armed: Cell<bool>,
    /// static_graph: whether the first synchronised backward pass has run its delayed exchange.
    static_graph_recorded: Cell<bool>,
    /// A CUDA graph's capture: forward and backward exchange nothing (see `Strategy`).
    graph_capture: Cell<bool>,
}

/// Buffers (non-trainable variables) in the order torch's `module.named_buffers()` yields
/// them: grouped by module in the order the modules' parameters were created, and by name
/// within a module (`running_mean` before `running_var`). Buffers of modules without
/// parameters follow, by name.
fn buffers_in_module_order(vs: &VarStore, params: &[(String, Tensor)]) -> Vec<(String, Tensor)> {
    let module = |name: &str| name.rsplit_once('.').map_or(String::new(), |(m, _)| m.to_string());
    let mut order: Vec<String> = Vec::new();
    for (name, _) in params {
        let m = module(name);
        if !order.contains(&m) {
            order.push(m);
        }
    }
    let mut buffers: Vec<(String, Tensor)> =
        vs.variables().into_iter().filter(|(n, _)| !params.iter().any(|(p, _)| p == n)).collect();
    buffers.sort_by_key(|(n, _)| {
        (order.iter().position(|m| *m == module(n)).unwrap_or(usize::MAX), n.clone())
    });
    buffers
}

impl<'a> Ddp<'a> {
    /// Wraps the model held by `vs` with torch's default options: makes every rank start from
    /// rank 0's weights and buffers, and hooks the parameters for gradient averaging.
    /// Create the optimizer on `vs` as usual; wrap before the first step.
    ///
    /// Errors: [`Error::Dist`] when the ranks hold different parameter lists (count, shapes)
    /// or a collective fails; [`Error::InvalidArgument`] when the model has no trainable
    /// parameter (in a group), or for `spawn`ed thread ranks sharing a GPU
    /// ([`Dist::gpu_shared_by_threads`]: DDP would deadlock in libtorch's autograd engine).
    pub fn wrap(vs: &VarStore, dist: &'a Dist) -> Result<Ddp<'a>> {
        Ddp::wrap_with(vs, dist, DdpOptions::default())
    }

    /// [`Ddp::wrap`] with explicit options (errors as `wrap`, and
    /// [`Error::InvalidArgument`] for a `bucket_cap_mb` that is not a positive number).
    pub fn wrap_with(vs: &VarStore, dist: &'a Dist, opts: DdpOptions) -> Result<Ddp<'a>> {
        if let Some(mb) = opts.bucket_cap_mb.filter(|mb| !(*mb > 0.0 && mb.is_finite())) {
            return Err(Error::InvalidArgument(format!(
                "DdpOptions::bucket_cap_mb must be a positive number of MiB, not {mb}"
            )));
        }
        if dist.gpu_shared_by_threads() && dist.world_size() > 1 {
            return Err(Error::InvalidArgument(format!(
                "Ddp::wrap: thread ranks sharing a GPU cannot train with DDP (rank {} shares {:?} \
                 with other threads of this process): libtorch runs every backward pass of a GPU \
                 on one autograd thread, where DDP's wait for the other ranks' gradients would \
                 block theirs forever. Run ranks sharing a GPU as processes (torchrun \
                 --nproc-per-node=N, which Dist::init puts on Gloo), or give each rank its own GPU",
                dist.rank(),
                dist.device()
            )));
        }
        let all_params = named_parameters(vs);
        let buffers = buffers_in_module_order(vs, &all_params);
        let trainable: Vec<(String, Tensor)> = all_params
            .iter()
            .filter(|(_, t)| t.requires_grad())
            .map(|(n, t)| (n.clone(), t.shallow_clone()))
            .collect();
        let mut reducer = None;
        if let Some(pg) = dist.process_group().filter(|_| dist.world_size() > 1) {
            if trainable.is_empty() {
                return Err(Error::InvalidArgument(
                    "Ddp::wrap: the model has no parameter that requires a gradient".into(),
                ));
            }
            let tensors: Vec<Tensor> = all_params.iter().map(|(_, t)| t.shallow_clone()).collect();
            pg.verify_params_across_processes(&tensors)?;
            let mut states: Vec<Tensor> = all_params.iter().map(|(_, t)| t.detach()).collect();
            if opts.broadcast_buffers {
                states.extend(buffers.iter().map(|(_, t)| t.detach()));
            }
            pg.broadcast_coalesced(&states, BROADCAST_BUCKET_BYTES, 0)?;
            let (bucket_bytes, first_bucket_bytes) = match opts.bucket_cap_mb {
                None => (25 * 1024 * 1024, FIRST_BUCKET_BYTES),
                Some(mb) => ((mb * MB) as usize, (mb * MB) as usize),
            };
            let cfg = ReducerConfig {
                bucket_bytes,
                first_bucket_bytes,
                find_unused_parameters: opts.find_unused_parameters,
                gradient_as_bucket_view: opts.gradient_as_bucket_view,
                static_graph: opts.static_graph,
                comm_hook: opts.comm_hook,
            };
            reducer = Some(Reducer::new(pg, &trainable, &cfg)?);
        }
        Ok(Ddp {
            dist,
            opts,
            buffers,
            reducer,
            sync: Cell::new(true),
            forward_sync: Cell::new(true),
            armed: Cell::new(false),
            static_graph_recorded: Cell::new(false),
            graph_capture: Cell::new(false),
        })
    }

    /// The group this model is trained over.
    pub fn dist(&self) -> &Dist {
        self.dist
    }

    /// The options the model was wrapped with.
    pub fn options(&self) -> &DdpOptions {
        &self.opts
    }

    /// Parameter names per gradient bucket, in the order the Reducer reduces them (empty in a
    /// world of one). One bucket at first; rebuilt after the first iteration.
    pub fn bucket_names(&self) -> Result<Vec<Vec<String>>> {
        let Some(r) = &self.reducer else { return Ok(Vec::new()) };
        Ok(r.buckets()?
            .into_iter()
            .map(|b| b.into_iter().map(|i| r.names()[i].clone()).collect())
            .collect())
    }

    /// What runs before the forward pass (torch's `DDP._pre_forward`): starts the iteration,
    /// rebuilds the buckets once, and broadcasts rank 0's buffers.
    pub fn before_forward(&self) -> Result<()> {
        let sync = self.sync.get();
        if let Some(r) = &self.reducer {
            r.prepare_for_forward(sync)?;
        }
        if self.forward_sync.get() {
            self.broadcast_buffers()?;
        }
        self.armed.set(true);
        Ok(())
    }

    /// Rank 0's buffers to every rank, in one coalesced collective (with `broadcast_buffers`,
    /// in a group).
    fn broadcast_buffers(&self) -> Result<()> {
        if self.reducer.is_none() || !self.opts.broadcast_buffers || self.buffers.is_empty() {
            return Ok(());
        }
        let buffers: Vec<Tensor> = self.buffers.iter().map(|(_, t)| t.detach()).collect();
        self.dist
            .process_group()
            .map_or(Ok(()), |pg| pg.broadcast_coalesced(&buffers, BROADCAST_BUCKET_BYTES, 0))
    }

    /// Runs the backward pass of `loss`; unless inside [`Ddp::no_sync`], the gradients are
    /// averaged over the ranks bucket by bucket while it runs. A failed exchange (a peer gone,
    /// a timeout) is an error naming the all-reduce.
    pub fn backward(&self, loss: &Tensor) -> Result<()> {
        if !self.armed.replace(false) {
            return Err(Error::InvalidArgument(
                "Ddp::backward without Ddp::before_forward before the forward pass".into(),
            ));
        }
        let sync = self.sync.get();
        if let (Some(r), true) = (&self.reducer, sync) {
            let search = self.opts.find_unused_parameters && !self.opts.static_graph;
            let outputs = if search { vec![loss.shallow_clone()] } else { Vec::new() };
            r.prepare_for_backward(&outputs)?;
        }
        self.forward_sync.set(sync);
        // Backward waits inside for the other ranks' gradients (the Reducer's all-reduce).
        crate::rng::blocking(|| loss.f_backward()).map_err(|e| match e {
            tch::TchError::Torch(message) if self.reducer.is_some() => {
                Error::Dist { op: "allreduce (DDP backward)".into(), message }
            }
            other => Error::Torch(other),
        })?;
        match &self.reducer {
            Some(r)
                if sync && self.opts.static_graph && !self.static_graph_recorded.replace(true) =>
            {
                r.delay_all_reduce()
            }
            _ => Ok(()),
        }
    }

    /// Runs `f` (forward and backward passes) without exchanging gradients, so they accumulate
    /// locally; the next backward outside `no_sync` exchanges the sum.
    pub fn no_sync<R>(&self, f: impl FnOnce() -> R) -> R {
        let before = self.sync.replace(false);
        let out = f();
        self.sync.set(before);
        out
    }
}

impl Strategy for Ddp<'_> {
    fn pre_forward(&self, sync: bool) -> Result<()> {
        if self.graph_capture.get() {
            self.armed.set(true);
            return Ok(());
        }
        self.sync.set(sync);
        self.before_forward()
    }
    fn run_backward(&self, loss: &Tensor, sync: bool) -> Result<()> {
        if self.graph_capture.get() {
            // The Reducer's hooks fire but do nothing: no backward pass is expected.
            self.armed.set(false);
            return Ok(loss.f_backward()?);
        }
        self.sync.set(sync);
        let out = self.backward(loss);
        self.sync.set(true);
        out
    }
    fn reduce_metrics(&self, m: RunningMetrics) -> Result<RunningMetrics> {
        m.sum_over(self.dist)
    }
    fn gather_labels(&self, predicted: Tensor, labels: Tensor) -> Result<(Tensor, Tensor)> {
        let p = self.dist.all_gather_varlen(&predicted.to_kind(Kind::Int64))?;
        let l = self.dist.all_gather_varlen(&labels.to_kind(Kind::Int64))?;
        Ok((p, l))
    }
    fn sum_f64s(&self, values: Vec<f64>) -> Result<Vec<f64>> {
        self.dist.sum_f64(&values)
    }
    fn gather_f64(&self, x: f64) -> Result<Vec<f64>> {
        // Each rank fills its own slot; the sum over ranks is then everyone's value.
        let mut slots = vec![0.0; self.dist.world_size()];
        slots[self.dist.rank()] = x;
        self.dist.sum_f64(&slots)
    }
    fn cuda_graph_blocker(&self) -> Option<String> {
        // In a world of one there is no reducer: the backward pass is a plain one.
        self.reducer.as_ref()?;
        if self.opts.find_unused_parameters {
            return Some("DDP's find_unused_parameters searches each step's graph".into());
        }
        (self.opts.comm_hook != CommHook::AllReduce).then(|| {
            format!("DDP's {:?} communication hook is not run after a replay", self.opts.comm_hook)
        })
    }
    fn set_graph_capture(&self, capturing: bool) {
        self.graph_capture.set(capturing);
    }
    fn before_graph_replay(&self) -> Result<()> {
        self.broadcast_buffers()
    }
    fn after_graph_replay(&self) -> Result<()> {
        match (&self.reducer, self.dist.process_group()) {
            (Some(r), Some(pg)) => {
                let _range = crate::train::phase_range(crate::train::phase::ALL_REDUCE);
                r.average_gradients(pg)
            }
            _ => Ok(()),
        }
    }
    fn world_size(&self) -> usize {
        self.dist.world_size()
    }
    fn is_main(&self) -> bool {
        self.dist.is_main()
    }
}
