//! Writing the trail: the checksums of a model's tensors and of an optimizer's state, and the
//! recorder `fit` keeps on rank 0 (`Trainer::weight_trail`).
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use tch::nn::VarStore;
use tch::{Device, Tensor};

use super::{TrailHeader, TrailLine, TrailStep, TRAIL_FILE};
use crate::train::Optimizer;
use crate::{Result, WithPath};

/// CRC-32 of a tensor: its name, dtype, shape and bytes (read to host memory, contiguous).
///
/// ```
/// use trainbook::trail::tensor_checksum;
/// let a = tch::Tensor::from_slice(&[1.0f32, 2.0]);
/// assert_eq!(tensor_checksum("w", &a)?, tensor_checksum("w", &a.copy())?);
/// assert_ne!(tensor_checksum("w", &a)?, tensor_checksum("w", &(&a + 1e-7))?);
/// assert_ne!(tensor_checksum("w", &a)?, tensor_checksum("v", &a)?);
/// # Ok::<(), trainbook::Error>(())
/// ```
pub fn tensor_checksum(name: &str, tensor: &Tensor) -> Result<u32> {
    let host = tensor.f_to_device(Device::Cpu)?.f_contiguous()?;
    let numel = host.numel();
    let mut bytes = vec![0u8; numel * host.kind().elt_size_in_bytes()];
    host.f_copy_data_u8(&mut bytes, numel)?;
    let mut hash = crc32fast::Hasher::new();
    hash.update(name.as_bytes());
    hash.update(format!("\0{:?}\0{:?}\0", host.kind(), host.size()).as_bytes());
    hash.update(&bytes);
    Ok(hash.finalize())
}

/// The checksum of each named tensor, in name order, and of them all together (their names
/// and checksums).
fn combined(named: Vec<(String, Tensor)>) -> Result<(u32, Vec<(String, u32)>)> {
    let mut named = named;
    named.sort_by(|a, b| a.0.cmp(&b.0));
    let mut all = crc32fast::Hasher::new();
    let mut each = Vec::with_capacity(named.len());
    for (name, t) in named {
        let sum = tensor_checksum(&name, &t)?;
        all.update(name.as_bytes());
        all.update(&sum.to_le_bytes());
        each.push((name, sum));
    }
    Ok((all.finalize(), each))
}

/// The checksum of all of a model's tensors (parameters and buffers, in name order) and of
/// each.
pub fn weights_checksums(vs: &VarStore) -> Result<(u32, Vec<(String, u32)>)> {
    combined(vs.variables().into_iter().collect())
}

/// The checksum of an optimizer's state: its state tensors (momentum buffers, Adam's moments)
/// and its kind, learning rates and step counts.
pub fn optimizer_checksum(optimizer: &Optimizer) -> Result<u32> {
    let (tensors, meta) = optimizer.state_dict();
    let (sum, _) = combined(tensors)?;
    let mut all = crc32fast::Hasher::new();
    all.update(&sum.to_le_bytes());
    all.update(&serde_json::to_vec(&meta).unwrap_or_default());
    Ok(all.finalize())
}

fn hex(sum: u32) -> String {
    format!("{sum:08x}")
}

/// The running program's file name and CRC-32, when it can be read.
pub(crate) fn program_checksum() -> (Option<String>, Option<String>) {
    let Ok(exe) = std::env::current_exe() else { return (None, None) };
    let name = exe.file_name().map(|n| n.to_string_lossy().into_owned());
    let sum = File::open(&exe).ok().and_then(|f| {
        let mut reader = BufReader::with_capacity(1 << 20, f);
        let mut hash = crc32fast::Hasher::new();
        loop {
            let buf = reader.fill_buf().ok()?;
            if buf.is_empty() {
                break Some(hex(hash.finalize()));
            }
            hash.update(buf);
            let n = buf.len();
            reader.consume(n);
        }
    });
    (name, sum)
}

/// `OUT/weight_trail.jsonl`, written by rank 0 as the run goes.
pub(crate) struct TrailRecorder {
    path: PathBuf,
    out: BufWriter<File>,
    every: u64,
}

impl TrailRecorder {
    /// Starts the file with `header`; a resumed run (`resumed_steps`: its checkpoint's step)
    /// keeps the lines up to that step and writes `header` again only when it differs from the
    /// last one kept.
    pub(crate) fn start(
        out: &Path,
        header: TrailHeader,
        resumed_steps: Option<u64>,
    ) -> Result<Self> {
        std::fs::create_dir_all(out).with_path(out)?;
        let path = out.join(TRAIL_FILE);
        let every = header.every.max(1);
        let kept = match resumed_steps {
            Some(done) if path.exists() => keep_lines_up_to(&path, done)?,
            _ => Vec::new(),
        };
        let last_header = kept.iter().rev().find_map(|l| match l {
            TrailLine::Header(h) => Some(h),
            TrailLine::Step(_) => None,
        });
        let mut file = match resumed_steps {
            Some(_) if !kept.is_empty() => {
                OpenOptions::new().append(true).open(&path).with_path(&path)?
            }
            _ => File::create(&path).with_path(&path)?,
        };
        if last_header != Some(&header) {
            writeln!(file, "{}", line_json(&TrailLine::Header(header))).with_path(&path)?;
        }
        Ok(TrailRecorder { path, out: BufWriter::new(file), every })
    }

    /// After global optimizer step `step` (1 for the first): a line with the checksums when
    /// `step` is a multiple of the trail's period.
    pub(crate) fn after_step(
        &mut self,
        (step, epoch, batches_done): (u64, u64, u64),
        vs: &VarStore,
        optimizer: &Optimizer,
    ) -> Result<()> {
        if step % self.every != 0 {
            return Ok(());
        }
        let (weights, tensors) = weights_checksums(vs)?;
        let line = TrailLine::Step(TrailStep {
            step,
            epoch,
            batches_done,
            weights: hex(weights),
            optimizer: hex(optimizer_checksum(optimizer)?),
            tensors: tensors.into_iter().map(|(n, s)| (n, hex(s))).collect(),
        });
        writeln!(self.out, "{}", line_json(&line)).with_path(&self.path)?;
        self.out.flush().with_path(&self.path)
    }
}

fn line_json(line: &TrailLine) -> String {
    serde_json::to_string(line).expect("a trail line is plain data")
}

/// Keeps the steps up to `steps_done` and the headers among them (a line cut short by a kill goes),
/// written to a new file that replaces the old one at once; returns what was kept.
fn keep_lines_up_to(path: &Path, steps_done: u64) -> Result<Vec<TrailLine>> {
    let mut text = String::new();
    File::open(path).with_path(path)?.read_to_string(&mut text).with_path(path)?;
    // A header stays where the steps before it are all kept.
    let mut last_step = 0;
    let kept: Vec<TrailLine> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<TrailLine>(l).ok())
        .filter(|l| match l {
            TrailLine::Header(_) => last_step <= steps_done,
            TrailLine::Step(s) => {
                last_step = s.step;
                s.step <= steps_done
            }
        })
        .collect();
    let tmp = path.with_extension("jsonl.tmp");
    let mut new = BufWriter::new(File::create(&tmp).with_path(&tmp)?);
    for line in &kept {
        writeln!(new, "{}", line_json(line)).with_path(&tmp)?;
    }
    new.flush().with_path(&tmp)?;
    drop(new);
    std::fs::rename(&tmp, path).with_path(path)?;
    Ok(kept)
}
