//! Data sets and loading: MNIST (IDX files), ImageFolder, the DataLoader and the
//! DistributedSampler, with torch/torchvision semantics.
//!
//! Filled by the data issue; nothing here yet.
