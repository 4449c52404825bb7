//! torchvision's tensor kernels (`transforms/_functional_tensor.py`) for the operations that
//! `AugMix` applies: it converts a PIL image to a uint8 tensor first, so its shears, rotations,
//! colour and histogram operations are torchvision's tensor versions, not the PIL ones of
//! [`AugmentOp::apply_with`]. Each function runs the same libtorch operations in the same order
//! on a tensor of the same layout as torchvision's, so the bytes agree by construction
//! (tests/parity/augmix_parity.rs checks them against the venv's torchvision).
use tch::{Device, Kind, Tensor};

use super::autoaugment_ops::AugmentOp;
use super::functional::{equalize_lut, inverse_affine_matrix, per_channel_lut, Interpolation};
use super::Image;

const CPU_FLOAT: (Kind, Device) = (Kind::Float, Device::Cpu);

/// `F.pil_to_tensor(img).view(1, C, H, W)`: a uint8 view of the image's bytes, channels first
/// by strides (as `permute` leaves them), with a batch dimension.
pub(super) fn image_to_batch(img: &Image) -> Tensor {
    let (w, h, c) = (img.width() as i64, img.height() as i64, img.channels() as i64);
    Tensor::from_slice(img.data()).view([h, w, c]).permute([2, 0, 1]).view([1, c, h, w])
}

/// The image of a uint8 `[1, C, H, W]` tensor (`F.to_pil_image`).
pub(super) fn batch_to_image(batch: &Tensor) -> Image {
    let size = batch.size();
    let (c, h, w) = (size[1], size[2], size[3]);
    let hwc = batch.view([c, h, w]).permute([1, 2, 0]).contiguous();
    let mut data = vec![0u8; (c * h * w) as usize];
    let n = data.len();
    hwc.copy_data_u8(&mut data, n);
    Image::from_raw(w as u32, h as u32, c as u8, data).expect("the tensor's own size")
}

/// `_gen_affine_grid(theta, w, h, w, h)`: the sampling grid of the inverse `matrix`.
fn affine_grid(matrix: &[f64; 6], w: i64, h: i64) -> Tensor {
    let theta = Tensor::from_slice(&matrix.map(|v| v as f32)).reshape([1, 2, 3]);
    let base = Tensor::empty([1, h, w, 3], CPU_FLOAT);
    let (wf, hf) = (w as f64, h as f64);
    let x = Tensor::linspace(-wf * 0.5 + 0.5, wf * 0.5 + 0.5 - 1.0, w, CPU_FLOAT);
    base.select(3, 0).copy_(&x);
    let y = Tensor::linspace(-hf * 0.5 + 0.5, hf * 0.5 + 0.5 - 1.0, h, CPU_FLOAT).unsqueeze(-1);
    base.select(3, 1).copy_(&y);
    let _ = base.select(3, 2).fill_(1.0);
    let half = Tensor::from_slice(&[(0.5 * wf) as f32, (0.5 * hf) as f32]);
    let rescaled = theta.transpose(1, 2) / half;
    base.view([1, h * w, 3]).bmm(&rescaled).view([1, h, w, 2])
}

/// `F_t.affine` / `F_t.rotate` (no expand) with no fill: `grid_sample` of the float image with
/// zero padding, rounded back to uint8 (`_apply_grid_transform`).
fn grid_transform(img: &Tensor, matrix: &[f64; 6], interpolation: Interpolation) -> Tensor {
    let size = img.size();
    let grid = affine_grid(matrix, size[3], size[2]);
    let mode = if interpolation == Interpolation::Nearest { 1 } else { 0 };
    img.to_kind(Kind::Float).grid_sampler(&grid, mode, 0, false).round().to_kind(Kind::Uint8)
}

/// `_blend(img1, img2, ratio)`: `ratio * img1 + (1 - ratio) * img2`, clamped, truncated.
fn blend(img1: &Tensor, img2: &Tensor, ratio: f64) -> Tensor {
    (ratio * img1 + (1.0 - ratio) * img2).clamp(0.0, 255.0).to_kind(Kind::Uint8)
}

/// `rgb_to_grayscale(img)` of an RGB `img`, with one output channel.
fn grayscale(img: &Tensor) -> Tensor {
    let (r, g, b) = (img.select(1, 0), img.select(1, 1), img.select(1, 2));
    let grey: Tensor = 0.2989 * &r + 0.587 * &g + 0.114 * &b;
    grey.to_kind(Kind::Uint8).unsqueeze(1)
}

/// `adjust_contrast`: a blend with the mean grey level (float32).
fn contrast(img: &Tensor, factor: f64) -> Tensor {
    let grey = if img.size()[1] == 3 { grayscale(img) } else { img.shallow_clone() };
    let mean = grey.to_kind(Kind::Float).mean_dim(&[-3i64, -2, -1][..], true, None::<Kind>);
    blend(img, &mean, factor)
}

/// `adjust_sharpness`: a blend with the image smoothed by [[1,1,1],[1,5,1],[1,1,1]]/13 inside
/// its one-pixel border; images of 2 pixels or less across are returned as they are.
fn sharpness(img: &Tensor, factor: f64) -> Tensor {
    let size = img.size();
    let (c, h, w) = (size[1], size[2], size[3]);
    if w <= 2 || h <= 2 {
        return img.shallow_clone();
    }
    let kernel = Tensor::from_slice(&[1.0f32, 1.0, 1.0, 1.0, 5.0, 1.0, 1.0, 1.0, 1.0]).view([3, 3]);
    let kernel = (&kernel / &kernel.sum(None::<Kind>)).expand([c, 1, 3, 3], false);
    let smoothed =
        img.to_kind(Kind::Float).conv2d(&kernel, None::<Tensor>, [1, 1], [0, 0], [1, 1], c);
    let degenerate = img.copy();
    degenerate
        .narrow(2, 1, h - 2)
        .narrow(3, 1, w - 2)
        .copy_(&smoothed.round().to_kind(Kind::Uint8));
    blend(img, &degenerate, factor)
}

/// `autocontrast`: each channel stretched to 0..=255 in float32; a flat channel unchanged.
fn autocontrast(img: &Tensor) -> Tensor {
    let mut low = img.amin([-2i64, -1], true).to_kind(Kind::Float);
    let high = img.amax([-2i64, -1], true).to_kind(Kind::Float);
    // `bound / (high - low)` is Tensor.__rdiv__: the reciprocal times the bound.
    let mut scale = (&high - &low).reciprocal() * 255.0;
    let flat = scale.isfinite().logical_not();
    let _ = low.masked_fill_(&flat, 0.0);
    let _ = scale.masked_fill_(&flat, 1.0);
    ((img - &low) * &scale).clamp(0.0, 255.0).to_kind(Kind::Uint8)
}

/// `equalize`: each channel's histogram equalised (integer arithmetic, the same look-up table
/// as PIL's), as a new contiguous tensor like torchvision's `torch.stack`.
fn equalize(img: &Tensor) -> Tensor {
    let out = per_channel_lut(&batch_to_image(img), equalize_lut);
    image_to_batch(&out).contiguous()
}

/// torchvision's `_apply_op(img, op, magnitude, interpolation, fill=None)` on a uint8
/// `[1, C, H, W]` tensor (the operations of AugMix's space; others return the image).
pub(super) fn apply_op(
    img: &Tensor,
    op: AugmentOp,
    magnitude: f64,
    interpolation: Interpolation,
) -> Tensor {
    let size = img.size();
    let (h, w) = (size[2] as f64, size[3] as f64);
    let shear = |shear: (f64, f64)| {
        // F.affine's centre [0, 0], in tensor coordinates (origin at the image's centre).
        let center = (0.0 - w * 0.5, 0.0 - h * 0.5);
        inverse_affine_matrix(center, 0.0, (0.0, 0.0), 1.0, shear)
    };
    let translate = |t: (f64, f64)| inverse_affine_matrix((0.0, 0.0), 0.0, t, 1.0, (0.0, 0.0));
    let degrees = magnitude.atan().to_degrees();
    match op {
        AugmentOp::ShearX => grid_transform(img, &shear((degrees, 0.0)), interpolation),
        AugmentOp::ShearY => grid_transform(img, &shear((0.0, degrees)), interpolation),
        AugmentOp::TranslateX => {
            grid_transform(img, &translate((magnitude.trunc(), 0.0)), interpolation)
        }
        AugmentOp::TranslateY => {
            grid_transform(img, &translate((0.0, magnitude.trunc())), interpolation)
        }
        AugmentOp::Rotate => {
            let m = inverse_affine_matrix((0.0, 0.0), -magnitude, (0.0, 0.0), 1.0, (0.0, 0.0));
            grid_transform(img, &m, interpolation)
        }
        AugmentOp::Brightness => blend(img, &img.zeros_like(), 1.0 + magnitude),
        AugmentOp::Color if size[1] == 3 => blend(img, &grayscale(img), 1.0 + magnitude),
        AugmentOp::Contrast => contrast(img, 1.0 + magnitude),
        AugmentOp::Sharpness => sharpness(img, 1.0 + magnitude),
        // `img & -int(2 ** (8 - bits))`.
        AugmentOp::Posterize => img.bitwise_and(-(1i64 << (8 - (magnitude as i64).clamp(0, 8)))),
        AugmentOp::Solarize => img.rsub_scalar(255i64).where_self(&img.ge(magnitude), img),
        AugmentOp::AutoContrast => autocontrast(img),
        AugmentOp::Equalize => equalize(img),
        AugmentOp::Invert => img.rsub_scalar(255i64),
        AugmentOp::Identity | AugmentOp::Color => img.shallow_clone(),
    }
}
