//! The library's error type: every fallible trainbook call returns [`Result`].
use std::path::PathBuf;

/// Everything that can go wrong inside trainbook, with enough context to act on it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An error raised by libtorch through tch.
    #[error("torch: {0}")]
    Torch(#[from] tch::TchError),

    /// A file or directory could not be read or written.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// An image file could not be decoded (corrupt, truncated, or not an image).
    #[error("{path}: cannot decode image: {message}")]
    Decode { path: PathBuf, message: String },

    /// A data set's files are missing or malformed.
    #[error("data set: {0}")]
    Dataset(String),

    /// A checkpoint is damaged, from an unsupported format, or does not fit the model.
    #[error("{0}")]
    Checkpoint(String),

    /// The launcher's environment (RANK, WORLD_SIZE, MASTER_ADDR, ...) is missing or inconsistent.
    #[error("distributed environment: {0}")]
    DistEnv(String),

    /// A c10d store or collective operation failed (peer gone, timeout, bad tensor, ...).
    #[error("c10d {op}: {message}")]
    Dist { op: String, message: String },

    /// A libtorch kernel called through trainbook's shim (fused optimizers, autocast, GradScaler)
    /// failed, e.g. tensors on different devices.
    #[error("libtorch {op}: {message}")]
    Kernel { op: String, message: String },

    /// An argument is outside what the function accepts.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    /// A figure could not be drawn (plotting backend error or no font to draw text with).
    #[error("plot: {0}")]
    Plot(String),
}

/// `Result` with trainbook's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Wraps an I/O error with the path it happened on.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io { path: path.into(), source }
    }
}
