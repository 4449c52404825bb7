//! Views that explain a trained classifier, fastai's `ClassificationInterpretation`: every
//! sample's loss, predicted class and probabilities from the model's outputs
//! ([`Trainer::predict`](crate::fit::Trainer::predict)'s logits and the data set's labels), the
//! samples the model got most wrong ([`Interpretation::top_losses`], drawn as pictures with
//! [`Interpretation::plot_top_losses`]) and the pairs of classes it mixes up most
//! ([`Interpretation::most_confused`]).
use tch::{Device, Kind, Reduction, Tensor};

use crate::data::{DataLoader, Dataset};
use crate::figures::{image_grid, Figure};
use crate::{Error, Result};

/// One sample among the [`top_losses`](Interpretation::top_losses).
#[derive(Clone, Debug, PartialEq)]
pub struct TopLoss {
    /// Its index in the data set.
    pub index: usize,
    /// Its label.
    pub actual: i64,
    /// The class the model scores highest (the first on ties, as `torch.max`).
    pub predicted: i64,
    /// Its cross-entropy loss (`F.cross_entropy(logits, target, reduction="none")`).
    pub loss: f64,
    /// The softmax probability of the predicted class.
    pub probability: f64,
    /// The softmax probability of the actual class.
    pub actual_probability: f64,
}

/// The model's outputs on a labelled data set, sample by sample (fastai's
/// `ClassificationInterpretation`).
///
/// ```
/// # fn main() -> trainbook::Result<()> {
/// use tch::Tensor;
/// use trainbook::interpret::Interpretation;
/// // Three samples of two classes: the third is confidently wrong.
/// let logits = Tensor::from_slice(&[2.0f32, 0.0, 0.0, 1.0, 3.0, -1.0]).view([3, 2]);
/// let names = vec!["cat".to_string(), "dog".to_string()];
/// let interp = Interpretation::new(&logits, &[0, 1, 1], names)?;
/// let worst = &interp.top_losses(1)[0];
/// assert_eq!((worst.index, worst.actual, worst.predicted), (2, 1, 0));
/// assert_eq!(interp.most_confused(1), [("dog".to_string(), "cat".to_string(), 1)]);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Interpretation {
    classes: Vec<String>,
    actual: Vec<i64>,
    predicted: Vec<i64>,
    losses: Vec<f64>,
    probabilities: Vec<Vec<f64>>,
}

impl Interpretation {
    /// From `logits` (`[N, classes]`, the model's outputs for the samples in the data set's
    /// order, as [`Trainer::predict`](crate::fit::Trainer::predict) gives them), `targets`
    /// (their labels) and the class names. Errors: [`Error::InvalidArgument`] naming what does
    /// not fit (not 2-D, N not the number of targets, a label out of range, names not one per
    /// class).
    pub fn new(logits: &Tensor, targets: &[i64], classes: Vec<String>) -> Result<Interpretation> {
        let size = logits.size();
        let bad = |what: String| Err(Error::InvalidArgument(format!("Interpretation: {what}")));
        let &[n, c] = size.as_slice() else {
            return bad(format!("logits must be [N, classes], got {size:?}"));
        };
        if n as usize != targets.len() {
            return bad(format!("{n} rows of logits for {} targets", targets.len()));
        }
        if classes.len() as i64 != c {
            return bad(format!("{} class names for {c} classes", classes.len()));
        }
        if let Some(t) = targets.iter().find(|&&t| t < 0 || t >= c) {
            return bad(format!("label {t} is not a class of {c}"));
        }
        let logits = logits.to_device(Device::Cpu).to_kind(Kind::Float);
        let target = Tensor::from_slice(targets);
        let losses = logits.cross_entropy_loss::<Tensor>(&target, None, Reduction::None, -100, 0.0);
        let probs = logits.softmax(1, Kind::Float);
        let predicted = Vec::<i64>::try_from(probs.argmax(1, false))?;
        let rows = Vec::<f32>::try_from(probs.flatten(0, -1))?;
        let probabilities =
            rows.chunks(c as usize).map(|r| r.iter().map(|&p| f64::from(p)).collect()).collect();
        let losses = Vec::<f32>::try_from(losses)?.into_iter().map(f64::from).collect();
        Ok(Interpretation { classes, actual: targets.to_vec(), predicted, losses, probabilities })
    }

    /// Every sample's loss, in the data set's order.
    pub fn losses(&self) -> &[f64] {
        &self.losses
    }

    /// Every sample's predicted class, in the data set's order.
    pub fn predicted(&self) -> &[i64] {
        &self.predicted
    }

    /// The `k` samples with the largest loss, largest first (equal losses in the data set's
    /// order); fewer when there are fewer samples.
    pub fn top_losses(&self, k: usize) -> Vec<TopLoss> {
        let mut order: Vec<usize> = (0..self.losses.len()).collect();
        order.sort_by(|&a, &b| self.losses[b].total_cmp(&self.losses[a]));
        order
            .into_iter()
            .take(k)
            .map(|index| {
                let (actual, predicted) = (self.actual[index], self.predicted[index]);
                let p = &self.probabilities[index];
                TopLoss {
                    index,
                    actual,
                    predicted,
                    loss: self.losses[index],
                    probability: p[predicted as usize],
                    actual_probability: p[actual as usize],
                }
            })
            .collect()
    }

    /// The confusion matrix: `[actual][predicted]` counts.
    pub fn confusion_matrix(&self) -> Vec<Vec<usize>> {
        let c = self.classes.len();
        let mut m = vec![vec![0; c]; c];
        for (&a, &p) in self.actual.iter().zip(&self.predicted) {
            m[a as usize][p as usize] += 1;
        }
        m
    }

    /// The pairs `(actual, predicted, count)` of different classes that the model confused at
    /// least `min_count` times, most first, as fastai's `most_confused(min_val)` lists them
    /// (equal counts in the confusion matrix's row-major order; `min_count` 0 lists every pair
    /// of different classes, as fastai's `min_val=0` does).
    pub fn most_confused(&self, min_count: usize) -> Vec<(String, String, usize)> {
        let mut pairs = Vec::new();
        for (a, row) in self.confusion_matrix().iter().enumerate() {
            for (p, &count) in row.iter().enumerate() {
                if a != p && count >= min_count {
                    pairs.push((self.classes[a].clone(), self.classes[p].clone(), count));
                }
            }
        }
        pairs.sort_by_key(|p| std::cmp::Reverse(p.2));
        pairs
    }

    /// The [`top_losses`](Self::top_losses) as pictures, `columns` to a row, each titled
    /// with its predicted and actual class, its loss and the probability of the predicted
    /// class (fastai's `plot_top_losses`). The pictures are the samples as `loader` delivers
    /// them ([`DataLoader::sample`]: its seed and epoch, so the same augmentation), as the
    /// model saw them; give the loader the logits came from.
    pub fn plot_top_losses<D: Dataset + 'static>(
        &self,
        loader: &DataLoader<D>,
        k: usize,
        columns: usize,
    ) -> Result<Figure> {
        let top = self.top_losses(k);
        if top.is_empty() {
            return Err(Error::InvalidArgument("plot_top_losses: no samples".into()));
        }
        let mut images = Vec::new();
        for t in &top {
            images.push(loader.sample(t.index)?.0.to_tensor());
        }
        let titles: Vec<String> = top
            .iter()
            .map(|t| {
                format!(
                    "{} / {}\n{:.2} / {:.2}",
                    self.classes[t.predicted as usize],
                    self.classes[t.actual as usize],
                    t.loss,
                    t.probability
                )
            })
            .collect();
        image_grid(&Tensor::stack(&images, 0), &titles, columns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_inputs_are_named() {
        let logits = Tensor::zeros([2, 3], (Kind::Float, Device::Cpu));
        let names = || vec!["a".to_string(), "b".into(), "c".into()];
        let err = |r: Result<Interpretation>| r.unwrap_err().to_string();
        assert!(err(Interpretation::new(&logits, &[0], names())).contains("2 rows of logits"));
        assert!(err(Interpretation::new(&logits, &[0, 3], names())).contains("label 3"));
        assert!(err(Interpretation::new(&logits, &[0, 1], vec![])).contains("0 class names"));
        let flat = Tensor::zeros([6], (Kind::Float, Device::Cpu));
        assert!(err(Interpretation::new(&flat, &[0], names())).contains("[N, classes]"));
    }

    #[test]
    fn most_confused_counts_off_the_diagonal_most_first() {
        // actual -> predicted: a->b twice, c->a twice, b->c once, a->a once.
        let pick = |class: usize| {
            let mut row = [0.0f32; 3];
            row[class] = 5.0;
            row
        };
        let rows = [pick(1), pick(1), pick(0), pick(0), pick(2), pick(0)];
        let logits = Tensor::from_slice(&rows.concat()).view([6, 3]);
        let names = vec!["a".to_string(), "b".into(), "c".into()];
        let interp = Interpretation::new(&logits, &[0, 0, 2, 2, 1, 0], names).unwrap();
        let s = |a: &str, p: &str, n| (a.to_string(), p.to_string(), n);
        assert_eq!(interp.most_confused(1), [s("a", "b", 2), s("c", "a", 2), s("b", "c", 1)]);
        assert_eq!(interp.most_confused(2), [s("a", "b", 2), s("c", "a", 2)]);
        assert_eq!(interp.confusion_matrix()[0], [1, 2, 0]);
    }
}
