//! `Ddp`: data-parallel training like `torch.nn.parallel.DistributedDataParallel`.
//! - at wrap time every parameter and buffer is broadcast from rank 0;
//! - before each forward pass the buffers (BatchNorm running statistics) are broadcast from
//!   rank 0 (torch's `broadcast_buffers=True`);
//! - after each backward pass the gradients are averaged over the ranks in buckets: flattened
//!   in reverse parameter order into buckets of at most 25 MB (the first at most 1 MB), each
//!   divided by the world size and summed (Gloo has no average), all buckets in flight at once;
//! - [`Ddp::no_sync`] skips the gradient exchange for gradient accumulation.
use std::cell::Cell;

use tch::nn::VarStore;
use tch::{Kind, Tensor};

use super::Dist;
use crate::train::{named_parameters, RunningMetrics, StepHooks};
use crate::Result;

const BUCKET_BYTES: usize = 25 * 1024 * 1024;
const FIRST_BUCKET_BYTES: usize = 1024 * 1024;

pub struct Ddp<'a> {
    dist: &'a Dist,
    /// Trainable parameters in creation order.
    params: Vec<(String, Tensor)>,
    /// Everything else the model holds (BatchNorm running statistics), in name order.
    buffers: Vec<(String, Tensor)>,
    /// Indices into `params`, reverse order, grouped by size like torch's reducer.
    buckets: Vec<Vec<usize>>,
    sync: Cell<bool>,
}

impl<'a> Ddp<'a> {
    /// Wraps the model held by `vs`: makes every rank start from rank 0's weights.
    pub fn wrap(vs: &VarStore, dist: &'a Dist) -> Result<Ddp<'a>> {
        let params = named_parameters(vs);
        let mut buffers: Vec<(String, Tensor)> = vs.variables().into_iter().filter(|(n, _)| !params.iter().any(|(p, _)| p == n)).collect();
        buffers.sort_by(|a, b| a.0.cmp(&b.0));
        // torch's reducer: fill a bucket until it reaches its cap (1 MB for the first, 25 MB
        // after), walking the parameters in reverse order (roughly the order gradients appear).
        let mut buckets: Vec<Vec<usize>> = Vec::new();
        let (mut current, mut bytes) = (Vec::new(), 0);
        for i in (0..params.len()).rev() {
            current.push(i);
            bytes += params[i].1.numel() * params[i].1.kind().elt_size_in_bytes();
            let cap = if buckets.is_empty() { FIRST_BUCKET_BYTES } else { BUCKET_BYTES };
            if bytes >= cap {
                buckets.push(std::mem::take(&mut current));
                bytes = 0;
            }
        }
        if !current.is_empty() {
            buckets.push(current);
        }
        let ddp = Ddp { dist, params, buffers, buckets, sync: Cell::new(true) };
        tch::no_grad(|| -> Result<()> {
            for (_, t) in ddp.params.iter().chain(&ddp.buffers) {
                dist.broadcast(t, 0)?;
            }
            Ok(())
        })?;
        Ok(ddp)
    }

    pub fn dist(&self) -> &Dist {
        self.dist
    }

    /// Parameter names per gradient bucket, in the order they are exchanged.
    pub fn bucket_names(&self) -> Vec<Vec<String>> {
        self.buckets.iter().map(|b| b.iter().map(|&i| self.params[i].0.clone()).collect()).collect()
    }

    /// Averages the gradients over all ranks (what runs after backward).
    pub fn sync_gradients(&self) -> Result<()> {
        let world = self.dist.world_size();
        let Some(pg) = self.dist.process_group().filter(|_| world > 1) else {
            return Ok(());
        };
        tch::no_grad(|| -> Result<()> {
            let mut in_flight = Vec::new();
            for bucket in &self.buckets {
                let grads: Vec<Tensor> = bucket.iter().map(|&i| self.params[i].1.grad()).filter(Tensor::defined).collect();
                if grads.is_empty() {
                    continue;
                }
                let flat = Tensor::cat(&grads.iter().map(|g| g.flatten(0, -1)).collect::<Vec<_>>(), 0) / world as f64;
                let work = pg.all_reduce_sum_async(&flat)?;
                in_flight.push((grads, flat, work));
            }
            for (grads, flat, work) in in_flight {
                work.wait()?;
                let mut offset = 0;
                for mut g in grads {
                    let n = g.numel() as i64;
                    g.copy_(&flat.narrow(0, offset, n).view_as(&g));
                    offset += n;
                }
            }
            Ok(())
        })
    }

    /// Overwrites every buffer with rank 0's (what runs before forward).
    pub fn broadcast_buffers(&self) -> Result<()> {
        if self.dist.world_size() == 1 {
            return Ok(());
        }
        tch::no_grad(|| self.buffers.iter().try_for_each(|(_, t)| self.dist.broadcast(t, 0)))
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

impl StepHooks for Ddp<'_> {
    fn before_forward(&self) -> Result<()> {
        self.broadcast_buffers()
    }
    fn after_backward(&self) -> Result<()> {
        if self.sync.get() { self.sync_gradients() } else { Ok(()) }
    }
    fn reduce_metrics(&self, m: RunningMetrics) -> Result<RunningMetrics> {
        let s = self.dist.sum_f64(&[m.loss_sum, m.correct as f64, m.count as f64])?;
        Ok(RunningMetrics { loss_sum: s[0], correct: s[1].round() as u64, count: s[2].round() as u64 })
    }
    fn gather_labels(&self, predicted: Tensor, labels: Tensor) -> Result<(Tensor, Tensor)> {
        let p = self.dist.all_gather_varlen(&predicted.to_kind(Kind::Int64))?;
        let l = self.dist.all_gather_varlen(&labels.to_kind(Kind::Int64))?;
        Ok((p, l))
    }
    fn world_size(&self) -> usize {
        self.dist.world_size()
    }
    fn is_main(&self) -> bool {
        self.dist.is_main()
    }
}
