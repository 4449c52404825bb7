//! `ImageFolder`: `root/<class>/<image>` like `torchvision.datasets.ImageFolder`: classes are
//! the sorted sub-folder names, files are found recursively (sorted) by torchvision's
//! extensions, and every image is decoded to RGB.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use crate::data::decode::rgb::load_rgb;
use crate::data::Dataset;
use crate::transforms::{AugRng, Compose, Image, TensorImage};
use crate::{Error, Result, WithPath};

/// torchvision's `IMG_EXTENSIONS` (compared case-insensitively).
pub const IMG_EXTENSIONS: [&str; 9] =
    [".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp"];

/// `torchvision.datasets.ImageFolder(root, transform)`: images in `root/<class>/**/<file>`,
/// labelled by the index of their class folder in sorted order. Sample order, class indices
/// and accepted extensions ([`IMG_EXTENSIONS`]) are torchvision's. Images are decoded to RGB
/// when a sample is read, then go through the transform (default: `ToTensor` only).
///
/// # Example
///
/// ```no_run
/// # fn main() -> trainbook::Result<()> {
/// use trainbook::compose;
/// use trainbook::data::{DataLoader, Dataset, ImageFolder};
/// use trainbook::transforms::{Normalize, RandomHorizontalFlip, RandomResizedCrop, ToTensor};
/// // data/train/cat/0001.jpg, data/train/dog/0002.png, ...
/// let train = ImageFolder::new("data/train")?.skip_unreadable().with_transform(compose![
///     RandomResizedCrop::new(224),
///     RandomHorizontalFlip::default(),
///     ToTensor,
///     Normalize::imagenet(),
/// ]);
/// println!("{} images, classes {:?}", train.len(), train.classes());
/// let mut loader = DataLoader::new(train, 32).shuffle(true);
/// for batch in loader.iter() {
///     let batch = batch?; // images [32, 3, 224, 224], labels [32]
///     println!("{:?}", batch.images.size());
/// }
/// # Ok(()) }
/// ```
pub struct ImageFolder {
    root: PathBuf,
    classes: Vec<String>,
    samples: Vec<(PathBuf, i64)>,
    skipped: Vec<(PathBuf, String)>,
    transform: Option<Compose>,
    /// The decoded pictures, one slot per sample, filled on first use ([`ImageFolder::cache_decoded`]).
    cache: Option<Arc<Vec<OnceLock<Arc<Image>>>>>,
}

impl std::fmt::Debug for ImageFolder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ImageFolder({}: {} images, classes {:?})",
            self.root.display(),
            self.samples.len(),
            self.classes
        )
    }
}

fn has_image_extension(name: &str) -> bool {
    let lower = name.to_lowercase();
    IMG_EXTENSIONS.iter().any(|ext| lower.ends_with(ext))
}

/// `os.walk(dir, followlinks=True)` sorted by directory, files sorted by name.
fn walk_sorted(dir: &Path, out: &mut BTreeMap<String, Vec<String>>) -> Result<()> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).with_path(dir)? {
        let entry = entry.with_path(dir)?;
        let path = entry.path();
        if path.is_dir() {
            walk_sorted(&path, out)?;
        } else if let Some(name) = entry.file_name().to_str() {
            files.push(name.to_string());
        }
    }
    files.sort();
    out.insert(dir.to_string_lossy().into_owned(), files);
    Ok(())
}

impl ImageFolder {
    /// Scans `root` (following symbolic links); no image is read yet. Errors: [`Error::Io`] for
    /// a missing or unreadable root, [`Error::Dataset`] for no class folders or a class folder
    /// without images.
    pub fn new(root: impl AsRef<Path>) -> Result<ImageFolder> {
        let root = root.as_ref().to_path_buf();
        let mut classes: Vec<String> = std::fs::read_dir(&root)
            .with_path(&root)?
            .filter_map(|e| e.ok())
            .filter(|e| e.path().is_dir())
            .filter_map(|e| e.file_name().to_str().map(str::to_string))
            .collect();
        classes.sort();
        if classes.is_empty() {
            return Err(Error::Dataset(format!(
                "{}: no class folders (expected root/<class>/<image>)",
                root.display()
            )));
        }
        let mut samples = Vec::new();
        let mut empty = Vec::new();
        for (index, class) in classes.iter().enumerate() {
            let mut tree = BTreeMap::new();
            walk_sorted(&root.join(class), &mut tree)?;
            let before = samples.len();
            for (dir, files) in tree {
                for name in files.into_iter().filter(|n| has_image_extension(n)) {
                    samples.push((Path::new(&dir).join(name), index as i64));
                }
            }
            if samples.len() == before {
                empty.push(class.clone());
            }
        }
        if !empty.is_empty() {
            return Err(Error::Dataset(format!(
                "{}: no images ({}) in class folder(s) {}",
                root.display(),
                IMG_EXTENSIONS.join(" "),
                empty.join(", ")
            )));
        }
        Ok(ImageFolder {
            root,
            classes,
            samples,
            skipped: Vec::new(),
            transform: None,
            cache: None,
        })
    }

    /// A folder data set over samples found elsewhere (a layout other than `root/<class>/`),
    /// read and transformed like the scanned ones.
    pub(crate) fn from_parts(
        root: PathBuf,
        classes: Vec<String>,
        samples: Vec<(PathBuf, i64)>,
    ) -> ImageFolder {
        ImageFolder { root, classes, samples, skipped: Vec::new(), transform: None, cache: None }
    }

    /// Sets the transform applied in [`Dataset::get`] (default: `ToTensor` only).
    pub fn with_transform(mut self, transform: Compose) -> ImageFolder {
        self.transform = Some(transform);
        self
    }

    /// Keeps every picture in memory once decoded (its RGB bytes: width x height x 3 per
    /// image), so that later epochs transform it without reading and decoding the file again;
    /// what the transforms see is the same bytes as a fresh decode. For data sets that fit in
    /// memory (the course's, a notebook's): ImageNet's 1.28 million pictures would take over
    /// 100 GB. (torchvision's `--cache-dataset` caches the list of files, not the pixels.)
    pub fn cache_decoded(mut self) -> ImageFolder {
        self.cache = Some(Arc::new((0..self.samples.len()).map(|_| OnceLock::new()).collect()));
        self
    }

    /// Decodes every image once (on all cores) and drops the unreadable ones instead of failing
    /// later; [`skipped`](Self::skipped) lists them with the reason.
    pub fn skip_unreadable(mut self) -> ImageFolder {
        let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
        let chunk = self.samples.len().div_ceil(threads).max(1);
        let bad: Vec<(usize, String)> = std::thread::scope(|s| {
            let handles: Vec<_> = self
                .samples
                .chunks(chunk)
                .enumerate()
                .map(|(c, part)| {
                    s.spawn(move || {
                        part.iter()
                            .enumerate()
                            .filter_map(|(i, (path, _))| {
                                load_rgb(path).err().map(|e| (c * chunk + i, e.to_string()))
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles.into_iter().flat_map(|h| h.join().unwrap_or_default()).collect()
        });
        for (i, why) in bad.iter().rev() {
            let (path, _) = self.samples.remove(*i);
            self.skipped.push((path, why.clone()));
        }
        self.skipped.reverse();
        // The cache's slots follow the samples: make them again for the remaining ones.
        if self.cache.is_some() {
            self = self.cache_decoded();
        }
        self
    }

    /// The directory given to [`new`](Self::new).
    pub fn root(&self) -> &Path {
        &self.root
    }
    /// `class_to_idx` of torchvision.
    pub fn class_to_idx(&self) -> BTreeMap<String, i64> {
        self.classes.iter().enumerate().map(|(i, c)| (c.clone(), i as i64)).collect()
    }
    /// The classes as a person reads them: each folder name through [`readable_class_name`]
    /// (Stanford Dogs' `n02085620-Chihuahua` becomes `Chihuahua`).
    pub fn readable_classes(&self) -> Vec<String> {
        self.classes.iter().map(|c| readable_class_name(c)).collect()
    }
    /// `(path, class index)` of every image, in torchvision's order.
    pub fn samples(&self) -> &[(PathBuf, i64)] {
        &self.samples
    }
    /// `targets` of torchvision.
    pub fn targets(&self) -> Vec<i64> {
        self.samples.iter().map(|(_, t)| *t).collect()
    }
    /// Files dropped by [`skip_unreadable`](Self::skip_unreadable), with the reason.
    pub fn skipped(&self) -> &[(PathBuf, String)] {
        &self.skipped
    }
}

/// A class folder's name as a person reads it: a leading WordNet id (`n` and eight digits, then
/// `-`, as in Stanford Dogs' and ImageNet's folders) is dropped and underscores become spaces;
/// other names are returned as they are.
///
/// ```
/// use trainbook::data::readable_class_name;
/// assert_eq!(readable_class_name("n02085782-Japanese_spaniel"), "Japanese spaniel");
/// assert_eq!(readable_class_name("C4"), "C4");
/// ```
pub fn readable_class_name(folder: &str) -> String {
    let b = folder.as_bytes();
    let wnid =
        b.len() > 10 && b[0] == b'n' && b[1..9].iter().all(u8::is_ascii_digit) && b[9] == b'-';
    let name = if wnid { &folder[10..] } else { folder };
    name.replace('_', " ")
}

impl Dataset for ImageFolder {
    fn len(&self) -> usize {
        self.samples.len()
    }

    fn get(&self, index: usize, rng: &mut AugRng) -> Result<(TensorImage, i64)> {
        let (path, target) = self.samples.get(index).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "ImageFolder index {index} out of range ({} samples)",
                self.samples.len()
            ))
        })?;
        let img = match self.cache.as_ref().and_then(|c| c.get(index)) {
            Some(slot) => match slot.get() {
                Some(img) => Image::clone(img),
                None => {
                    let img = load_rgb(path)?;
                    let _ = slot.set(Arc::new(img.clone()));
                    img
                }
            },
            None => load_rgb(path)?,
        };
        let tensor = match &self.transform {
            Some(t) => t
                .apply_image(img, rng)
                .map_err(|e| Error::Dataset(format!("{}: {e}", path.display())))?,
            None => TensorImage::from_image(&img),
        };
        Ok((tensor, *target))
    }

    fn label(&self, index: usize) -> i64 {
        self.samples[index].1
    }

    fn classes(&self) -> Vec<String> {
        self.classes.clone()
    }
}
