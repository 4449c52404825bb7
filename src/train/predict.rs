//! Predictions with their confidence: for each image, the class a model scores highest and the
//! softmax probability the model gives that class, i.e. PyTorch's
//! `_, pred = torch.max(outputs, 1)` followed by `softmax(outputs[i], dim=0)[pred[i]]`.
use tch::nn::ModuleT;
use tch::{Device, Kind, Tensor};

use crate::{Error, Result};

/// One image's prediction.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Prediction {
    /// The predicted class index (the highest logit; the first one on ties, as `torch.max`).
    pub class: i64,
    /// The softmax probability of that class, in (0, 1].
    pub confidence: f64,
}

/// The prediction of every row of `logits` (`[N, classes]`, any floating kind and device).
/// Errors: [`Error::InvalidArgument`] when `logits` is not 2-D with at least one class.
///
/// ```
/// # fn main() -> trainbook::Result<()> {
/// use tch::Tensor;
/// let logits = Tensor::from_slice(&[1.0f32, 3.0, 0.0, 2.0, 2.0, -1.0]).view([2, 3]);
/// let p = trainbook::train::predictions(&logits)?;
/// assert_eq!(p[0].class, 1);
/// let e = |x: f64| x.exp();
/// assert!((p[0].confidence - e(3.0) / (e(1.0) + e(3.0) + e(0.0))).abs() < 1e-6);
/// assert_eq!(p[1].class, 0); // a tie goes to the first class
/// # Ok(()) }
/// ```
pub fn predictions(logits: &Tensor) -> Result<Vec<Prediction>> {
    let size = logits.size();
    if size.len() != 2 || size[1] < 1 {
        return Err(Error::InvalidArgument(format!(
            "predictions: logits must be [N, classes], got {size:?}"
        )));
    }
    let probs = logits.to_kind(Kind::Float).softmax(1, Kind::Float);
    let (confidence, class) = probs.max_dim(1, false);
    let class = Vec::<i64>::try_from(class.to_device(Device::Cpu))?;
    let confidence = Vec::<f32>::try_from(confidence.to_device(Device::Cpu))?;
    Ok(class
        .into_iter()
        .zip(confidence)
        .map(|(class, c)| Prediction { class, confidence: f64::from(c) })
        .collect())
}

/// Runs `net` in evaluation mode without gradients on `images` (`[N, C, H, W]`, on the
/// model's device) and returns each image's [`Prediction`].
///
/// ```
/// # fn main() -> trainbook::Result<()> {
/// use tch::nn::VarStore;
/// use tch::{Device, Kind, Tensor};
/// use trainbook::models::{resnet, HeadKind};
/// let vs = VarStore::new(Device::Cpu);
/// let net = resnet(&vs.root(), 18, 5, HeadKind::Linear)?;
/// let images = Tensor::rand([4, 3, 32, 32], (Kind::Float, Device::Cpu));
/// let preds = trainbook::train::predict(&net, &images)?;
/// assert_eq!(preds.len(), 4);
/// assert!(preds.iter().all(|p| (0..5).contains(&p.class) && p.confidence >= 0.2));
/// # Ok(()) }
/// ```
pub fn predict(net: &dyn ModuleT, images: &Tensor) -> Result<Vec<Prediction>> {
    let logits = tch::no_grad(|| net.forward_t(images, false));
    predictions(&logits)
}
