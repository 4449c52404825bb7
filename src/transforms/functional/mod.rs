//! The kernels under the transforms, as torchvision's `transforms.functional` holds them under
//! its transform classes: each a plain function of a picture and its parameters, drawing nothing
//! at random, computing the bytes PIL computes ([`Interpolation`] names the filters). The
//! transforms one floor up draw their parameters and call these.
//! - [`resample`]: PIL's `Image.resize` with its separable antialiasing filters (BICUBIC here;
//!   bilinear goes through `fast_image_resize`, in `resize.rs`);
//! - [`affine`], [`affine_filters`]: PIL's affine transform and rotation (NEAREST, BILINEAR,
//!   BICUBIC);
//! - [`enhance`]: ImageEnhance's blends and ImageOps' look-up tables.
pub(crate) mod affine;
pub(crate) mod affine_filters;
pub(crate) mod enhance;
mod interpolation;
pub(crate) mod resample;

pub(crate) use affine::{affine, inverse_affine_matrix, rotate, sample_affine_nearest_to};
pub(crate) use enhance::{
    autocontrast_lut, blend, equalize_lut, grey_as_mode, map_lut, mean_grey, per_channel_lut,
    smooth,
};
pub use interpolation::Interpolation;
pub(crate) use resample::{resample, BICUBIC};
