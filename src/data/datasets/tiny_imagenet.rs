//! `TinyImageNet`: the Tiny ImageNet 200 archive (`tiny-imagenet-200.zip`) read as it unpacks,
//! with no restructuring:
//!
//! ```text
//! root/wnids.txt                          the 200 class ids (WordNet ids), one a line
//! root/words.txt                          wnid<TAB>readable names, comma-separated
//! root/train/<wnid>/images/*.JPEG         500 training images per class
//! root/train/<wnid>/<wnid>_boxes.txt      (bounding boxes, not read)
//! root/val/images/*.JPEG                  10,000 validation images
//! root/val/val_annotations.txt            file<TAB>wnid<TAB>x0<TAB>y0<TAB>x1<TAB>y1
//! ```
//!
//! Classes are the wnids in sorted order, which is how torchvision's `ImageFolder(root/train)`
//! orders the training folders, so the training labels equal that `ImageFolder`'s targets.
//! Images are decoded and transformed exactly like [`ImageFolder`]'s. The unlabelled `test/`
//! split is not read.
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::data::{Dataset, ImageFolder};
use crate::transforms::{AugRng, Compose, TensorImage};
use crate::{Error, Result, WithPath};

/// Which part of [`TinyImageNet`] to read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Split {
    /// `root/train/<wnid>/images/`: 500 images per class.
    Train,
    /// `root/val/images/`, labelled by `root/val/val_annotations.txt`: 50 per class.
    Val,
}

impl std::str::FromStr for Split {
    type Err = Error;
    /// `"train"` or `"val"` (also `"validation"`).
    fn from_str(s: &str) -> Result<Split> {
        match s {
            "train" => Ok(Split::Train),
            "val" | "validation" => Ok(Split::Val),
            _ => Err(Error::InvalidArgument(format!(
                "Tiny ImageNet split {s:?}: expected \"train\" or \"val\""
            ))),
        }
    }
}

/// Tiny ImageNet 200 in its archive layout (see the module documentation).
///
/// ```
/// use trainbook::compose;
/// use trainbook::data::{ensure_tiny_imagenet, DataLoader, Dataset, Split, TinyImageNet};
/// use trainbook::transforms::{Normalize, RandomHorizontalFlip, ToTensor};
/// # fn main() -> trainbook::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let root = dir.path().join("tiny-imagenet-200");
/// ensure_tiny_imagenet(&root, true)?; // the generated stand-in, unless the real set is there
/// let train = TinyImageNet::new(&root, Split::Train)?.with_transform(compose![
///     RandomHorizontalFlip::default(),
///     ToTensor,
///     Normalize::imagenet(),
/// ]);
/// let val = TinyImageNet::new(&root, Split::Val)?;
/// assert_eq!(train.classes(), val.classes()); // sorted wnids
/// println!("{} classes, first {:?}", train.classes().len(), train.class_names()[0]);
/// let mut loader = DataLoader::new(train, 32).shuffle(true);
/// let batch = loader.iter().next().unwrap()?;
/// assert_eq!(batch.images.size(), [32, 3, 64, 64]);
/// # Ok(()) }
/// ```
pub struct TinyImageNet {
    root: PathBuf,
    split: Split,
    wnids: Vec<String>,
    names: Vec<String>,
    images: ImageFolder,
}

impl std::fmt::Debug for TinyImageNet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "TinyImageNet({}, {:?}: {} images, {} classes)",
            self.root.display(),
            self.split,
            self.images.len(),
            self.wnids.len()
        )
    }
}

/// The non-empty lines of `path`, trimmed.
fn read_lines(path: &Path) -> Result<Vec<(usize, String)>> {
    let text = std::fs::read_to_string(path).with_path(path)?;
    Ok(text
        .lines()
        .enumerate()
        .map(|(n, l)| (n + 1, l.trim().to_string()))
        .filter(|(_, l)| !l.is_empty())
        .collect())
}

/// The sorted wnids of `root/wnids.txt`.
fn read_wnids(root: &Path) -> Result<Vec<String>> {
    let path = root.join("wnids.txt");
    let mut wnids = Vec::new();
    let mut seen = BTreeSet::new();
    for (n, line) in read_lines(&path)? {
        if !seen.insert(line.clone()) {
            return Err(Error::parse(&path, "wnids.txt", format!("line {n}: {line} repeats")));
        }
        wnids.push(line);
    }
    if wnids.is_empty() {
        return Err(Error::parse(&path, "wnids.txt", "no class ids"));
    }
    wnids.sort();
    Ok(wnids)
}

/// The first readable name of each wnid in `root/words.txt`.
fn read_names(root: &Path, wnids: &[String]) -> Result<Vec<String>> {
    let path = root.join("words.txt");
    let wanted: BTreeSet<&str> = wnids.iter().map(String::as_str).collect();
    let mut names = BTreeMap::new();
    for (_, line) in read_lines(&path)? {
        if let Some((wnid, words)) = line.split_once('\t') {
            if wanted.contains(wnid.trim()) {
                let first = words.split(',').next().unwrap_or_default().trim();
                names.entry(wnid.trim().to_string()).or_insert_with(|| first.to_string());
            }
        }
    }
    wnids
        .iter()
        .map(|w| {
            names.get(w).cloned().ok_or_else(|| {
                Error::parse(&path, "words.txt", format!("no line for class {w} of wnids.txt"))
            })
        })
        .collect()
}

/// `(path, label)` of the validation images, in the order of `val_annotations.txt`.
fn read_val(root: &Path, wnids: &[String]) -> Result<Vec<(PathBuf, i64)>> {
    let path = root.join("val/val_annotations.txt");
    const WHAT: &str = "Tiny ImageNet val_annotations.txt";
    let index: BTreeMap<&str, i64> =
        wnids.iter().enumerate().map(|(i, w)| (w.as_str(), i as i64)).collect();
    let images = root.join("val/images");
    let mut samples = Vec::new();
    for (n, line) in read_lines(&path)? {
        let mut fields = line.split('\t').map(str::trim);
        let (file, wnid) = match (fields.next(), fields.next()) {
            (Some(f), Some(w)) if !f.is_empty() && !w.is_empty() => (f, w),
            _ => {
                let message = format!("line {n}: expected `file<TAB>wnid<TAB>box`, got {line:?}");
                return Err(Error::parse(&path, WHAT, message));
            }
        };
        let label = *index.get(wnid).ok_or_else(|| {
            Error::parse(&path, WHAT, format!("line {n}: unknown wnid {wnid} (not in wnids.txt)"))
        })?;
        let image = images.join(file);
        std::fs::metadata(&image).with_path(&image)?;
        samples.push((image, label));
    }
    if samples.is_empty() {
        return Err(Error::parse(&path, WHAT, "no images listed"));
    }
    Ok(samples)
}

impl TinyImageNet {
    /// Reads the lists of `root` (the unpacked `tiny-imagenet-200/`) for `split`; no image is
    /// decoded yet. Errors: [`Error::Io`] naming a missing file or folder (`wnids.txt`,
    /// `words.txt`, `train/`, `val/val_annotations.txt`, a listed validation image),
    /// [`Error::Parse`] for a malformed line (naming it, and any wnid not in `wnids.txt`),
    /// [`Error::Dataset`] when the training folders are not the classes of `wnids.txt`.
    pub fn new(root: impl AsRef<Path>, split: Split) -> Result<TinyImageNet> {
        let root = root.as_ref().to_path_buf();
        let wnids = read_wnids(&root)?;
        let names = read_names(&root, &wnids)?;
        let images = match split {
            Split::Train => {
                let train = root.join("train");
                std::fs::metadata(&train).with_path(&train)?;
                let folder = ImageFolder::new(&train)?;
                if folder.classes() != wnids {
                    let folders: BTreeSet<String> = folder.classes().into_iter().collect();
                    let listed: BTreeSet<String> = wnids.iter().cloned().collect();
                    let missing: Vec<_> = listed.difference(&folders).cloned().collect();
                    let extra: Vec<_> = folders.difference(&listed).cloned().collect();
                    return Err(Error::Dataset(format!(
                        "{}: the class folders differ from wnids.txt (missing: {}; not listed: {})",
                        train.display(),
                        missing.join(", "),
                        extra.join(", ")
                    )));
                }
                folder
            }
            Split::Val => {
                let samples = read_val(&root, &wnids)?;
                ImageFolder::from_parts(root.join("val/images"), wnids.clone(), samples)
            }
        };
        Ok(TinyImageNet { root, split, wnids, names, images })
    }

    /// Sets the transform applied in [`Dataset::get`] (default: `ToTensor` only), as
    /// [`ImageFolder::with_transform`].
    pub fn with_transform(mut self, transform: Compose) -> TinyImageNet {
        self.images = self.images.with_transform(transform);
        self
    }

    /// The readable name of each class (the first name of its `words.txt` line, e.g.
    /// "goldfish" for n01443537), index = label.
    pub fn class_names(&self) -> &[String] {
        &self.names
    }
    /// The class ids (sorted wnids), index = label; the same as [`Dataset::classes`].
    pub fn wnids(&self) -> &[String] {
        &self.wnids
    }
    /// `wnid -> label`, like torchvision's `class_to_idx` of `ImageFolder(root/train)`.
    pub fn class_to_idx(&self) -> BTreeMap<String, i64> {
        self.wnids.iter().enumerate().map(|(i, c)| (c.clone(), i as i64)).collect()
    }
    /// `(path, label)` of every image of the split, in order (training: `ImageFolder`'s order;
    /// validation: `val_annotations.txt`'s).
    pub fn samples(&self) -> &[(PathBuf, i64)] {
        self.images.samples()
    }
    /// The label of every sample, in order.
    pub fn targets(&self) -> Vec<i64> {
        self.images.targets()
    }
    /// The directory given to [`new`](Self::new).
    pub fn root(&self) -> &Path {
        &self.root
    }
    /// The split read.
    pub fn split(&self) -> Split {
        self.split
    }
}

impl Dataset for TinyImageNet {
    fn len(&self) -> usize {
        self.images.len()
    }
    fn get(&self, index: usize, rng: &mut AugRng) -> Result<(TensorImage, i64)> {
        self.images.get(index, rng)
    }
    fn label(&self, index: usize) -> i64 {
        self.images.label(index)
    }
    /// The sorted wnids.
    fn classes(&self) -> Vec<String> {
        self.wnids.clone()
    }
}
