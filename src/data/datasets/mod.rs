//! Data sets with torchvision's names and layouts: MNIST, ImageFolder, Tiny ImageNet, tensors,
//! relabelled and subset views, target transforms, and the scripts that fetch the course's data.
pub(crate) mod image_folder;
pub(crate) mod mnist;
pub(crate) mod relabel;
pub(crate) mod scripts;
pub(crate) mod subset;
pub(crate) mod target_transform;
pub(crate) mod tensor_dataset;
pub(crate) mod tiny_imagenet;
