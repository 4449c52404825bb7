//! The weight trail: a fingerprint of the weights and of the optimizer state every N optimizer
//! steps, so that two runs can be compared step by step. trainbook's runs are bitwise
//! reproducible on one machine (same seed, data, code and world size), so two runs that should
//! be equal and are not differ from one step on; the trail names that step and the first tensor
//! that differs there ([`compare`], and the `trainbook-diff RUN_A RUN_B` program).
//!
//! `Trainer::weight_trail(n)` writes `OUT/weight_trail.jsonl` on rank 0: a header line (what
//! could make two runs differ besides their weights: trainbook's version, the program's
//! checksum, the world size, the seed, the recorded config, the training set's size and batch
//! size), then one line per recorded step: CRC-32s of every tensor of the model (name, dtype,
//! shape and bytes), of all of them together, and of the optimizer's state (its tensors and
//! step counts). Reading the weights to host memory for the checksums is the trail's only cost:
//! a copy of the model every `n` steps. A resumed run keeps the lines up to its checkpoint's
//! step and writes the rest again, so the file always reads as one run; when the resumed run's
//! header differs (another build of the program, say), the new header is written before its
//! first step.
//!
//! ```no_run
//! use trainbook::trail::{compare, read_trail};
//! # fn main() -> trainbook::Result<()> {
//! let a = read_trail("runs/a/weight_trail.jsonl")?;
//! let b = read_trail("runs/b/weight_trail.jsonl")?;
//! match compare(&a, &b).first_difference {
//!     Some(d) => println!("the runs differ from step {} on ({:?})", d.step, d.first_tensor),
//!     None => println!("every step both recorded is equal"),
//! }
//! # Ok(()) }
//! ```
mod compare;
mod record;

pub use compare::{compare, HeaderDifference, StepDifference, TrailComparison};
pub use record::{optimizer_checksum, tensor_checksum, weights_checksums};
pub(crate) use record::{program_checksum, TrailRecorder};

use std::io::{BufRead, BufReader};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::{Error, Result, WithPath};

/// The trail's file name in a run's output folder.
pub const TRAIL_FILE: &str = "weight_trail.jsonl";

/// What a header line records: what could make two runs differ besides their weights.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrailHeader {
    /// A checksum is taken every this many optimizer steps.
    pub every: u64,
    /// trainbook's version.
    pub trainbook: String,
    /// The running program's file name (`None` where it cannot be found).
    pub program: Option<String>,
    /// CRC-32 of the running program's file: another build of it has another one.
    pub program_crc32: Option<String>,
    /// Ranks in the run.
    pub world_size: usize,
    /// The run's seed (`Trainer::seed`).
    pub seed: u64,
    /// The run's recorded config (`Trainer::record_config`).
    pub config: serde_json::Value,
    /// Samples in the training set.
    pub train_samples: usize,
    /// The training loader's batch size (per rank).
    pub batch_size: usize,
}

/// One recorded step: checksums after its optimizer step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrailStep {
    /// The global optimizer step (1 for the run's first).
    pub step: u64,
    /// The epoch it belongs to (0-based).
    pub epoch: u64,
    /// Batches of that epoch done by then.
    pub batches_done: u64,
    /// CRC-32 of all the model's tensors together (their names and checksums, in name order).
    pub weights: String,
    /// CRC-32 of the optimizer's state (its tensors and step counts).
    pub optimizer: String,
    /// Each tensor of the model (parameters and buffers) with its CRC-32, in name order.
    pub tensors: Vec<(String, String)>,
}

/// A line of the trail file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TrailLine {
    /// What the run's steps after it were recorded by.
    Header(TrailHeader),
    /// A recorded step.
    Step(TrailStep),
}

/// A trail read back: its headers, each with the step after which it was written (0: at the
/// start), and its steps in order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Trail {
    /// The headers, each with the number of steps done before it.
    pub headers: Vec<(u64, TrailHeader)>,
    /// The recorded steps, in order.
    pub steps: Vec<TrailStep>,
}

impl Trail {
    /// The header the run started with.
    pub fn first_header(&self) -> Option<&TrailHeader> {
        self.headers.first().map(|(_, h)| h)
    }
}

/// Reads a trail file (`OUT/weight_trail.jsonl`, or the run folder holding it). A last line cut
/// short (a run killed while writing it) is left out. Errors: [`Error::Io`] when the file
/// cannot be read, [`Error::Parse`] for a line that is not a trail line or a file without a
/// header.
pub fn read_trail(path: impl AsRef<Path>) -> Result<Trail> {
    let mut path = path.as_ref().to_path_buf();
    if path.is_dir() {
        path = path.join(TRAIL_FILE);
    }
    let file = std::fs::File::open(&path).with_path(&path)?;
    let lines: Vec<String> =
        BufReader::new(file).lines().collect::<std::io::Result<_>>().with_path(&path)?;
    let mut trail = Trail::default();
    for (i, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let parsed: TrailLine = match serde_json::from_str(line) {
            Ok(parsed) => parsed,
            Err(_) if i + 1 == lines.len() && !line.ends_with('}') => break,
            Err(e) => {
                return Err(Error::parse(&path, "weight trail", format!("line {}: {e}", i + 1)))
            }
        };
        match parsed {
            TrailLine::Header(h) => {
                trail.headers.push((trail.steps.last().map_or(0, |s| s.step), h));
            }
            TrailLine::Step(s) => trail.steps.push(s),
        }
    }
    if trail.headers.is_empty() {
        return Err(Error::parse(&path, "weight trail", "no header line"));
    }
    Ok(trail)
}

#[cfg(test)]
mod tests;
