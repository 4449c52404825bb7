//! Models with PyTorch/torchvision parameter names: the course's MNIST CNN and torchvision's
//! ResNet family (ResNet18/34/50/101/152, ResNeXt, Wide ResNet) with a replaceable classification head,
//! MobileNetV2, MobileNetV3 (Large, Small), EfficientNet (B0 to B7, V2 S/M/L), ConvNeXt (Tiny to
//! Large), RegNet (X and Y, 400MF to 128GF), Vision Transformer (B/16 to H/14), DenseNet (121,
//! 161, 169, 201), VGG (11 to 19, with and without BatchNorm), AlexNet, SqueezeNet (1.0, 1.1),
//! ShuffleNet V2 (x0.5 to x2.0) and MNASNet (0.5 to 1.3), plus
//! weights that interchange with PyTorch (safetensors here; `torch.save` files in
//! [`crate::torch_file`]), and models defined in PyTorch as TorchScript (`script.rs`).
mod alexnet;
mod batch_norm;
mod conv_norm_act;
mod convnext;
mod densenet;
mod efficientnet;
mod layers;
mod legacy_names;
mod memory_format;
mod mnasnet;
mod mnist_net;
mod mobilenet_v2;
mod mobilenet_v3;
mod pretrained;
mod pretrained_files;
mod regnet;
mod resnet;
mod resnet_blocks;
mod script;
mod shufflenet;
mod squeezenet;
mod summary;
mod vgg;
mod vit;
mod weights;

pub use alexnet::{alexnet, AlexNet};
pub(crate) use batch_norm::with_momentum;
pub use batch_norm::{BatchNorm2d, SyncSlot};
pub use convnext::{convnext, ConvNeXt};
pub use densenet::{densenet, DenseNet, DENSENET_NAMES};
pub use efficientnet::{efficientnet, EfficientNet, EFFICIENTNET_NAMES, EFFICIENTNET_V2_NAMES};
pub use layers::{conv2d, linear};
pub use legacy_names::torchvision_current_name;
pub use memory_format::{channels_last, is_channels_last, to_channels_last};
pub use mnasnet::{mnasnet, MnasNet, MNASNET_NAMES};
pub use mnist_net::MnistNet;
pub use mobilenet_v2::{mobilenet_v2, MobileNetV2};
pub use mobilenet_v3::{mobilenet_v3, MobileNetV3};
pub use pretrained::{
    load_pretrained, load_torchvision_file, load_weights_arg, Weights, PRETRAINED,
};
pub use regnet::{regnet, RegNet, REGNET_NAMES};
pub use resnet::{
    freeze_backbone, resnet, resnet18, resnet18_classifier, resnet34, resnet34_classifier,
    resnet50, resnet50_classifier, resnet_by_name, Head, HeadKind, ResNet, RESNET_DEPTHS,
    RESNET_NAMES,
};
pub use script::{export_traced, ScriptModule};
pub use shufflenet::{shufflenet_v2, ShuffleNetV2, SHUFFLENET_V2_NAMES};
pub use squeezenet::{squeezenet, SqueezeNet};
pub use summary::{summary, ModelSummary, ModuleRow};
pub use vgg::{vgg, Vgg, VGG_NAMES};
pub use vit::{vision_transformer, vit, VisionTransformer, VitConfig, VIT_NAMES};
pub use weights::{
    from_safetensors_bytes, load_safetensors, load_state_dict, load_state_dict_file, load_weights,
    named_parameters, save_safetensors, save_state_dict, save_tensors_file, state_dict,
    tensor_from_view, to_safetensors_bytes, LoadReport,
};
