//! The launcher scripts (launchers/*.py), compiled into the library so that it needs no source
//! checkout (a `:dep trainbook` from crates.io has no `launchers/` folder): on first use they are
//! written to a folder of the user's cache, which [`launchers_dir`] names, as data/scripts.rs
//! does for the data scripts. The scripts import each other, so they are kept together.
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::{Result, WithPath};

/// The environment variable naming a folder of launcher scripts to use instead of the bundled
/// ones (a checkout's `launchers/` while editing them).
const LAUNCHERS_ENV: &str = "TRAINBOOK_LAUNCHERS";

/// The scripts, by file name.
const SCRIPTS: [(&str, &str); 4] = [
    ("ray_launch.py", include_str!("../../launchers/ray_launch.py")),
    ("dask_launch.py", include_str!("../../launchers/dask_launch.py")),
    ("launch_common.py", include_str!("../../launchers/launch_common.py")),
    ("launch_results.py", include_str!("../../launchers/launch_results.py")),
];

/// The folder of trainbook's launcher scripts: `$TRAINBOOK_LAUNCHERS` if set, else a folder of
/// the user's cache (`$XDG_CACHE_HOME` or `~/.cache`, then `trainbook/launchers-HASH`) holding
/// the scripts bundled into this library, written there on first use and again whenever a file
/// differs from the bundled text. When the scripts cannot be written the folder is returned
/// anyway; starting a launcher then reports why.
pub fn launchers_dir() -> PathBuf {
    override_dir().unwrap_or_else(|| {
        let dir = bundled_dir();
        let _ = write_scripts(&dir);
        dir
    })
}

/// The folder to start a launcher from: as [`launchers_dir`], with the error when the bundled
/// scripts could not be written.
pub(super) fn ready_launchers_dir() -> Result<PathBuf> {
    match override_dir() {
        Some(dir) => Ok(dir),
        None => {
            let dir = bundled_dir();
            write_scripts(&dir)?;
            Ok(dir)
        }
    }
}

fn override_dir() -> Option<PathBuf> {
    std::env::var_os(LAUNCHERS_ENV).map(PathBuf::from)
}

/// `CACHE/trainbook/launchers-HASH`, HASH naming the bundled text, so that two trainbook builds
/// with different scripts never write over each other's.
fn bundled_dir() -> PathBuf {
    let mut hash = crc32fast::Hasher::new();
    for (name, text) in SCRIPTS {
        hash.update(name.as_bytes());
        hash.update(&[0]);
        hash.update(text.as_bytes());
        hash.update(&[0]);
    }
    cache_dir().join("trainbook").join(format!("launchers-{:08x}", hash.finalize()))
}

/// The user's cache folder: `$XDG_CACHE_HOME`, else `$HOME/.cache`, else a per-user folder in
/// the temporary directory.
fn cache_dir() -> PathBuf {
    let absolute = |var| std::env::var_os(var).map(PathBuf::from).filter(|p| p.is_absolute());
    absolute("XDG_CACHE_HOME")
        .or_else(|| absolute("HOME").map(|home| home.join(".cache")))
        .unwrap_or_else(|| {
            // SAFETY: getuid has no preconditions and cannot fail.
            let uid = unsafe { libc::getuid() };
            std::env::temp_dir().join(format!("trainbook-cache-{uid}"))
        })
}

/// Writes every script whose file in `dir` is missing or differs from the bundled text; each
/// through a temporary file renamed into place, so that a launcher starting meanwhile never
/// reads half a script.
fn write_scripts(dir: &Path) -> Result<()> {
    for (name, text) in SCRIPTS {
        let path = dir.join(name);
        if std::fs::read(&path).is_ok_and(|old| old == text.as_bytes()) {
            continue;
        }
        std::fs::create_dir_all(dir).with_path(dir)?;
        let mut file = tempfile::NamedTempFile::new_in(dir).with_path(dir)?;
        file.write_all(text.as_bytes()).with_path(file.path().to_path_buf())?;
        file.persist(&path).map_err(|e| e.error).with_path(&path)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{write_scripts, SCRIPTS};

    #[test]
    fn the_written_scripts_are_the_bundled_text_and_are_rewritten_when_changed() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("launchers");
        write_scripts(&folder).unwrap();
        let read = |name: &str| std::fs::read_to_string(folder.join(name)).unwrap();
        for (name, text) in SCRIPTS {
            assert_eq!(read(name), text, "{name}");
        }
        for (name, text) in [SCRIPTS[0], SCRIPTS[3]] {
            std::fs::write(folder.join(name), "# edited\n").unwrap();
            write_scripts(&folder).unwrap();
            assert_eq!(read(name), text, "{name} is written again");
        }
        std::fs::remove_file(folder.join("launch_common.py")).unwrap();
        write_scripts(&folder).unwrap();
        assert_eq!(read("launch_common.py"), SCRIPTS[2].1);
    }

    #[test]
    fn the_bundle_is_the_checkout_s_launchers_folder() {
        let launchers = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("launchers");
        let mut on_disk: Vec<String> = std::fs::read_dir(&launchers)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".py"))
            .collect();
        on_disk.sort();
        let mut bundled: Vec<String> = SCRIPTS.iter().map(|(n, _)| n.to_string()).collect();
        bundled.sort();
        assert_eq!(on_disk, bundled, "every launchers/*.py is bundled");
    }
}
