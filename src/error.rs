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
        /// The file or directory.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },

    /// An image file could not be decoded (corrupt, truncated, or not an image).
    #[error("{path}: cannot decode image: {message}")]
    Decode {
        /// The image file.
        path: PathBuf,
        /// The decoder's message.
        message: String,
    },

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
    Dist {
        /// The operation ("all_reduce", "store get", ...).
        op: String,
        /// What c10d reported.
        message: String,
    },

    /// A libtorch kernel called through trainbook's shim (fused optimizers, autocast, GradScaler)
    /// failed, e.g. tensors on different devices.
    #[error("libtorch {op}: {message}")]
    Kernel {
        /// The kernel ("_fused_adam_", ...).
        op: String,
        /// What libtorch reported.
        message: String,
    },

    /// An argument is outside what the function accepts.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    /// A figure could not be drawn (plotting backend error or no font to draw text with).
    #[error("plot: {0}")]
    Plot(String),

    /// A file was read but its content is not what it should be (a metrics log line, a
    /// notebook's JSON, a safetensors header); `what` names the expected format.
    #[error("{path}: not a valid {what}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The format it should have ("metrics log (JSON lines)", ...).
        what: &'static str,
        /// What is wrong, where.
        message: String,
    },

    /// A program trainbook runs (a data script, torchrun, a launched job) could not be started
    /// or ended with a failure.
    #[error("{program}: {message}")]
    Process {
        /// The program (path or name).
        program: String,
        /// Why it could not start, or how it ended.
        message: String,
    },

    /// A run was asked to stop (Ctrl-C, a stop file, `request_stop`) and stopped after a step;
    /// `Trainer::fit` turns this into an `Ok` report with `interrupted` set.
    #[error("interrupted: {0}")]
    Interrupted(String),

    /// Training diverged: an epoch's mean training loss (over all ranks) is NaN or infinite,
    /// so the weights are no longer finite; `Trainer::fit` stops before validating the epoch.
    #[error(
        "training diverged: the mean training loss of epoch {epoch} is {loss}; the run stopped \
         before validating it (try a lower learning rate, gradient clipping, or check the data \
         for NaN; step checkpoints of this epoch may hold non-finite weights)"
    )]
    Diverged {
        /// The epoch, counted from 1 as the epoch lines do.
        epoch: u64,
        /// Its mean training loss.
        loss: f64,
    },

    /// Autograd's anomaly detection (`Trainer::detect_anomaly`) found a NaN in the backward
    /// pass: libtorch's message names the backward function that returned it.
    #[error(
        "anomaly detection stopped epoch {epoch} in a backward pass: {message} (the forward op \
         of that backward function made a NaN or infinity)"
    )]
    Anomaly {
        /// The epoch, counted from 1 as the epoch lines do.
        epoch: u64,
        /// libtorch's message, e.g. `Function 'LogSoftmaxBackward0' returned nan values in its
        /// 0th output.`
        message: String,
    },

    /// A download (pretrained weights into torch.hub's cache) failed: no network, an HTTP error,
    /// or a file whose SHA-256 does not match the hash in its name.
    #[error("download {url}: {message}")]
    Download {
        /// What was downloaded.
        url: String,
        /// What went wrong, and where to put the file by hand.
        message: String,
    },

    /// A data-loading worker thread died (a panic in a data set or transform).
    #[error("data loader: {0}")]
    Loader(String),

    /// One rank of a [`spawn`](crate::launch::spawn)ed job failed: its error, and which rank.
    #[error("rank {rank} of {world}: {source}")]
    Rank {
        /// The rank that failed first.
        rank: usize,
        /// The job's number of ranks.
        world: usize,
        /// What went wrong on it.
        #[source]
        source: Box<Error>,
    },

    /// Code run by trainbook on the caller's behalf (a rank's closure) panicked; the panic was
    /// caught, so the caller's state (a notebook kernel's variables) survives.
    #[error("panicked: {0}")]
    Panicked(String),
}

/// `Result` with trainbook's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Wraps an I/O error with the path it happened on.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io { path: path.into(), source }
    }

    /// A [`Error::Parse`] for `path`, which should hold a `what` (e.g. "metrics log").
    pub fn parse(path: impl Into<PathBuf>, what: &'static str, message: impl ToString) -> Self {
        Error::Parse { path: path.into(), what, message: message.to_string() }
    }
}

/// Adds the path an I/O operation was working on to its error, turning
/// `std::io::Result<T>` into trainbook's [`Result`] (like `anyhow::Context` for paths).
///
/// ```
/// use trainbook::WithPath;
/// let path = std::path::Path::new("no/such/file.txt");
/// let err = std::fs::read(path).with_path(path).unwrap_err();
/// assert!(err.to_string().starts_with("no/such/file.txt: "));
/// ```
pub trait WithPath<T> {
    /// On error, an [`Error::Io`] naming `path`.
    fn with_path(self, path: impl Into<PathBuf>) -> Result<T>;
}

impl<T> WithPath<T> for std::io::Result<T> {
    fn with_path(self, path: impl Into<PathBuf>) -> Result<T> {
        self.map_err(|source| Error::Io { path: path.into(), source })
    }
}

/// The message a panic carried (its `&str` or `String` payload), for the errors that report a
/// thread's or a closure's panic ([`Error::Panicked`] and the like).
pub(crate) fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}
