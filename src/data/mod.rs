//! Data sets and loading with torch/torchvision semantics: MNIST (IDX files), `ImageFolder`,
//! Tiny ImageNet, Stanford Dogs' folders, `Subset`/`random_split`, relabelling by class name,
//! float targets from labels (`TargetTransform`), the `DataLoader`, the `DistributedSampler`
//! and the `SubsetRandomSampler`; samples and batches as structs of one's own
//! ([`TensorFields`], [`tensor_fields!`](crate::tensor_fields)).
mod dataset;
mod datasets;
mod decode;
mod loading;
#[doc(hidden)]
pub mod tensor_fields;

pub use crate::rng::{randperm, TorchGenerator};
pub use dataset::Dataset;
pub use datasets::image_folder::{readable_class_name, ImageFolder, IMG_EXTENSIONS};
pub use datasets::mnist::{Mnist, MNIST_CLASSES};
pub use datasets::relabel::{read_class_to_idx, Relabel};
pub use datasets::scripts::{
    ensure_designsafe, ensure_mnist, ensure_stanford_dogs, ensure_tiny_imagenet,
    ensure_tiny_imagenet_standin,
};
pub use datasets::subset::{random_split, random_split_with, SplitLengths, Subset};
pub use datasets::target_transform::{LabelToTarget, TargetTransform};
pub use datasets::tensor_dataset::TensorDataset;
pub use datasets::tiny_imagenet::{Split, TinyImageNet};
pub use decode::rgb::{decode_rgb, load_rgb};
pub use loading::batch::Batch;
pub use loading::batches::Batches;
pub use loading::loader::DataLoader;
pub use loading::order::{RandomSampler, Sampler, SequentialSampler};
pub use loading::ra_sampler::RASampler;
pub use loading::sampler::DistributedSampler;
pub use loading::subset_sampler::SubsetRandomSampler;
pub use loading::weighted_sampler::WeightedRandomSampler;
pub use tensor_fields::TensorFields;
