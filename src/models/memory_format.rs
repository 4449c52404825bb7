//! The channels_last memory format (`model.to(memory_format=torch.channels_last)`,
//! `x.to(memory_format=torch.channels_last)`): 4-D tensors keep their NCHW shape but are laid
//! out NHWC in memory, the layout that GPU tensor cores (and oneDNN on CPUs) convolve fastest.
//! Convolutions given channels_last inputs and weights return channels_last outputs, so the
//! format carries through a network once its parameters and its input batches use it.
use tch::nn::VarStore;
use tch::Tensor;

/// `t` in the channels_last layout (a copy if needed); tensors that are not 4-D unchanged.
///
/// ```
/// use tch::{Device, Kind, Tensor};
/// let x = Tensor::randn([2, 3, 4, 5], (Kind::Float, Device::Cpu));
/// let y = trainbook::models::channels_last(&x);
/// assert_eq!(y.size(), x.size());
/// assert_eq!(y.stride(), [60, 1, 15, 3]);
/// assert!(trainbook::models::is_channels_last(&y));
/// ```
pub fn channels_last(t: &Tensor) -> Tensor {
    if t.dim() != 4 || is_channels_last(t) {
        return t.shallow_clone();
    }
    t.permute([0, 2, 3, 1]).contiguous().permute([0, 3, 1, 2])
}

/// Whether a 4-D tensor's strides are channels_last's (C fastest, then W, H, N), ignoring the
/// strides of size-1 dimensions as torch's `is_contiguous(memory_format=torch.channels_last)`
/// does (a 1x1 convolution's weight is both layouts at once).
pub fn is_channels_last(t: &Tensor) -> bool {
    let (size, stride) = (t.size(), t.stride());
    if size.len() != 4 {
        return false;
    }
    let mut expected = 1;
    for d in [1, 3, 2, 0] {
        if size[d] != 1 && stride[d] != expected {
            return false;
        }
        expected *= size[d];
    }
    true
}

/// Converts every 4-D parameter and buffer of `vs` (convolution weights) to channels_last in
/// place, as `model.to(memory_format=torch.channels_last)`; names, values and the optimizer's
/// view of the parameters are unchanged. Do it before wrapping the model in `Ddp` and before
/// the first optimizer step.
pub fn to_channels_last(vs: &VarStore) {
    tch::no_grad(|| {
        for (_, mut v) in vs.variables() {
            if v.dim() == 4 && !is_channels_last(&v) {
                let converted = channels_last(&v);
                v.set_data(&converted);
            }
        }
    });
}
