//! Image transforms with torchvision's names, defaults and numerics (Compose, Resize,
//! CenterCrop, RandomResizedCrop, RandomHorizontalFlip, AutoAugment, ToTensor, Normalize).
//!
//! Filled by the data issue; nothing here yet.
