//! torchvision's pretrained weights by name: `Weights::ImageNet1kV1` is
//! `ResNet34_Weights.IMAGENET1K_V1`, the same file from the same URL, found in (or downloaded
//! into) torch.hub's cache that PyTorch shares ([`crate::hub`]), then loaded with the checks of
//! [`load_state_dict`](super::load_state_dict).
use std::path::{Path, PathBuf};
use std::str::FromStr;

use tch::nn::VarStore;

use super::LoadReport;
use crate::{Error, Result, WithPath};

/// A torchvision weights name (`<Model>_Weights.<NAME>`), without the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Weights {
    /// `IMAGENET1K_V1`: the original ImageNet training of each network.
    ImageNet1kV1,
    /// `IMAGENET1K_V2`: torchvision's newer recipe (ResNet50, 101 and 152, ResNeXt50 32x4d and
    /// 101 32x8d, the Wide ResNets, MobileNetV2, MobileNetV3-Large, the RegNets); their
    /// evaluation transform resizes to 232 before the 224 centre crop.
    ImageNet1kV2,
    /// `DEFAULT`: the best weights torchvision has for the model (V2 where it exists, else V1).
    Default,
}

/// Every pretrained file known here: model, weights, URL (torchvision 0.28's, with the
/// SHA-256 prefix in the file name).
pub const PRETRAINED: [(&str, Weights, &str); 80] = [
    (
        "resnet18",
        Weights::ImageNet1kV1,
        "https://download.pytorch.org/models/resnet18-f37072fd.pth",
    ),
    (
        "resnet34",
        Weights::ImageNet1kV1,
        "https://download.pytorch.org/models/resnet34-b627a593.pth",
    ),
    (
        "resnet50",
        Weights::ImageNet1kV1,
        "https://download.pytorch.org/models/resnet50-0676ba61.pth",
    ),
    (
        "resnet50",
        Weights::ImageNet1kV2,
        "https://download.pytorch.org/models/resnet50-11ad3fa6.pth",
    ),
    (
        "resnet101",
        Weights::ImageNet1kV1,
        "https://download.pytorch.org/models/resnet101-63fe2227.pth",
    ),
    (
        "resnet101",
        Weights::ImageNet1kV2,
        "https://download.pytorch.org/models/resnet101-cd907fc2.pth",
    ),
    (
        "resnet152",
        Weights::ImageNet1kV1,
        "https://download.pytorch.org/models/resnet152-394f9c45.pth",
    ),
    (
        "resnet152",
        Weights::ImageNet1kV2,
        "https://download.pytorch.org/models/resnet152-f82ba261.pth",
    ),
    (
        "resnext50_32x4d",
        Weights::ImageNet1kV1,
        "https://download.pytorch.org/models/resnext50_32x4d-7cdf4587.pth",
    ),
    (
        "resnext50_32x4d",
        Weights::ImageNet1kV2,
        "https://download.pytorch.org/models/resnext50_32x4d-1a0047aa.pth",
    ),
    (
        "resnext101_32x8d",
        Weights::ImageNet1kV1,
        "https://download.pytorch.org/models/resnext101_32x8d-8ba56ff5.pth",
    ),
    (
        "resnext101_32x8d",
        Weights::ImageNet1kV2,
        "https://download.pytorch.org/models/resnext101_32x8d-110c445d.pth",
    ),
    (
        "resnext101_64x4d",
        Weights::ImageNet1kV1,
        "https://download.pytorch.org/models/resnext101_64x4d-173b62eb.pth",
    ),
    (
        "wide_resnet50_2",
        Weights::ImageNet1kV1,
        "https://download.pytorch.org/models/wide_resnet50_2-95faca4d.pth",
    ),
    (
        "wide_resnet50_2",
        Weights::ImageNet1kV2,
        "https://download.pytorch.org/models/wide_resnet50_2-9ba9bcbe.pth",
    ),
    (
        "wide_resnet101_2",
        Weights::ImageNet1kV1,
        "https://download.pytorch.org/models/wide_resnet101_2-32ee1156.pth",
    ),
    (
        "wide_resnet101_2",
        Weights::ImageNet1kV2,
        "https://download.pytorch.org/models/wide_resnet101_2-d733dc28.pth",
    ),
    (
        "mobilenet_v3_large",
        Weights::ImageNet1kV1,
        "https://download.pytorch.org/models/mobilenet_v3_large-8738ca79.pth",
    ),
    (
        "mobilenet_v3_large",
        Weights::ImageNet1kV2,
        "https://download.pytorch.org/models/mobilenet_v3_large-5c1a4163.pth",
    ),
    (
        "mobilenet_v3_small",
        Weights::ImageNet1kV1,
        "https://download.pytorch.org/models/mobilenet_v3_small-047dcff4.pth",
    ),
    (
        "convnext_tiny",
        Weights::ImageNet1kV1,
        "https://download.pytorch.org/models/convnext_tiny-983f1562.pth",
    ),
    (
        "convnext_small",
        Weights::ImageNet1kV1,
        "https://download.pytorch.org/models/convnext_small-0c510722.pth",
    ),
    (
        "convnext_base",
        Weights::ImageNet1kV1,
        "https://download.pytorch.org/models/convnext_base-6075fbad.pth",
    ),
    (
        "convnext_large",
        Weights::ImageNet1kV1,
        "https://download.pytorch.org/models/convnext_large-ea097f82.pth",
    ),
    (
        "mobilenet_v2",
        Weights::ImageNet1kV1,
        "https://download.pytorch.org/models/mobilenet_v2-b0353104.pth",
    ),
    (
        "mobilenet_v2",
        Weights::ImageNet1kV2,
        "https://download.pytorch.org/models/mobilenet_v2-7ebf99e0.pth",
    ),
    (
        "alexnet",
        Weights::ImageNet1kV1,
        "https://download.pytorch.org/models/alexnet-owt-7be5be79.pth",
    ),
    (
        "squeezenet1_0",
        Weights::ImageNet1kV1,
        "https://download.pytorch.org/models/squeezenet1_0-b66bff10.pth",
    ),
    (
        "squeezenet1_1",
        Weights::ImageNet1kV1,
        "https://download.pytorch.org/models/squeezenet1_1-b8a52dc0.pth",
    ),
    ("vgg11", Weights::ImageNet1kV1, "https://download.pytorch.org/models/vgg11-8a719046.pth"),
    (
        "vgg11_bn",
        Weights::ImageNet1kV1,
        "https://download.pytorch.org/models/vgg11_bn-6002323d.pth",
    ),
    ("vgg13", Weights::ImageNet1kV1, "https://download.pytorch.org/models/vgg13-19584684.pth"),
    (
        "vgg13_bn",
        Weights::ImageNet1kV1,
        "https://download.pytorch.org/models/vgg13_bn-abd245e5.pth",
    ),
    ("vgg16", Weights::ImageNet1kV1, "https://download.pytorch.org/models/vgg16-397923af.pth"),
    (
        "vgg16_bn",
        Weights::ImageNet1kV1,
        "https://download.pytorch.org/models/vgg16_bn-6c64b313.pth",
    ),
    ("vgg19", Weights::ImageNet1kV1, "https://download.pytorch.org/models/vgg19-dcbb9e9d.pth"),
    (
        "vgg19_bn",
        Weights::ImageNet1kV1,
        "https://download.pytorch.org/models/vgg19_bn-c79401a0.pth",
    ),
    (
        "regnet_y_400mf",
        Weights::ImageNet1kV1,
        "https://download.pytorch.org/models/regnet_y_400mf-c65dace8.pth",
    ),
    (
        "regnet_y_400mf",
        Weights::ImageNet1kV2,
        "https://download.pytorch.org/models/regnet_y_400mf-e6988f5f.pth",
    ),
    (
        "regnet_y_800mf",
        Weights::ImageNet1kV1,
        "https://download.pytorch.org/models/regnet_y_800mf-1b27b58c.pth",
    ),
    (
        "regnet_y_800mf",
        Weights::ImageNet1kV2,
        "https://download.pytorch.org/models/regnet_y_800mf-58fc7688.pth",
    ),
    (
        "regnet_y_1_6gf",
        Weights::ImageNet1kV1,
        "https://download.pytorch.org/models/regnet_y_1_6gf-b11a554e.pth",
    ),
    (
        "regnet_y_1_6gf",
        Weights::ImageNet1kV2,
        "https://download.pytorch.org/models/regnet_y_1_6gf-0d7bc02a.pth",
    ),
    (
        "regnet_y_3_2gf",
        Weights::ImageNet1kV1,
        "https://download.pytorch.org/models/regnet_y_3_2gf-b5a9779c.pth",
    ),
    (
        "regnet_y_3_2gf",
        Weights::ImageNet1kV2,
        "https://download.pytorch.org/models/regnet_y_3_2gf-9180c971.pth",
    ),
    (
        "regnet_y_8gf",
        Weights::ImageNet1kV1,
        "https://download.pytorch.org/models/regnet_y_8gf-d0d0e4a8.pth",
    ),
    (
        "regnet_y_8gf",
        Weights::ImageNet1kV2,
        "https://download.pytorch.org/models/regnet_y_8gf-dc2b1b54.pth",
    ),
    (
        "regnet_y_16gf",
        Weights::ImageNet1kV1,
        "https://download.pytorch.org/models/regnet_y_16gf-9e6ed7dd.pth",
    ),
    (
        "regnet_y_16gf",
        Weights::ImageNet1kV2,
        "https://download.pytorch.org/models/regnet_y_16gf-3e4a00f9.pth",
    ),
    (
        "regnet_y_32gf",
        Weights::ImageNet1kV1,
        "https://download.pytorch.org/models/regnet_y_32gf-4dee3f7a.pth",
    ),
    (
        "regnet_y_32gf",
        Weights::ImageNet1kV2,
        "https://download.pytorch.org/models/regnet_y_32gf-8db6d4b5.pth",
    ),
    (
        "regnet_x_400mf",
        Weights::ImageNet1kV1,
        "https://download.pytorch.org/models/regnet_x_400mf-adf1edd5.pth",
    ),
    (
        "regnet_x_400mf",
        Weights::ImageNet1kV2,
        "https://download.pytorch.org/models/regnet_x_400mf-62229a5f.pth",
    ),
    (
        "regnet_x_800mf",
        Weights::ImageNet1kV1,
        "https://download.pytorch.org/models/regnet_x_800mf-ad17e45c.pth",
    ),
    (
        "regnet_x_800mf",
        Weights::ImageNet1kV2,
        "https://download.pytorch.org/models/regnet_x_800mf-94a99ebd.pth",
    ),
    (
        "regnet_x_1_6gf",
        Weights::ImageNet1kV1,
        "https://download.pytorch.org/models/regnet_x_1_6gf-e3633e7f.pth",
    ),
    (
        "regnet_x_1_6gf",
        Weights::ImageNet1kV2,
        "https://download.pytorch.org/models/regnet_x_1_6gf-a12f2b72.pth",
    ),
    (
        "regnet_x_3_2gf",
        Weights::ImageNet1kV1,
        "https://download.pytorch.org/models/regnet_x_3_2gf-f342aeae.pth",
    ),
    (
        "regnet_x_3_2gf",
        Weights::ImageNet1kV2,
        "https://download.pytorch.org/models/regnet_x_3_2gf-7071aa85.pth",
    ),
    (
        "regnet_x_8gf",
        Weights::ImageNet1kV1,
        "https://download.pytorch.org/models/regnet_x_8gf-03ceed89.pth",
    ),
    (
        "regnet_x_8gf",
        Weights::ImageNet1kV2,
        "https://download.pytorch.org/models/regnet_x_8gf-2b70d774.pth",
    ),
    (
        "regnet_x_16gf",
        Weights::ImageNet1kV1,
        "https://download.pytorch.org/models/regnet_x_16gf-2007eb11.pth",
    ),
    (
        "regnet_x_16gf",
        Weights::ImageNet1kV2,
        "https://download.pytorch.org/models/regnet_x_16gf-ba3796d7.pth",
    ),
    (
        "regnet_x_32gf",
        Weights::ImageNet1kV1,
        "https://download.pytorch.org/models/regnet_x_32gf-9d47f8d0.pth",
    ),
    (
        "regnet_x_32gf",
        Weights::ImageNet1kV2,
        "https://download.pytorch.org/models/regnet_x_32gf-6eb8fdc6.pth",
    ),
    (
        "shufflenet_v2_x0_5",
        Weights::ImageNet1kV1,
        "https://download.pytorch.org/models/shufflenetv2_x0.5-f707e7126e.pth",
    ),
    (
        "shufflenet_v2_x1_0",
        Weights::ImageNet1kV1,
        "https://download.pytorch.org/models/shufflenetv2_x1-5666bf0f80.pth",
    ),
    (
        "shufflenet_v2_x1_5",
        Weights::ImageNet1kV1,
        "https://download.pytorch.org/models/shufflenetv2_x1_5-3c479a10.pth",
    ),
    (
        "shufflenet_v2_x2_0",
        Weights::ImageNet1kV1,
        "https://download.pytorch.org/models/shufflenetv2_x2_0-8be3c8ee.pth",
    ),
    (
        "mnasnet0_75",
        Weights::ImageNet1kV1,
        "https://download.pytorch.org/models/mnasnet0_75-7090bc5f.pth",
    ),
    (
        "mnasnet1_0",
        Weights::ImageNet1kV1,
        "https://download.pytorch.org/models/mnasnet1.0_top1_73.512-f206786ef8.pth",
    ),
    (
        "mnasnet1_3",
        Weights::ImageNet1kV1,
        "https://download.pytorch.org/models/mnasnet1_3-a4c69d6f.pth",
    ),
    (
        "densenet121",
        Weights::ImageNet1kV1,
        "https://download.pytorch.org/models/densenet121-a639ec97.pth",
    ),
    (
        "densenet161",
        Weights::ImageNet1kV1,
        "https://download.pytorch.org/models/densenet161-8d451a50.pth",
    ),
    (
        "densenet169",
        Weights::ImageNet1kV1,
        "https://download.pytorch.org/models/densenet169-b2777c0a.pth",
    ),
    (
        "densenet201",
        Weights::ImageNet1kV1,
        "https://download.pytorch.org/models/densenet201-c1103571.pth",
    ),
    (
        "vit_b_16",
        Weights::ImageNet1kV1,
        "https://download.pytorch.org/models/vit_b_16-c867db91.pth",
    ),
    (
        "vit_b_32",
        Weights::ImageNet1kV1,
        "https://download.pytorch.org/models/vit_b_32-d86f8d99.pth",
    ),
    (
        "vit_l_16",
        Weights::ImageNet1kV1,
        "https://download.pytorch.org/models/vit_l_16-852ce7e3.pth",
    ),
    (
        "vit_l_32",
        Weights::ImageNet1kV1,
        "https://download.pytorch.org/models/vit_l_32-c7638314.pth",
    ),
];

impl FromStr for Weights {
    type Err = Error;
    /// `IMAGENET1K_V1`, `IMAGENET1K_V2` or `DEFAULT`, optionally after a model's enum as
    /// torchvision's `--weights` flag spells it (`ResNet50_Weights.IMAGENET1K_V2`).
    fn from_str(s: &str) -> Result<Self> {
        match s.rsplit('.').next().unwrap_or(s) {
            "IMAGENET1K_V1" => Ok(Weights::ImageNet1kV1),
            "IMAGENET1K_V2" => Ok(Weights::ImageNet1kV2),
            "DEFAULT" => Ok(Weights::Default),
            _ => Err(Error::InvalidArgument(format!(
                "{s:?} is not a weights name (IMAGENET1K_V1, IMAGENET1K_V2 or DEFAULT, optionally \
                 as ResNet50_Weights.IMAGENET1K_V2)"
            ))),
        }
    }
}

impl Weights {
    /// The URL of `model`'s file for these weights (`"resnet34"` and V1: torchvision's
    /// `resnet34-b627a593.pth`). Errors name the model and the weights it has.
    pub fn url(self, model: &str) -> Result<&'static str> {
        let of_model: Vec<_> = PRETRAINED.iter().filter(|(m, _, _)| *m == model).collect();
        let wanted = match self {
            Weights::Default => of_model.iter().map(|(_, w, _)| *w).max_by_key(|w| *w as u8),
            w => Some(w),
        };
        of_model.iter().find(|(_, w, _)| Some(*w) == wanted).map(|(_, _, url)| *url).ok_or_else(
            || {
                let known: Vec<String> =
                    of_model.iter().map(|(_, w, _)| format!("{w:?}")).collect();
                Error::InvalidArgument(format!(
                    "no {self:?} weights for {model:?} (known: {})",
                    if known.is_empty() { "none for this model".into() } else { known.join(", ") }
                ))
            },
        )
    }

    /// The sizes of the evaluation transform torchvision gives these weights of `model`
    /// (`weights.transforms()`: resize the shorter side to `.0` with bilinear interpolation,
    /// then a centre crop of `.1`), which torchvision's classification reference uses with
    /// `--weights` and `--test-only`: 256 and 224 for most V1 weights, 232 and 224 for V2,
    /// ResNeXt101 64x4d, ShuffleNet V2 x1.5 and x2.0 and MNASNet 0.75 and 1.3, 242 and 224 for
    /// ViT-L/16, 236/230/232/232 and 224 for ConvNeXt Tiny/Small/Base/Large (`tests/parity/vision_models.rs` compares
    /// every entry of [`PRETRAINED`] with
    /// torchvision's). Errors as [`url`](Self::url) when `model` has no such weights.
    ///
    /// ```
    /// use trainbook::models::Weights;
    /// assert_eq!(Weights::ImageNet1kV2.eval_sizes("resnet50")?, (232, 224));
    /// assert_eq!(Weights::Default.eval_sizes("resnet34")?, (256, 224));
    /// # Ok::<(), trainbook::Error>(())
    /// ```
    pub fn eval_sizes(self, model: &str) -> Result<(u32, u32)> {
        let url = self.url(model)?;
        let resolved = PRETRAINED.iter().find(|(_, _, u)| *u == url).map(|(_, w, _)| *w);
        let resize = match (model, resolved) {
            ("convnext_tiny", _) => 236,
            ("convnext_small", _) => 230,
            ("convnext_base" | "convnext_large" | "resnext101_64x4d", _) => 232,
            ("shufflenet_v2_x1_5" | "shufflenet_v2_x2_0" | "mnasnet0_75" | "mnasnet1_3", _) => 232,
            ("vit_l_16", _) => 242,
            (_, Some(Weights::ImageNet1kV2)) => 232,
            _ => 256,
        };
        Ok((resize, 224))
    }

    /// The weights file of `model` in torch.hub's cache, downloaded there first (with a
    /// progress bar when `progress`, and torchvision's hash check) if PyTorch has not already.
    pub fn file(self, model: &str, progress: bool) -> Result<PathBuf> {
        crate::hub::cached_download(self.url(model)?, None, true, progress)
    }
}

/// `torchvision.models.<model>(weights=...)`'s weights loaded into `vs`, whose model was built
/// as `model` (`"resnet34"`): the file from torch.hub's cache ([`Weights::file`]), loaded with
/// `strict` (false keeps a new head: the report lists it as missing).
///
/// ```no_run
/// use tch::nn::VarStore;
/// use trainbook::models::{load_pretrained, resnet34_classifier, Weights};
/// # fn main() -> trainbook::Result<()> {
/// let mut vs = VarStore::new(tch::Device::Cpu);
/// let net = resnet34_classifier(&vs.root(), 3); // the course's head, newly initialised
/// let report = load_pretrained(&mut vs, "resnet34", Weights::ImageNet1kV1, false)?;
/// println!("new head: {:?}", report.missing);
/// # Ok(()) }
/// ```
pub fn load_pretrained(
    vs: &mut VarStore,
    model: &str,
    weights: Weights,
    strict: bool,
) -> Result<LoadReport> {
    load_torchvision_file(vs, weights.file(model, true)?, strict)
}

/// A weights file of torchvision's (a `torch.save` state dict, or safetensors) loaded into
/// `vs` as torchvision's own loaders load it: the older parameter names some of its files
/// carry renamed first ([`torchvision_current_name`](super::torchvision_current_name)), then
/// [`load_state_dict`](super::load_state_dict) with `strict`. Errors name the file.
pub fn load_torchvision_file(
    vs: &mut VarStore,
    path: impl AsRef<Path>,
    strict: bool,
) -> Result<LoadReport> {
    let path = path.as_ref();
    let tensors: Vec<(String, tch::Tensor)> = if is_zip(path)? {
        let value = crate::torch_file::load(path)?;
        crate::torch_file::state_dict_of(&value, path)?.1
    } else {
        super::from_safetensors_bytes(&std::fs::read(path).with_path(path)?, path)?
    };
    let renamed: Vec<(String, tch::Tensor)> = tensors
        .into_iter()
        .map(|(k, t)| (super::torchvision_current_name(&k).into_owned(), t))
        .collect();
    super::load_state_dict(vs, &renamed, strict).map_err(|e| match e {
        Error::InvalidArgument(m) => Error::InvalidArgument(format!("{}: {m}", path.display())),
        other => other,
    })
}

/// Whether `path` starts as a zip archive (`torch.save`'s format) does.
fn is_zip(path: &Path) -> Result<bool> {
    use std::io::Read;
    let mut magic = [0u8; 2];
    let mut file = std::fs::File::open(path).with_path(path)?;
    let n = file.read(&mut magic).with_path(path)?;
    Ok(n == 2 && &magic == b"PK")
}

/// What the examples' `--weights ARG` loads: the file `ARG` when it exists (a `torch.save`
/// file or safetensors), else the torchvision weights named `ARG` for `model`
/// ([`load_pretrained`]). Errors say both when `ARG` is neither.
pub fn load_weights_arg(
    vs: &mut VarStore,
    model: &str,
    arg: &Path,
    strict: bool,
) -> Result<LoadReport> {
    if arg.exists() {
        return load_torchvision_file(vs, arg, strict);
    }
    let name = arg.to_str().unwrap_or_default();
    match name.parse::<Weights>() {
        Ok(w) => load_pretrained(vs, model, w, strict),
        Err(_) => Err(Error::InvalidArgument(format!(
            "--weights {}: no such file, and not a weights name (IMAGENET1K_V1, IMAGENET1K_V2, \
             DEFAULT)",
            arg.display()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_as_torchvisions_flag_spells_them_and_default_picks_the_newest() {
        assert_eq!("IMAGENET1K_V1".parse::<Weights>().unwrap(), Weights::ImageNet1kV1);
        assert_eq!(
            "ResNet50_Weights.IMAGENET1K_V2".parse::<Weights>().unwrap(),
            Weights::ImageNet1kV2
        );
        assert_eq!("DEFAULT".parse::<Weights>().unwrap(), Weights::Default);
        assert!("imagenet".parse::<Weights>().unwrap_err().to_string().contains("IMAGENET1K_V1"));
        assert!(Weights::Default.url("resnet50").unwrap().ends_with("resnet50-11ad3fa6.pth"));
        assert!(Weights::Default.url("resnet34").unwrap().ends_with("resnet34-b627a593.pth"));
        let err = Weights::ImageNet1kV2.url("resnet34").unwrap_err().to_string();
        assert!(err.contains("\"resnet34\"") && err.contains("known: ImageNet1kV1"), "{err}");
        let err = Weights::ImageNet1kV1.url("vit_h_14").unwrap_err().to_string();
        assert!(err.contains("none for this model"), "{err}");
    }
}
