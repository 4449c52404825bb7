//! `transforms.RandomErasing`: with probability `p`, a rectangle of the tensor image (after
//! `ToTensor`, usually after `Normalize`) is set to a value, its area a random share of the
//! image's and its aspect ratio log-uniform, as torchvision's `get_params` picks it (up to 10
//! tries, else nothing is erased). The draws come from the sample's [`AugRng`]; given torch's
//! draws ([`EraseDraws`] for [`TorchGenerator`]) the rectangle is torchvision's, which the tests
//! check seed by seed.
use rand::Rng;
use tch::{Device, Tensor};

use super::{AugRng, Sample, TensorImage, Transform};
use crate::rng::TorchGenerator;
use crate::{Error, Result};

/// The random numbers `RandomErasing` draws: float32 uniforms (`torch.empty(1).uniform_(a, b)`
/// and `torch.rand(1)`) and integers (`torch.randint(low, high, (1,))`).
pub trait EraseDraws {
    /// A float32 uniform in `[from, to)`.
    fn uniform(&mut self, from: f32, to: f32) -> f32;
    /// An integer in `[low, high)`.
    fn randint(&mut self, low: i64, high: i64) -> i64;
}

impl EraseDraws for AugRng {
    fn uniform(&mut self, from: f32, to: f32) -> f32 {
        self.random::<f32>().mul_add(to - from, from)
    }
    fn randint(&mut self, low: i64, high: i64) -> i64 {
        self.random_range(low..high)
    }
}

/// torch's CPU kernels on its mt19937: `uniform_` keeps 24 random bits of one 32-bit draw and
/// scales them as `x * (to - from) + from` in float32 (whether libtorch's build fuses that into
/// one rounding does not change a box in the tests), `randint` takes one draw modulo the range.
impl EraseDraws for TorchGenerator {
    fn uniform(&mut self, from: f32, to: f32) -> f32 {
        let x = (self.random() & ((1 << 24) - 1)) as f32 / (1u32 << 24) as f32;
        x * (to - from) + from
    }
    fn randint(&mut self, low: i64, high: i64) -> i64 {
        let range = (high - low) as u64;
        let draw = if range >= 1 << 32 { self.random64() } else { self.random() as u64 };
        (draw % range) as i64 + low
    }
}

/// What an erased rectangle is filled with.
#[derive(Clone, Debug, PartialEq)]
pub enum EraseValue {
    /// One value for every channel, or one per channel (torchvision's `value=0` default, or a
    /// tuple).
    Constant(Vec<f32>),
    /// Standard normal noise (`value="random"`), drawn from the sample's stream.
    Random,
}

/// `transforms.RandomErasing(p=0.5, scale=(0.02, 0.33), ratio=(0.3, 3.3), value=0)` on tensor
/// images.
///
/// ```
/// use trainbook::transforms::{aug_rng, RandomErasing, Sample, TensorImage, Transform};
/// # fn main() -> trainbook::Result<()> {
/// let erase = RandomErasing::new(1.0)?; // always erase; torchvision's other defaults
/// let img = TensorImage { channels: 3, height: 32, width: 32, data: vec![1.0; 3 * 32 * 32] };
/// let out = erase.apply(Sample::Tensor(img), &mut aug_rng(0, 0, 1))?.into_tensor();
/// assert!(out.data.iter().any(|&v| v == 0.0));
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct RandomErasing {
    p: f32,
    scale: (f32, f32),
    ratio: (f32, f32),
    /// `log(ratio)` in float32 by libtorch's own `log` kernel, as torchvision computes it.
    log_ratio: (f32, f32),
    value: EraseValue,
}

impl RandomErasing {
    /// Erases with probability `p` (torchvision's default 0.5), with torchvision's default
    /// scale, ratio and value. Errors ([`Error::InvalidArgument`]): `p` outside [0, 1].
    pub fn new(p: f32) -> Result<Self> {
        RandomErasing::with(p, (0.02, 0.33), (0.3, 3.3), EraseValue::Constant(vec![0.0]))
    }

    /// `RandomErasing(p, scale, ratio, value)`. Errors ([`Error::InvalidArgument`]): `p`
    /// outside [0, 1], a scale outside [0, 1] or a range whose ends are out of order (torch
    /// warns and goes on; trainbook refuses), a ratio that is not positive, an empty value list.
    pub fn with(p: f32, scale: (f32, f32), ratio: (f32, f32), value: EraseValue) -> Result<Self> {
        let bad = |m: &str| Err(Error::InvalidArgument(format!("RandomErasing: {m}")));
        if !(0.0..=1.0).contains(&p) {
            return bad(&format!("p must be in [0, 1], got {p}"));
        }
        if !(0.0 <= scale.0 && scale.0 <= scale.1 && scale.1 <= 1.0) {
            return bad(&format!("scale must be ordered within [0, 1], got {scale:?}"));
        }
        if !(0.0 < ratio.0 && ratio.0 <= ratio.1 && ratio.1.is_finite()) {
            return bad(&format!("ratio must be positive and ordered, got {ratio:?}"));
        }
        if matches!(&value, EraseValue::Constant(v) if v.is_empty()) {
            return bad("value must hold one value or one per channel");
        }
        let logs = Tensor::from_slice(&[ratio.0, ratio.1]).to_device(Device::Cpu).log();
        let log_ratio = (logs.double_value(&[0]) as f32, logs.double_value(&[1]) as f32);
        Ok(RandomErasing { p, scale, ratio, log_ratio, value })
    }

    /// torchvision's `get_params` for a `height` x `width` image with the given draws: the
    /// rectangle's top, left, height and width, or `None` when 10 tries found none that fits
    /// (torchvision then returns the image unchanged).
    pub fn get_params(
        &self,
        draws: &mut impl EraseDraws,
        height: usize,
        width: usize,
    ) -> Option<(usize, usize, usize, usize)> {
        let area = (height * width) as f64;
        for _ in 0..10 {
            let erase_area = area * draws.uniform(self.scale.0, self.scale.1) as f64;
            let log_aspect = draws.uniform(self.log_ratio.0, self.log_ratio.1);
            let aspect = Tensor::from(log_aspect).exp().double_value(&[]);
            let h = (erase_area * aspect).sqrt().round_ties_even() as usize;
            let w = (erase_area / aspect).sqrt().round_ties_even() as usize;
            if !(h < height && w < width) {
                continue;
            }
            let top = draws.randint(0, (height - h + 1) as i64) as usize;
            let left = draws.randint(0, (width - w + 1) as i64) as usize;
            return Some((top, left, h, w));
        }
        None
    }

    /// Whether this sample is erased (`torch.rand(1) < p`), then where; `None` for no erasing.
    pub fn decide(
        &self,
        draws: &mut impl EraseDraws,
        height: usize,
        width: usize,
    ) -> Option<(usize, usize, usize, usize)> {
        if draws.uniform(0.0, 1.0) < self.p {
            self.get_params(draws, height, width)
        } else {
            None
        }
    }

    fn erase(
        &self,
        img: &mut TensorImage,
        (top, left, h, w): (usize, usize, usize, usize),
        rng: &mut AugRng,
    ) -> Result<()> {
        let c = img.channels;
        let values: Vec<f32> = match &self.value {
            EraseValue::Constant(v) if v.len() == 1 => vec![v[0]; c],
            EraseValue::Constant(v) if v.len() == c => v.clone(),
            EraseValue::Constant(v) => {
                return Err(Error::InvalidArgument(format!(
                    "RandomErasing: {} values for an image of {c} channels (give 1 or {c})",
                    v.len()
                )))
            }
            EraseValue::Random => Vec::new(),
        };
        let (plane, width) = (img.height * img.width, img.width);
        for (ch, channel) in img.data.chunks_exact_mut(plane).enumerate() {
            for y in top..top + h {
                for v in &mut channel[y * width + left..][..w] {
                    *v = values.get(ch).copied().unwrap_or_else(|| standard_normal(rng));
                }
            }
        }
        Ok(())
    }
}

/// One standard normal draw (Box-Muller on two uniforms).
fn standard_normal(rng: &mut AugRng) -> f32 {
    let u1: f64 = 1.0 - rng.random::<f64>();
    let u2: f64 = rng.random();
    ((-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()) as f32
}

impl Transform for RandomErasing {
    fn apply(&self, input: Sample, rng: &mut AugRng) -> Result<Sample> {
        let Sample::Tensor(mut img) = input else {
            return Err(Error::InvalidArgument(
                "RandomErasing works on tensor images: put it after ToTensor".into(),
            ));
        };
        if let Some(rect) = self.decide(rng, img.height, img.width) {
            self.erase(&mut img, rect, rng)?;
        }
        Ok(Sample::Tensor(img))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transforms::{aug_rng, Image};

    fn ones(c: usize, h: usize, w: usize) -> Sample {
        Sample::Tensor(TensorImage { channels: c, height: h, width: w, data: vec![1.0; c * h * w] })
    }

    #[test]
    fn the_box_is_filled_per_channel_and_nothing_else_changes() {
        let t = RandomErasing::with(
            1.0,
            (0.1, 0.3),
            (0.5, 2.0),
            EraseValue::Constant(vec![-1.0, -2.0, -3.0]),
        )
        .unwrap();
        for index in 0..50 {
            let rect = t.decide(&mut aug_rng(9, 0, index), 20, 30).unwrap();
            let out = t.apply(ones(3, 20, 30), &mut aug_rng(9, 0, index)).unwrap().into_tensor();
            let (top, left, h, w) = rect;
            for (k, v) in out.data.iter().enumerate() {
                let (ch, y, x) = (k / 600, k % 600 / 30, k % 30);
                let inside = (top..top + h).contains(&y) && (left..left + w).contains(&x);
                assert_eq!(
                    *v,
                    if inside { -1.0 - ch as f32 } else { 1.0 },
                    "sample {index} at {k}"
                );
            }
        }
        let noise = RandomErasing::with(1.0, (0.1, 0.3), (0.5, 2.0), EraseValue::Random).unwrap();
        let out = noise.apply(ones(3, 20, 30), &mut aug_rng(1, 0, 0)).unwrap().into_tensor();
        assert!(out.data.iter().any(|v| *v != 1.0 && v.is_finite()));
    }

    #[test]
    fn bad_input_is_an_error_naming_it() {
        assert!(RandomErasing::new(1.5).unwrap_err().to_string().contains("p must be"));
        let two =
            RandomErasing::with(1.0, (0.1, 0.3), (0.5, 2.0), EraseValue::Constant(vec![0.0, 0.0]))
                .unwrap();
        let err = two.apply(ones(3, 20, 30), &mut aug_rng(0, 0, 0)).unwrap_err();
        assert!(err.to_string().contains("2 values for an image of 3 channels"), "{err}");
        let err = RandomErasing::new(0.5)
            .unwrap()
            .apply(Sample::Image(Image::zeros(4, 4, 3)), &mut aug_rng(0, 0, 0));
        assert!(err.unwrap_err().to_string().contains("after ToTensor"));
    }
}
