//! Data sets and loading with torch/torchvision semantics: MNIST (IDX files), `ImageFolder`,
//! the `DataLoader` and the `DistributedSampler`.
mod dataset;
mod decode;
mod image_folder;
mod loader;
mod mnist;
mod sampler;
mod scripts;
mod tensor_dataset;
mod torch_rng;

pub use dataset::Dataset;
pub use decode::{decode_rgb, load_rgb};
pub use image_folder::{ImageFolder, IMG_EXTENSIONS};
pub use loader::{Batch, Batches, DataLoader, Order};
pub use mnist::{Mnist, MNIST_CLASSES};
pub use sampler::DistributedSampler;
pub use scripts::{ensure_designsafe, ensure_mnist};
pub use tensor_dataset::TensorDataset;
pub use torch_rng::{randperm, TorchGenerator};
