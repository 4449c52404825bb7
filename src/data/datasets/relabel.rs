//! `Relabel`: a data set whose labels go through a `class_to_idx` map, from class name to a new
//! index: to train or evaluate a subset of ImageNet's classes with ImageNet's 1000 indices (a
//! pretrained head), or to merge and reorder classes. [`read_class_to_idx`] reads such a map.
use std::collections::BTreeMap;
use std::path::Path;

use crate::data::Dataset;
use crate::transforms::{AugRng, TensorImage};
use crate::{Error, Result, WithPath};

/// A data set with its labels remapped by class name: sample `i` keeps its image, and its label
/// becomes `class_to_idx[dataset.classes()[old label]]`.
///
/// [`classes`](Dataset::classes) has one entry per new index up to the largest in the map:
/// the class (or classes, joined with `|`) mapped to it, or the index itself where no class is.
///
/// ```
/// use std::collections::BTreeMap;
/// use trainbook::data::{Dataset, Relabel, TensorDataset};
/// use trainbook::tch::{Device, Kind, Tensor};
/// # fn main() -> trainbook::Result<()> {
/// let images = Tensor::zeros([3, 1, 2, 2], (Kind::Float, Device::Cpu));
/// let labels = Tensor::from_slice(&[0i64, 1, 1]);
/// let data = TensorDataset::new(&images, &labels, vec!["n01443537".into(), "n01530575".into()])?;
/// // ImageNet indices of the two classes (e.g. from read_class_to_idx("imagenet.tsv")).
/// let map = BTreeMap::from([("n01443537".to_string(), 1), ("n01530575".to_string(), 10)]);
/// let data = Relabel::new(data, &map)?;
/// assert_eq!((data.label(0), data.label(2), data.classes().len()), (1, 10, 11));
/// let missing = BTreeMap::from([("n01443537".to_string(), 1)]);
/// let data = TensorDataset::new(&images, &labels, vec!["n01443537".into(), "n01530575".into()])?;
/// assert!(Relabel::new(data, &missing).unwrap_err().to_string().contains("n01530575"));
/// # Ok(()) }
/// ```
pub struct Relabel<D: Dataset> {
    dataset: D,
    /// New label of each old label.
    table: Vec<i64>,
    classes: Vec<String>,
}

impl<D: Dataset> std::fmt::Debug for Relabel<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Relabel({} samples, labels {:?})", self.dataset.len(), self.table)
    }
}

impl<D: Dataset> Relabel<D> {
    /// Relabels `dataset` through `class_to_idx` (class name -> new index; it may hold more
    /// classes than the data set has). Errors: [`Error::Dataset`] naming a class of the data
    /// set that is not in the map, [`Error::InvalidArgument`] for a negative index.
    pub fn new(dataset: D, class_to_idx: &BTreeMap<String, i64>) -> Result<Relabel<D>> {
        if let Some((class, idx)) = class_to_idx.iter().find(|(_, &i)| i < 0) {
            return Err(Error::InvalidArgument(format!(
                "class_to_idx maps {class:?} to {idx}; indices must be non-negative"
            )));
        }
        let old = dataset.classes();
        let table = old
            .iter()
            .map(|class| {
                class_to_idx.get(class).copied().ok_or_else(|| {
                    Error::Dataset(format!(
                        "class {class:?} of the data set is not in the class_to_idx map ({} \
                         classes)",
                        class_to_idx.len()
                    ))
                })
            })
            .collect::<Result<Vec<i64>>>()?;
        let size = class_to_idx.values().max().map_or(0, |&m| m as usize + 1);
        let mut names: Vec<Vec<&str>> = vec![Vec::new(); size];
        for (class, &idx) in class_to_idx {
            names[idx as usize].push(class);
        }
        let classes = names
            .iter()
            .enumerate()
            .map(|(i, n)| if n.is_empty() { i.to_string() } else { n.join("|") })
            .collect();
        Ok(Relabel { dataset, table, classes })
    }

    /// Relabels `dataset` through the map in the file at `path` (see [`read_class_to_idx`]).
    pub fn from_file(dataset: D, path: impl AsRef<Path>) -> Result<Relabel<D>> {
        Relabel::new(dataset, &read_class_to_idx(path)?)
    }

    /// The data set with its original labels.
    pub fn inner(&self) -> &D {
        &self.dataset
    }

    /// The new label of each original label (index = old label).
    pub fn mapping(&self) -> &[i64] {
        &self.table
    }

    fn relabel(&self, old: i64) -> Option<i64> {
        usize::try_from(old).ok().and_then(|i| self.table.get(i)).copied()
    }
}

impl<D: Dataset> Dataset for Relabel<D> {
    fn len(&self) -> usize {
        self.dataset.len()
    }
    fn get(&self, index: usize, rng: &mut AugRng) -> Result<(TensorImage, i64)> {
        let (image, old) = self.dataset.get(index, rng)?;
        let new = self.relabel(old).ok_or_else(|| {
            Error::Dataset(format!(
                "sample {index} has label {old}, but the data set has {} classes",
                self.table.len()
            ))
        })?;
        Ok((image, new))
    }
    /// The new label; -1 when the data set's own label is not one of its classes.
    fn label(&self, index: usize) -> i64 {
        self.relabel(self.dataset.label(index)).unwrap_or(-1)
    }
    fn classes(&self) -> Vec<String> {
        self.classes.clone()
    }
    fn target(&self, index: usize) -> Option<Vec<f32>> {
        self.dataset.target(index)
    }
    fn extra_inputs(&self, index: usize, rng: &mut AugRng) -> Result<Vec<tch::Tensor>> {
        self.dataset.extra_inputs(index, rng)
    }
}

/// Reads a `class_to_idx` map from `path`, in one of three formats:
///
/// - text, one class a line: `name<TAB>index` (or separated by spaces; `#` starts a comment
///   line), e.g. `"n01440764\t0"`;
/// - JSON `{"name": index, ...}` (torchvision's `class_to_idx`);
/// - JSON `{"index": ["name", "readable name"], ...}` (Keras' `imagenet_class_index.json`).
///
/// Errors: [`Error::Io`] naming a missing file; [`Error::Parse`] naming the line or entry that
/// is malformed or names a class twice.
///
/// ```
/// # fn main() -> trainbook::Result<()> {
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("map.tsv");
/// std::fs::write(&path, "n01440764\t0\nn01443537\t1\n").unwrap();
/// let map = trainbook::data::read_class_to_idx(&path)?;
/// assert_eq!(map["n01443537"], 1);
/// # Ok(()) }
/// ```
pub fn read_class_to_idx(path: impl AsRef<Path>) -> Result<BTreeMap<String, i64>> {
    let path = path.as_ref();
    let text = std::fs::read_to_string(path).with_path(path)?;
    const WHAT: &str = "class_to_idx map";
    let mut map = BTreeMap::new();
    let mut insert = |class: String, idx: i64, at: String| {
        if idx < 0 {
            return Err(Error::parse(path, WHAT, format!("{at}: negative index {idx}")));
        }
        match map.insert(class.clone(), idx) {
            Some(_) => Err(Error::parse(path, WHAT, format!("{at}: class {class:?} given twice"))),
            None => Ok(()),
        }
    };
    if text.trim_start().starts_with('{') {
        let json: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(&text).map_err(|e| Error::parse(path, WHAT, e))?;
        for (key, value) in json {
            let at = format!("entry {key:?}");
            if let Some(idx) = value.as_i64() {
                insert(key, idx, at)?;
            } else if let (Some(name), Ok(idx)) =
                (value.get(0).and_then(|v| v.as_str()), key.parse::<i64>())
            {
                insert(name.to_string(), idx, at)?;
            } else {
                return Err(Error::parse(
                    path,
                    WHAT,
                    format!("{at}: expected an index, or [\"name\", ...] under an index key"),
                ));
            }
        }
    } else {
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let at = format!("line {}", n + 1);
            let mut fields = line.split_whitespace();
            let parsed = match (fields.next(), fields.next(), fields.next()) {
                (Some(class), Some(idx), None) => idx.parse::<i64>().ok().map(|i| (class, i)),
                _ => None,
            };
            let (class, idx) = parsed.ok_or_else(|| {
                Error::parse(path, WHAT, format!("{at}: expected `name<TAB>index`, got {line:?}"))
            })?;
            insert(class.to_string(), idx, at)?;
        }
    }
    Ok(map)
}
