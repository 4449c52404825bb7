//! MNIST from the standard IDX files (plain or `.gz`), as `torchvision.datasets.MNIST` reads
//! them: images are 28x28 grey ("L") pictures, labels 0-9.
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::data::Dataset;
use crate::transforms::{AugRng, Compose, Image, TensorImage};
use crate::{Error, Result, WithPath};

/// torchvision's MNIST class names.
pub const MNIST_CLASSES: [&str; 10] = [
    "0 - zero",
    "1 - one",
    "2 - two",
    "3 - three",
    "4 - four",
    "5 - five",
    "6 - six",
    "7 - seven",
    "8 - eight",
    "9 - nine",
];

/// `torchvision.datasets.MNIST(root, train, transform)` read from the four IDX files (plain or
/// `.gz`) in `root` or torchvision's `root/MNIST/raw`: 28x28 grey images with labels 0-9
/// (60,000 for training, 10,000 for testing). The whole set is held in memory; the transform
/// (default: `ToTensor` only) runs when a sample is read. [`ensure_mnist`](crate::data::ensure_mnist)
/// fetches or builds the files.
///
/// # Example
///
/// ```no_run
/// # fn main() -> trainbook::Result<()> {
/// use trainbook::compose;
/// use trainbook::data::{DataLoader, Dataset, Mnist};
/// use trainbook::transforms::{Normalize, ToTensor};
/// // data/train-images-idx3-ubyte.gz, data/train-labels-idx1-ubyte.gz, ...
/// let train = Mnist::new("data", true)?
///     .with_transform(compose![ToTensor, Normalize::new(&[0.1307], &[0.3081])]);
/// println!("{} training images", train.len());
/// let mut loader = DataLoader::new(train, 64).shuffle(true).seed(1);
/// for batch in loader.iter() {
///     let batch = batch?; // images [64, 1, 28, 28], labels [64]
///     println!("{:?}", batch.images.size());
/// }
/// # Ok(()) }
/// ```
pub struct Mnist {
    images: Vec<u8>,
    labels: Vec<u8>,
    rows: usize,
    cols: usize,
    transform: Option<Compose>,
}

impl std::fmt::Debug for Mnist {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Mnist({} images of {}x{}, transform: {:?})",
            self.labels.len(),
            self.rows,
            self.cols,
            self.transform
        )
    }
}

/// Finds `name` (or `name.gz`) in `root` or torchvision's `root/MNIST/raw`.
fn find(root: &Path, name: &str) -> Result<PathBuf> {
    let dirs = [root.to_path_buf(), root.join("MNIST").join("raw")];
    for dir in &dirs {
        for candidate in [dir.join(name), dir.join(format!("{name}.gz"))] {
            if candidate.is_file() {
                return Ok(candidate);
            }
        }
    }
    Err(Error::Dataset(format!(
        "MNIST file {name} not found in {} or {}/MNIST/raw; run `python3 data-scripts/mnist.py {}` to fetch or build it",
        root.display(),
        root.display(),
        root.display()
    )))
}

/// Reads an IDX file (gunzipping `.gz`), checks its magic number, returns (dims, payload).
fn read_idx(path: &Path, magic: u32) -> Result<(Vec<usize>, Vec<u8>)> {
    let raw = std::fs::read(path).with_path(path)?;
    let bytes = if path.extension().is_some_and(|e| e == "gz") {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(&raw[..]).read_to_end(&mut out).with_path(path)?;
        out
    } else {
        raw
    };
    let bad = |why: String| Error::parse(path, "MNIST IDX file", why);
    if bytes.len() < 4 {
        return Err(bad("shorter than its header".into()));
    }
    let word = |i: usize| u32::from_be_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]);
    if word(0) != magic {
        return Err(bad(format!("magic number {:#010x}, expected {magic:#010x}", word(0))));
    }
    let ndim = (magic & 0xff) as usize;
    let header = 4 + 4 * ndim;
    if bytes.len() < header {
        return Err(bad("shorter than its header".into()));
    }
    let dims: Vec<usize> = (0..ndim).map(|d| word(4 + 4 * d) as usize).collect();
    let expected: usize = dims.iter().product();
    if bytes.len() - header != expected {
        return Err(bad(format!(
            "{} data bytes for dimensions {dims:?} ({expected} expected)",
            bytes.len() - header
        )));
    }
    Ok((dims, bytes[header..].to_vec()))
}

impl Mnist {
    /// `datasets.MNIST(root, train=...)`: the training files (`train-*`) or the test files
    /// (`t10k-*`). Errors: [`Error::Dataset`] when a file is missing (with how to get it) or
    /// malformed (magic number, size, labels outside 0-9); [`Error::Io`] when it cannot be
    /// read.
    pub fn new(root: impl AsRef<Path>, train: bool) -> Result<Mnist> {
        let root = root.as_ref();
        let prefix = if train { "train" } else { "t10k" };
        let (dims, images) =
            read_idx(&find(root, &format!("{prefix}-images-idx3-ubyte"))?, 0x0000_0803)?;
        let (label_dims, labels) =
            read_idx(&find(root, &format!("{prefix}-labels-idx1-ubyte"))?, 0x0000_0801)?;
        if dims[0] != label_dims[0] {
            return Err(Error::Dataset(format!(
                "MNIST {prefix}: {} images but {} labels",
                dims[0], label_dims[0]
            )));
        }
        if let Some(bad) = labels.iter().find(|&&l| l > 9) {
            return Err(Error::Dataset(format!("MNIST {prefix}: label {bad} outside 0-9")));
        }
        Ok(Mnist { images, labels, rows: dims[1], cols: dims[2], transform: None })
    }

    /// Sets the transform applied in [`Dataset::get`] (default: `ToTensor` only).
    pub fn with_transform(mut self, transform: Compose) -> Mnist {
        self.transform = Some(transform);
        self
    }

    /// The grey image of sample `index`, before any transform (for showing samples).
    ///
    /// # Panics
    ///
    /// When `index >= self.len()`.
    pub fn image(&self, index: usize) -> Image {
        let n = self.rows * self.cols;
        Image::from_raw(
            self.cols as u32,
            self.rows as u32,
            1,
            self.images[index * n..(index + 1) * n].to_vec(),
        )
        .expect("sizes checked when reading")
    }

    /// The whole set as tensors: images `[N, 1, H, W]` in [0, 1] and labels `[N]` (int64),
    /// for training directly from memory without a loader.
    pub fn to_tensors(&self) -> (tch::Tensor, tch::Tensor) {
        let n = self.labels.len() as i64;
        let images = tch::Tensor::from_slice(&self.images)
            .view([n, 1, self.rows as i64, self.cols as i64])
            .to_kind(tch::Kind::Float)
            / 255.0;
        let labels = tch::Tensor::from_slice(&self.labels).to_kind(tch::Kind::Int64);
        (images, labels)
    }
}

impl Dataset for Mnist {
    fn len(&self) -> usize {
        self.labels.len()
    }

    fn get(&self, index: usize, rng: &mut AugRng) -> Result<(TensorImage, i64)> {
        if index >= self.labels.len() {
            return Err(Error::InvalidArgument(format!(
                "MNIST index {index} out of range ({} samples)",
                self.labels.len()
            )));
        }
        let img = self.image(index);
        let tensor = match &self.transform {
            Some(t) => t.apply_image(img, rng)?,
            None => TensorImage::from_image(&img),
        };
        Ok((tensor, self.labels[index] as i64))
    }

    fn label(&self, index: usize) -> i64 {
        self.labels[index] as i64
    }

    fn classes(&self) -> Vec<String> {
        MNIST_CLASSES.iter().map(|s| s.to_string()).collect()
    }
}
