//! Loading: the DataLoader (batches assembled by worker threads, pinned and delivered), its
//! samplers (distributed, subset, repeated augmentation, weighted) and torch's own random permutation.
pub(crate) mod batch;
pub(crate) mod batch_assembly;
pub(crate) mod batches;
pub(crate) mod extra_inputs;
pub(crate) mod loader;
pub(crate) mod order;
pub(crate) mod ra_sampler;
pub(crate) mod sampler;
pub(crate) mod subset_sampler;
pub(crate) mod weighted_sampler;
