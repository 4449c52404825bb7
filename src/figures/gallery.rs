//! [`class_gallery`]: a few pictures of each class of a data set in a grid, titled with the
//! class names: the first look at a data set every course notebook takes.
use tch::Tensor;

use super::figure::Figure;
use super::grid::image_grid;
use crate::data::Dataset;
use crate::transforms::aug_rng;
use crate::{Error, Result};

/// The first `per_class` samples of each of `classes` (in data set order), as the data set
/// delivers them (its transform applied with the augmentation stream of seed 0, epoch 0, as a
/// loader's first epoch would), in a grid of `columns` columns titled with `names[label]`.
/// Pass a data set whose transform ends in `ToTensor` without `Normalize`, so the pictures show
/// as they are.
///
/// Errors: a class with fewer than `per_class` samples or a label without a name
/// ([`Error::InvalidArgument`], naming it), and the data set's and [`image_grid`]'s own.
///
/// ```no_run
/// # use trainbook::prelude::*;
/// # fn f() -> Result<()> {
/// let val = ImageFolder::new("data/designsafe/Dataset_2/Validation")?
///     .with_transform(compose![Resize::new((96, 128)), ToTensor]);
/// let names = val.classes();
/// let figure = class_gallery(&val, 0..3, 4, &names, 4)?; // 4 pictures of C0, C2 and C4
/// # Ok(()) }
/// ```
pub fn class_gallery(
    dataset: &dyn Dataset,
    classes: impl IntoIterator<Item = i64>,
    per_class: usize,
    names: &[String],
    columns: usize,
) -> Result<Figure> {
    let mut picks = Vec::new();
    for class in classes {
        let found: Vec<usize> =
            (0..dataset.len()).filter(|&i| dataset.label(i) == class).take(per_class).collect();
        if found.len() < per_class {
            return Err(Error::InvalidArgument(format!(
                "class_gallery: class {class} has {} samples, {per_class} asked for",
                found.len()
            )));
        }
        picks.extend(found);
    }
    let mut pictures = Vec::with_capacity(picks.len());
    let mut titles = Vec::with_capacity(picks.len());
    for &i in &picks {
        let (image, label) = dataset.get(i, &mut aug_rng(0, 0, i as u64))?;
        let name = usize::try_from(label).ok().and_then(|l| names.get(l)).ok_or_else(|| {
            Error::InvalidArgument(format!("class_gallery: label {label} has no name"))
        })?;
        pictures.push(image.to_tensor());
        titles.push(name.clone());
    }
    if pictures.is_empty() {
        return Err(Error::InvalidArgument("class_gallery: no class asked for".into()));
    }
    image_grid(&Tensor::stack(&pictures, 0), &titles, columns)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::TensorDataset;
    use tch::{Device, Kind};

    #[test]
    fn the_first_pictures_of_each_class_with_their_names() {
        let images = Tensor::rand([6, 3, 8, 8], (Kind::Float, Device::Cpu));
        let labels = Tensor::from_slice(&[1i64, 0, 1, 0, 2, 1]);
        let names: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
        let ds = TensorDataset::new(&images, &labels, names.clone()).unwrap();
        let figure = class_gallery(&ds, [1, 0], 2, &names, 2).unwrap();
        assert!(figure.width() > 0 && figure.height() > 0);
        let err = class_gallery(&ds, [2], 2, &names, 2).unwrap_err().to_string();
        assert!(err.contains("class 2 has 1 samples"), "{err}");
        assert!(class_gallery(&ds, [1], 1, &names[..1], 1).is_err(), "label 1 has no name");
    }
}
