//! torchvision's pretrained weights by name: `Weights::ImageNet1kV1` is
//! `ResNet34_Weights.IMAGENET1K_V1`, the same file from the same URL, found in (or downloaded
//! into) torch.hub's cache that PyTorch shares ([`crate::hub`]), then loaded with the checks of
//! [`load_state_dict`](super::load_state_dict).
use std::path::{Path, PathBuf};

use tch::nn::VarStore;

pub use super::pretrained_files::{Weights, PRETRAINED};
use super::LoadReport;
use crate::{Error, Result, WithPath};

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
    let tensors: Vec<(String, tch::Tensor)> = if super::weights::is_torch_save(path)? {
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
