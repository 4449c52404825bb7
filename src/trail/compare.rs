//! Comparing two trails: what their headers say differently, and the first step both recorded
//! whose checksums differ, with the first tensor that differs there.
use std::fmt;

use super::{Trail, TrailHeader, TrailStep};

/// A header field on which two runs differ.
#[derive(Clone, Debug, PartialEq)]
pub struct HeaderDifference {
    /// The field (`program_crc32`, `world_size`, `config`, ...); `header` for a run whose
    /// header changed during the run (a resume by another build), with the step.
    pub field: String,
    /// Run A's value.
    pub a: String,
    /// Run B's value.
    pub b: String,
}

/// The first step at which two trails differ.
#[derive(Clone, Debug, PartialEq)]
pub struct StepDifference {
    /// The global optimizer step.
    pub step: u64,
    /// Its epoch (0-based) and batches done in it, as run A recorded them.
    pub epoch: u64,
    /// Batches of the epoch done by then.
    pub batches_done: u64,
    /// Whether the weights differ (else only the optimizer's state does).
    pub weights_differ: bool,
    /// Whether the optimizer's states differ.
    pub optimizer_differs: bool,
    /// The first tensor, in name order, whose checksums differ (or that only one run has).
    pub first_tensor: Option<String>,
    /// How many tensors differ.
    pub tensors_differing: usize,
}

/// What [`compare`] found.
#[derive(Clone, Debug, PartialEq)]
pub struct TrailComparison {
    /// Header fields that differ (what could explain a difference).
    pub header_differences: Vec<HeaderDifference>,
    /// Steps that both trails recorded.
    pub common_steps: usize,
    /// The last step both recorded with equal checksums before the first difference.
    pub last_equal_step: Option<u64>,
    /// The first step both recorded whose checksums differ; `None`: all equal.
    pub first_difference: Option<StepDifference>,
    /// The first step both recorded whose weights differ: the first difference, or a later
    /// step when the optimizer's state differed first (a learning rate changed after a step
    /// shows in the weights one step later).
    pub first_weights_difference: Option<StepDifference>,
}

fn header_fields(h: &TrailHeader) -> Vec<(&'static str, String)> {
    let opt = |v: &Option<String>| v.clone().unwrap_or_else(|| "unknown".into());
    vec![
        ("trainbook", h.trainbook.clone()),
        ("program", opt(&h.program)),
        ("program_crc32", opt(&h.program_crc32)),
        ("world_size", h.world_size.to_string()),
        ("seed", h.seed.to_string()),
        ("config", h.config.to_string()),
        ("train_samples", h.train_samples.to_string()),
        ("batch_size", h.batch_size.to_string()),
        ("every", h.every.to_string()),
    ]
}

fn header_differences(a: &Trail, b: &Trail) -> Vec<HeaderDifference> {
    let mut out = Vec::new();
    if let (Some(ha), Some(hb)) = (a.first_header(), b.first_header()) {
        for ((field, va), (_, vb)) in header_fields(ha).into_iter().zip(header_fields(hb)) {
            if va != vb {
                out.push(HeaderDifference { field: field.into(), a: va, b: vb });
            }
        }
    }
    for (run, trail) in [("A", a), ("B", b)] {
        for (after, _) in trail.headers.iter().skip(1) {
            let note = format!("run {run} was resumed after step {after} with another header");
            let (va, vb) = if run == "A" { (note, String::new()) } else { (String::new(), note) };
            out.push(HeaderDifference { field: "header".into(), a: va, b: vb });
        }
    }
    out
}

fn step_difference(a: &TrailStep, b: &TrailStep) -> Option<StepDifference> {
    let (weights_differ, optimizer_differs) = (a.weights != b.weights, a.optimizer != b.optimizer);
    if !weights_differ && !optimizer_differs && a.tensors == b.tensors {
        return None;
    }
    let mut names: Vec<&String> = a.tensors.iter().chain(&b.tensors).map(|(n, _)| n).collect();
    names.sort();
    names.dedup();
    let sum = |t: &TrailStep, name: &str| {
        t.tensors.iter().find(|(n, _)| n == name).map(|(_, s)| s.clone())
    };
    let differing: Vec<&String> = names.into_iter().filter(|n| sum(a, n) != sum(b, n)).collect();
    Some(StepDifference {
        step: a.step,
        epoch: a.epoch,
        batches_done: a.batches_done,
        weights_differ,
        optimizer_differs,
        first_tensor: differing.first().map(|n| n.to_string()),
        tensors_differing: differing.len(),
    })
}

/// Compares two trails: their headers, and the steps both recorded, in order, up to the first
/// whose checksums differ and on to the first whose weights differ.
///
/// ```
/// use trainbook::trail::{compare, Trail, TrailHeader, TrailStep};
/// let header = TrailHeader {
///     every: 1, trainbook: "0.1.0".into(), program: None, program_crc32: None, world_size: 1,
///     seed: 0, config: serde_json::Value::Null, train_samples: 64, batch_size: 8,
/// };
/// let step = |step: u64, w: &str| TrailStep {
///     step, epoch: 0, batches_done: step, weights: w.into(), optimizer: "0".into(),
///     tensors: vec![("fc.weight".into(), w.into())],
/// };
/// let a = Trail { headers: vec![(0, header.clone())], steps: vec![step(1, "a"), step(2, "b")] };
/// let b = Trail { headers: vec![(0, header)], steps: vec![step(1, "a"), step(2, "c")] };
/// let found = compare(&a, &b);
/// assert_eq!(found.last_equal_step, Some(1));
/// let first = found.first_difference.unwrap();
/// assert_eq!((first.step, first.first_tensor.as_deref()), (2, Some("fc.weight")));
/// ```
pub fn compare(a: &Trail, b: &Trail) -> TrailComparison {
    let mut found = TrailComparison {
        header_differences: header_differences(a, b),
        common_steps: 0,
        last_equal_step: None,
        first_difference: None,
        first_weights_difference: None,
    };
    let mut theirs = b.steps.iter().peekable();
    for mine in &a.steps {
        while theirs.peek().is_some_and(|t| t.step < mine.step) {
            theirs.next();
        }
        let Some(other) = theirs.peek().filter(|t| t.step == mine.step) else { continue };
        found.common_steps += 1;
        match step_difference(mine, other) {
            Some(d) => {
                if found.first_difference.is_none() {
                    found.first_difference = Some(d.clone());
                }
                if d.weights_differ {
                    found.first_weights_difference = Some(d);
                    break;
                }
            }
            None if found.first_difference.is_none() => found.last_equal_step = Some(mine.step),
            None => {}
        }
    }
    found
}

/// ", first tensor NAME (N of the tensors differ)" when a tensor differs.
fn tensor_note(d: &StepDifference) -> String {
    match &d.first_tensor {
        Some(t) => format!("; first tensor {t} ({} of the tensors differ)", d.tensors_differing),
        None => String::new(),
    }
}

impl fmt::Display for TrailComparison {
    /// The report `trainbook-diff` prints.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.header_differences.is_empty() {
            writeln!(f, "headers: the same program, world size, seed, config and data sizes")?;
        }
        for d in &self.header_differences {
            match d.field.as_str() {
                "header" => writeln!(f, "header: {}{}", d.a, d.b)?,
                field => writeln!(f, "header: {field} differs: A {} | B {}", d.a, d.b)?,
            }
        }
        let Some(d) = &self.first_difference else {
            return match self.common_steps {
                0 => writeln!(f, "no step recorded by both runs: nothing to compare"),
                n => writeln!(f, "all {n} steps recorded by both runs are equal"),
            };
        };
        let what = match (d.weights_differ, d.optimizer_differs) {
            (true, true) => "the weights and the optimizer state differ",
            (true, false) => "the weights differ",
            (false, _) => "the optimizer state differs (the weights are equal)",
        };
        let (step, epoch, done) = (d.step, d.epoch + 1, d.batches_done);
        let note = tensor_note(d);
        writeln!(
            f,
            "first difference at step {step} (epoch {epoch}, {done} batches done): {what}{note}"
        )?;
        match &self.first_weights_difference {
            Some(w) if w.step != d.step => {
                writeln!(f, "the weights first differ at step {}{}", w.step, tensor_note(w))?
            }
            Some(_) => {}
            None => writeln!(f, "the weights are equal at every step both recorded")?,
        }
        match self.last_equal_step {
            Some(s) => writeln!(f, "last step recorded equal: {s}"),
            None => writeln!(f, "no recorded step before it was equal"),
        }
    }
}
