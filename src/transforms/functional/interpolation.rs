//! [`Interpolation`], torchvision's `InterpolationMode` for the resampling kernels.
use crate::{Error, Result};

/// How a resize computes its pixels: torchvision's `InterpolationMode` for PIL images (its
/// `--interpolation` flag), each as PIL's `Image.resize` filter. Default: `Bilinear`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Interpolation {
    /// The source pixel under each output pixel's centre (`InterpolationMode.NEAREST`).
    Nearest,
    /// Antialiased triangle filter (`InterpolationMode.BILINEAR`, torchvision's default).
    #[default]
    Bilinear,
    /// Antialiased cubic filter (`InterpolationMode.BICUBIC`, PIL's `a = -0.5`), computed as
    /// PIL computes it: the same bytes.
    Bicubic,
}

impl std::str::FromStr for Interpolation {
    type Err = Error;
    /// torchvision's names: `nearest`, `bilinear`, `bicubic`.
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "nearest" => Ok(Interpolation::Nearest),
            "bilinear" => Ok(Interpolation::Bilinear),
            "bicubic" => Ok(Interpolation::Bicubic),
            other => Err(Error::InvalidArgument(format!(
                "interpolation '{other}': nearest, bilinear or bicubic"
            ))),
        }
    }
}
