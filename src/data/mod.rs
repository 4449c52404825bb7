//! Data sets and loading with torch/torchvision semantics: MNIST (IDX files), `ImageFolder`,
//! Tiny ImageNet, Stanford Dogs' folders, `Subset`/`random_split`, relabelling by class name,
//! float targets from labels (`TargetTransform`), the `DataLoader`, the `DistributedSampler`
//! and the `SubsetRandomSampler`.
mod batch_assembly;
mod batches;
mod dataset;
mod decode;
mod image_folder;
mod jpeg;
mod loader;
mod mnist;
mod relabel;
mod sampler;
mod scripts;
mod subset;
mod subset_sampler;
mod target_transform;
mod tensor_dataset;
mod tiny_imagenet;
mod torch_rng;

pub use batches::Batches;
pub use dataset::Dataset;
pub use decode::{decode_rgb, load_rgb};
pub use image_folder::{readable_class_name, ImageFolder, IMG_EXTENSIONS};
pub use loader::{Batch, DataLoader, Order};
pub use mnist::{Mnist, MNIST_CLASSES};
pub use relabel::{read_class_to_idx, Relabel};
pub use sampler::DistributedSampler;
pub use scripts::{
    ensure_designsafe, ensure_mnist, ensure_stanford_dogs, ensure_tiny_imagenet,
    ensure_tiny_imagenet_standin,
};
pub use subset::{random_split, random_split_with, SplitLengths, Subset};
pub use subset_sampler::SubsetRandomSampler;
pub use target_transform::{LabelToTarget, TargetTransform};
pub use tensor_dataset::TensorDataset;
pub use tiny_imagenet::{Split, TinyImageNet};
pub use torch_rng::{randperm, TorchGenerator};
