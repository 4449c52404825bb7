//! torch.hub's cache of downloaded weights, shared with PyTorch: the same folder
//! (`$TORCH_HOME/hub/checkpoints`, else `$XDG_CACHE_HOME/torch/hub/checkpoints`, else
//! `~/.cache/torch/hub/checkpoints`), the same file names, the same SHA-256 check of a download
//! against the hash prefix in its name. A file that PyTorch already downloaded is used as it is,
//! offline; a missing one is downloaded into the cache with a progress bar
//! ([`cached_download`]), as `torch.hub.load_state_dict_from_url` does.
//!
//! ```no_run
//! # fn main() -> trainbook::Result<()> {
//! let url = "https://download.pytorch.org/models/resnet18-f37072fd.pth";
//! let file = trainbook::hub::cached_download(url, None, true, true)?;
//! println!("{}", file.display()); // ~/.cache/torch/hub/checkpoints/resnet18-f37072fd.pth
//! # Ok(()) }
//! ```
use std::ffi::OsString;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::{Error, Result, WithPath};

/// `torch.hub.get_dir()` (without `torch.hub.set_dir`): `$TORCH_HOME/hub`, where `TORCH_HOME`
/// defaults to `$XDG_CACHE_HOME/torch`, and `XDG_CACHE_HOME` to `~/.cache`.
pub fn get_dir() -> PathBuf {
    hub_dir_from(
        std::env::var_os("TORCH_HOME"),
        std::env::var_os("XDG_CACHE_HOME"),
        std::env::var_os("HOME"),
    )
}

/// [`get_dir`] from the given values of `TORCH_HOME`, `XDG_CACHE_HOME` and `HOME`, as
/// torch.hub computes it: `expanduser(getenv("TORCH_HOME", join(getenv("XDG_CACHE_HOME",
/// "~/.cache"), "torch")))` + `/hub`.
pub fn hub_dir_from(
    torch_home: Option<OsString>,
    xdg_cache_home: Option<OsString>,
    home: Option<OsString>,
) -> PathBuf {
    let torch_home = torch_home.map(PathBuf::from).unwrap_or_else(|| {
        xdg_cache_home.map_or_else(|| PathBuf::from("~/.cache"), PathBuf::from).join("torch")
    });
    // os.path.expanduser: a leading `~` is the home folder (left as it is without HOME).
    let expanded = match (torch_home.strip_prefix("~"), home) {
        (Ok(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => torch_home,
    };
    expanded.join("hub")
}

/// The hash prefix in a file name as torch.hub reads it (`resnet18-f37072fd.pth` ->
/// `f37072fd`): the first run of lowercase hex digits between a `-` and a `.`.
pub fn hash_prefix(file_name: &str) -> Option<&str> {
    file_name.match_indices('-').find_map(|(i, _)| {
        let rest = &file_name[i + 1..];
        let end = rest.find(|c: char| !matches!(c, '0'..='9' | 'a'..='f'))?;
        (rest[end..].starts_with('.')).then_some(&rest[..end])
    })
}

/// The file for `url` in `model_dir` (default: [`get_dir`]`/checkpoints`), downloaded there
/// first when it is missing, as `torch.hub.load_state_dict_from_url(url, model_dir,
/// progress=progress, check_hash=check_hash)` does before it loads the file: a file already in
/// the cache is used as it is (offline); a download is checked against the hash prefix of its
/// name when `check_hash` (torchvision's weights always are). Errors: [`Error::Download`] naming
/// the URL and where to put the file by hand when the download fails (no network on a compute
/// node), [`Error::Io`] for the cache folder.
pub fn cached_download(
    url: &str,
    model_dir: Option<&Path>,
    check_hash: bool,
    progress: bool,
) -> Result<PathBuf> {
    let dir = model_dir.map_or_else(|| get_dir().join("checkpoints"), Path::to_path_buf);
    let name = url
        .split(['?', '#'])
        .next()
        .and_then(|u| u.rsplit('/').next())
        .filter(|n| !n.is_empty())
        .ok_or_else(|| Error::InvalidArgument(format!("{url}: no file name in the URL")))?;
    let cached = dir.join(name);
    if cached.exists() {
        return Ok(cached);
    }
    std::fs::create_dir_all(&dir).with_path(&dir)?;
    let prefix = if check_hash { hash_prefix(name) } else { None };
    download_url_to_file(url, &cached, prefix, progress)?;
    Ok(cached)
}

/// `torch.hub.download_url_to_file`: streams `url` into a temporary file beside `dst`, checks
/// that its SHA-256 starts with `hash_prefix` (when given), then renames it to `dst`; on any
/// failure nothing is left at `dst`. A progress bar on stderr when `progress`. A stalled
/// transfer fails after 60 s without data.
pub fn download_url_to_file(
    url: &str,
    dst: &Path,
    hash_prefix: Option<&str>,
    progress: bool,
) -> Result<()> {
    let fail = |message: String| Error::Download {
        url: url.to_string(),
        message: format!(
            "{message} (offline? copy the file from a machine with internet to {})",
            dst.display()
        ),
    };
    let dir = dst.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_connect(Some(Duration::from_secs(30)))
        .timeout_recv_response(Some(Duration::from_secs(60)))
        .timeout_per_read(Some(Duration::from_secs(60)))
        .build()
        .into();
    let mut response = agent.get(url).call().map_err(|e| fail(e.to_string()))?;
    let total = response
        .headers()
        .get("content-length")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{}.", dst.file_name().map(|n| n.to_string_lossy()).unwrap_or_default()))
        .suffix(".partial")
        .tempfile_in(dir)
        .with_path(dir)?;
    let bar = progress.then(|| crate::progress::download_bar(total, url, dst));
    let mut reader = response.body_mut().with_config().limit(u64::MAX).reader();
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = reader.read(&mut buf).map_err(|e| fail(e.to_string()))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        tmp.write_all(&buf[..n]).with_path(tmp.path())?;
        if let Some(bar) = &bar {
            bar.inc(n as u64);
        }
    }
    if let Some(bar) = bar {
        bar.finish();
    }
    let digest: String = hasher.finalize().iter().map(|b| format!("{b:02x}")).collect();
    if let Some(prefix) = hash_prefix {
        if !digest.starts_with(prefix) {
            return Err(Error::Download {
                url: url.to_string(),
                message: format!(
                    "invalid hash value (expected \"{prefix}\", got \"{digest}\"); nothing was \
                     written to {}",
                    dst.display()
                ),
            });
        }
    }
    tmp.as_file().sync_all().with_path(tmp.path())?;
    tmp.persist(dst).map_err(|e| Error::io(dst, e.error))?;
    Ok(())
}
