//! [`TensorImage`], the CHW float32 form of a picture after `ToTensor`, as a loader stacks it.
use super::image::Image;

/// A CHW float32 image, the form a loader stacks into a `[B, C, H, W]` batch.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorImage {
    /// Number of channels, C (1 for grey, 3 for RGB).
    pub channels: usize,
    /// Height in pixels, H.
    pub height: usize,
    /// Width in pixels, W.
    pub width: usize,
    /// The values, channel planes one after the other, each row-major: `C * H * W` floats
    /// (in [0, 1] after `ToTensor`, standardised after `Normalize`).
    pub data: Vec<f32>,
}

impl TensorImage {
    /// torchvision's `to_tensor`: bytes divided by 255 in float32, channels first.
    pub fn from_image(img: &Image) -> TensorImage {
        let (c, h, w) = (img.channels() as usize, img.height() as usize, img.width() as usize);
        // v / 255 in float32 for every byte value: the same results as dividing, without dividing.
        let lut: [f32; 256] = std::array::from_fn(|v| v as f32 / 255.0);
        let plane = h * w;
        let mut data = vec![0f32; c * plane];
        let src = img.data();
        if c == 3 {
            let (r, gb) = data.split_at_mut(plane);
            let (g, b) = gb.split_at_mut(plane);
            for (((px, r), g), b) in src.chunks_exact(3).zip(r).zip(g).zip(b) {
                *r = lut[px[0] as usize];
                *g = lut[px[1] as usize];
                *b = lut[px[2] as usize];
            }
        } else {
            for (o, &v) in data.iter_mut().zip(src) {
                *o = lut[v as usize];
            }
        }
        TensorImage { channels: c, height: h, width: w, data }
    }

    /// `[C, H, W]`, as `tensor.shape` in torchvision.
    pub fn shape(&self) -> [usize; 3] {
        [self.channels, self.height, self.width]
    }

    /// A `[C, H, W]` float32 CPU tensor holding a copy of the values.
    ///
    /// # Panics
    ///
    /// When `data` does not hold `C * H * W` values (possible only if the public fields were
    /// set inconsistently by hand).
    pub fn to_tensor(&self) -> tch::Tensor {
        tch::Tensor::from_slice(&self.data).view([
            self.channels as i64,
            self.height as i64,
            self.width as i64,
        ])
    }
}
