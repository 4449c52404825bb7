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
//! It brings the types of the course's steps (data, transforms, models, training, checkpoints,
//! figures, the process group) and tch's `Tensor`, `Device`, `Kind`, `VarStore`, `ModuleT`.
//! Less common items stay in their modules (`trainbook::dist::ProcessGroup`, ...).
pub use crate::checkpoint::{Checkpointer, Policy};
pub use crate::compose;
pub use crate::data::{
    ensure_designsafe, ensure_mnist, ensure_stanford_dogs, ensure_tiny_imagenet,
    ensure_tiny_imagenet_standin, random_split, readable_class_name, Batch, DataLoader, Dataset,
    DistributedSampler, ImageFolder, Mnist, Relabel, Subset, SubsetRandomSampler, TargetTransform,
    TensorDataset, TinyImageNet, MNIST_CLASSES,
};
pub use crate::dist::{Backend, Dist, DistOptions};
pub use crate::figures::{
    class_gallery, confusion_matrix_plot, image_grid, loss_accuracy_curves, Figure,
};
pub use crate::fit::{EarlyStopping, FitConfig, FitReport, LiveCurves, Trainer};
pub use crate::launch::{spawn, spawn_with, SpawnOptions};
pub use crate::models::{
    freeze_backbone, load_pretrained, load_safetensors, load_weights, load_weights_arg, resnet,
    resnet18, resnet18_classifier, resnet34, resnet34_classifier, resnet50, resnet50_classifier,
    save_safetensors, to_channels_last, Head, HeadKind, MnistNet, ResNet, Weights,
};
pub use crate::train::{
    evaluate, history_table, read_records, train_epoch, Anneal, BCEWithLogitsLoss, Cadence,
    ChainedScheduler, ConfusionMatrix, CosineAnnealingLR, CosineAnnealingWarmRestarts,
    CrossEntropyLoss, CyclicLR, EpochOptions, EpochRecord, EpochSummary, ExponentialLR, HuberLoss,
    L1Loss, LambdaLR, LinearLR, Loss, LrSchedule, MSELoss, Mode, Monitor, MultiStepLR,
    MultiplicativeLR, OneCycleLR, Optimizer, ParamGroup, PolynomialLR, Precision, Prediction,
    ReduceLROnPlateau, SequentialLR, SmoothL1Loss, StepLR, Task,
};
pub use crate::train::{predict, predictions};
pub use crate::train::{Ddp, DdpOptions};
pub use crate::train::{StepBatch, StepOutput, TrainStep};
pub use crate::transforms::{
    aug_rng, AugMix, AutoAugment, CenterCrop, Compose, Normalize, RandAugment, RandomErasing,
    RandomHorizontalFlip, RandomResizedCrop, Resize, ToTensor, TrivialAugmentWide,
};
pub use crate::{Error, Result, WithPath};
pub use tch::nn::{Module, ModuleT, VarStore};
pub use tch::{Device, Kind, Tensor};
