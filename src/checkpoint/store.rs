//! Writing checkpoints atomically and durably (temporary directory, fsync, rename, fsync of the
//! parent), and finding the newest intact one (complete, known format, checksums right).
use std::io::Write;
use std::path::{Path, PathBuf};

use super::manifest::{upgrade_from_v1, FileEntry, Manifest, FORMAT_VERSION, MANIFEST};
use tch::Tensor;

use crate::{Error, Result, WithPath};

/// A checkpoint on disk whose manifest and files were checked.
#[derive(Clone, Debug)]
pub struct Checkpoint {
    /// The checkpoint's directory (e.g. `checkpoints/step-000001200`).
    pub dir: PathBuf,
    /// Its parsed `manifest.json`.
    pub manifest: Manifest,
}

/// What [`scan`] found: intact checkpoints (newest first) and damaged ones with the reason.
#[derive(Debug, Default)]
pub struct ScanReport {
    /// Intact checkpoints, highest global step first.
    pub valid: Vec<Checkpoint>,
    /// Damaged or unreadable checkpoint directories with the reason, sorted by path.
    pub invalid: Vec<(PathBuf, String)>,
}

fn write_synced(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut f = std::fs::File::create(path).with_path(path)?;
    f.write_all(bytes).with_path(path)?;
    f.sync_all().with_path(path)
}

fn sync_dir(dir: &Path) -> Result<()> {
    std::fs::File::open(dir).and_then(|d| d.sync_all()).with_path(dir)
}

/// Writes one file of a checkpoint at the path it is given.
pub type FileWriter<'a> = Box<dyn FnOnce(&Path) -> Result<()> + 'a>;

/// Writes `files` (each by its writer) and the manifest as `root/name`, atomically: a reader
/// sees either the whole checkpoint or none of it. An existing checkpoint of the same name is
/// replaced. `manifest.files` is filled in here (size and CRC32 of each file). Errors: the
/// writers' errors, and [`Error::Io`] naming the path that could not be written; nothing is
/// left behind on failure.
pub fn write_checkpoint(
    root: &Path,
    name: &str,
    mut manifest: Manifest,
    files: Vec<(&str, FileWriter<'_>)>,
) -> Result<Checkpoint> {
    std::fs::create_dir_all(root).with_path(root)?;
    let tmp = root.join(format!(".{name}.tmp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let result = (|| -> Result<PathBuf> {
        std::fs::create_dir(&tmp).with_path(&tmp)?;
        manifest.files.clear();
        for (file, write) in files {
            let path = tmp.join(file);
            write(&path)?;
            std::fs::File::open(&path).and_then(|f| f.sync_all()).with_path(&path)?;
            let bytes = map_file(&path).with_path(&path)?;
            manifest.files.insert(
                file.to_string(),
                FileEntry { bytes: bytes.len() as u64, crc32: crc32fast::hash(&bytes) },
            );
        }
        let json = serde_json::to_vec_pretty(&manifest)
            .map_err(|e| Error::InvalidArgument(e.to_string()))?;
        write_synced(&tmp.join(MANIFEST), &json)?;
        sync_dir(&tmp)?;
        let dest = root.join(name);
        if dest.exists() {
            // Replace: move the old one aside first, so a crash leaves one of the two intact.
            let old = root.join(format!(".{name}.old-{}", std::process::id()));
            std::fs::rename(&dest, &old).with_path(&dest)?;
            std::fs::rename(&tmp, &dest).with_path(&dest)?;
            let _ = std::fs::remove_dir_all(&old);
        } else {
            std::fs::rename(&tmp, &dest).with_path(&dest)?;
        }
        sync_dir(root)?;
        Ok(dest)
    })();
    match result {
        Ok(dir) => Ok(Checkpoint { dir, manifest }),
        Err(e) => {
            let _ = std::fs::remove_dir_all(&tmp);
            Err(e)
        }
    }
}

/// Maps a file read-only (no copy through a user buffer; the page cache is used directly).
pub(crate) fn map_file(path: &Path) -> std::io::Result<memmap2::Mmap> {
    let f = std::fs::File::open(path)?;
    // SAFETY: checkpoint files are written once (atomically, under a temporary name) and never
    // modified in place, so the mapping does not change under us.
    unsafe { memmap2::Mmap::map(&f) }
}

/// Reads and checks one checkpoint directory: manifest present and parseable, format not
/// newer than this trainbook, every listed file present with the right size and CRC32.
/// Errors: [`Error::Checkpoint`] saying which check failed.
pub fn open_checkpoint(dir: &Path) -> Result<Checkpoint> {
    let bad = |why: String| Error::Checkpoint(format!("checkpoint {}: {why}", dir.display()));
    let manifest_path = dir.join(MANIFEST);
    let text = std::fs::read(&manifest_path).map_err(|e| bad(format!("{MANIFEST}: {e}")))?;
    let version: serde_json::Value = serde_json::from_slice(&text)
        .map_err(|e| bad(format!("{MANIFEST} is not valid JSON ({e})")))?;
    let found = version.get("format_version").and_then(|v| v.as_u64()).unwrap_or(0);
    if found > FORMAT_VERSION as u64 {
        return Err(bad(format!("format version {found} is newer than this trainbook supports ({FORMAT_VERSION}); upgrade trainbook")));
    }
    let mut json = version;
    if let (1, Some(fields)) = (found, json.as_object_mut()) {
        upgrade_from_v1(fields);
    }
    let manifest: Manifest =
        serde_json::from_value(json).map_err(|e| bad(format!("{MANIFEST}: {e}")))?;
    for (file, entry) in &manifest.files {
        let bytes = map_file(&dir.join(file)).map_err(|e| bad(format!("{file}: {e}")))?;
        if bytes.len() as u64 != entry.bytes {
            return Err(bad(format!(
                "{file} has {} bytes, the manifest says {} (truncated?)",
                bytes.len(),
                entry.bytes
            )));
        }
        if crc32fast::hash(&bytes) != entry.crc32 {
            return Err(bad(format!("{file} fails its CRC32 check (corrupted)")));
        }
    }
    Ok(Checkpoint { dir: dir.to_path_buf(), manifest })
}

/// The tensors of `file` in the checkpoint (its size and CRC32 were checked when it was
/// opened), or `None` when the checkpoint has no such file (an [`EMA_FILE`](super::EMA_FILE)
/// in a checkpoint of a run without an EMA).
pub fn read_tensors_file(ckpt: &Checkpoint, file: &str) -> Result<Option<Vec<(String, Tensor)>>> {
    if !ckpt.manifest.files.contains_key(file) {
        return Ok(None);
    }
    let path = ckpt.dir.join(file);
    let bytes = map_file(&path).with_path(&path)?;
    crate::models::from_safetensors_bytes(&bytes, &path).map(Some)
}

/// Every checkpoint directory under `root` whose name starts with `prefix`, checked; valid
/// ones newest first (by global step). A missing `root` is an empty report; errors:
/// [`Error::Io`] when `root` cannot be listed.
pub fn scan(root: &Path, prefix: &str) -> Result<ScanReport> {
    let mut report = ScanReport::default();
    let entries = match std::fs::read_dir(root) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(report),
        Err(e) => return Err(Error::io(root, e)),
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.starts_with(prefix) || !entry.path().is_dir() {
            continue;
        }
        match open_checkpoint(&entry.path()) {
            Ok(c) => report.valid.push(c),
            Err(e) => report.invalid.push((entry.path(), e.to_string())),
        }
    }
    report
        .valid
        .sort_by(|a, b| (b.manifest.global_step, &b.dir).cmp(&(a.manifest.global_step, &a.dir)));
    report.invalid.sort();
    Ok(report)
}

/// Deletes all but the newest `keep_last` checkpoints named `<prefix>*` (`step-*`) (by name, which encodes the
/// step; nothing is re-read). Each is first renamed to a hidden name, so a crash during the
/// deletion never leaves a half-deleted `step-*` behind; leftovers of crashed writers
/// (hidden temporary directories of other processes) are removed too.
pub(super) fn prune_steps(root: &Path, prefix: &str, keep_last: usize) -> Result<()> {
    let mut names: Vec<String> = std::fs::read_dir(root)
        .with_path(root)?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    let pid = std::process::id().to_string();
    for stale in names.iter().filter(|n| {
        n.starts_with('.')
            && [".tmp-", ".old-", ".deleting-"].iter().any(|t| n.contains(t))
            && !n.ends_with(&pid)
    }) {
        let _ = std::fs::remove_dir_all(root.join(stale));
    }
    names.retain(|n| n.starts_with(prefix));
    names.sort_unstable_by(|a, b| b.cmp(a));
    for old in names.iter().skip(keep_last.max(1)) {
        let (dir, doomed) = (root.join(old), root.join(format!(".{old}.deleting-{pid}")));
        std::fs::rename(&dir, &doomed).with_path(&dir)?;
        std::fs::remove_dir_all(&doomed).with_path(&doomed)?;
    }
    Ok(())
}
