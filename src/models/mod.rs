//! Models with torchvision parameter names: the course's MNIST CNN and ResNet34 with a
//! replaceable classification head.
//!
//! Filled by the models/training issue; nothing here yet.
