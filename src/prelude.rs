//! Everything a notebook or a training program usually needs, in one import:
//!
//! ```
//! use trainbook::prelude::*;
//!
//! # fn main() -> trainbook::Result<()> {
//! let dist = Dist::single(Device::Cpu);
//! let vs = VarStore::new(dist.device());
//! let net = MnistNet::new(&vs.root());
//! let logits = net.forward_t(&Tensor::zeros([2, 1, 28, 28], (Kind::Float, Device::Cpu)), false);
//! assert_eq!(logits.size(), [2, 10]);
//! # Ok(()) }
//! ```
//!
//! It brings what the course's notebooks use (data, transforms, models, training, checkpoints,
//! figures, the process group), the traits whose methods they call (`Dataset`, `Loss`,
//! `LrSchedule`, `WithPath`, tch's `Module` and `ModuleT`), the crate's `Error` and `Result`,
//! and tch's `Tensor`, `Device`, `Kind` and `VarStore`: 70 names. Everything else is imported
//! by its path (`trainbook::train::StepLR`, `trainbook::fit::EarlyStopping`, ...); the
//! examples in `examples/` show where each lives.
pub use crate::checkpoint::{Checkpointer, Policy};
pub use crate::compose;
pub use crate::data::{
    ensure_designsafe, ensure_mnist, ensure_stanford_dogs, ensure_tiny_imagenet,
    ensure_tiny_imagenet_standin, random_split, readable_class_name, DataLoader, Dataset,
    DistributedSampler, ImageFolder, Mnist, Relabel, SubsetRandomSampler, TinyImageNet,
    MNIST_CLASSES,
};
pub use crate::dist::{Backend, Dist};
pub use crate::figures::{class_gallery, confusion_matrix_plot, image_grid, loss_accuracy_curves};
pub use crate::fit::{FitReport, Trainer};
pub use crate::launch::spawn;
pub use crate::models::{
    freeze_backbone, load_safetensors, resnet18, resnet34, resnet34_classifier, resnet50,
    save_safetensors, HeadKind, MnistNet,
};
pub use crate::train::{
    evaluate, history_table, predict, predictions, read_records, train_epoch, CrossEntropyLoss,
    Ddp, EpochOptions, EpochRecord, EpochSummary, Loss, LrSchedule, Mode, Optimizer,
    ReduceLROnPlateau,
};
pub use crate::transforms::{
    aug_rng, AutoAugment, CenterCrop, Normalize, RandomHorizontalFlip, RandomResizedCrop, Resize,
    ToTensor,
};
pub use crate::{Error, Result, WithPath};
pub use tch::nn::{Module, ModuleT, VarStore};
pub use tch::{Device, Kind, Tensor};
