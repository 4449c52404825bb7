//! A model summary (Lightning's `ModelSummary`, fastai's `learn.summary()`): the model's modules
//! down to a depth, with their parameter counts and whether they train, the totals, the size of
//! the parameters, and the model's output shape for an input shape.
//!
//! A module is a prefix of the variables' names (`layer1.0.conv1`), as PyTorch names them;
//! BatchNorm's running statistics are buffers, not parameters (as `model.parameters()` leaves
//! them out). tch has no forward hooks, so only the whole model's output shape is shown, not
//! each module's.
use std::collections::BTreeMap;

use tch::nn::{ModuleT, VarStore};
use tch::{Kind, Tensor};

use crate::Result;

/// The names PyTorch keeps as buffers rather than parameters.
const BUFFERS: [&str; 3] = ["running_mean", "running_var", "num_batches_tracked"];

/// One row: a module and its parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModuleRow {
    /// The module's name (the first `depth` parts of its parameters' names).
    pub name: String,
    /// Its parameters' values in all (buffers left out).
    pub params: i64,
    /// Of those, the values that train (`requires_grad`).
    pub trainable: i64,
}

/// What [`summary`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelSummary {
    /// The modules in the order of their first parameter.
    pub rows: Vec<ModuleRow>,
    /// Parameter values in all.
    pub total: i64,
    /// Of those, trainable.
    pub trainable: i64,
    /// Bytes the parameters take (their element sizes).
    pub bytes: i64,
    /// The model's output shape for the input shape given, if one was.
    pub output_shape: Option<Vec<i64>>,
}

/// The summary of the model whose variables are `vs`, its modules grouped to `depth` name parts
/// (1: the top-level modules, as Lightning shows them), and, with `input`, the output shape of
/// `net` for a batch of zeros of that shape (evaluation mode, no gradients).
///
/// ```
/// use trainbook::models::{summary, MnistNet};
/// use trainbook::tch::{nn::VarStore, Device};
/// let vs = VarStore::new(Device::Cpu);
/// let net = MnistNet::new(&vs.root());
/// let s = summary(&vs, Some((&net, &[1, 1, 28, 28])), 1)?;
/// assert_eq!(s.rows[0].name, "conv1");
/// assert_eq!((s.total, s.output_shape.clone()), (1_199_882, Some(vec![1, 10])));
/// println!("{s}");
/// # Ok::<(), trainbook::Error>(())
/// ```
pub fn summary(
    vs: &VarStore,
    model: Option<(&dyn ModuleT, &[i64])>,
    depth: usize,
) -> Result<ModelSummary> {
    let mut named: Vec<(String, Tensor)> = vs.variables().into_iter().collect();
    named.sort_by(|a, b| a.0.cmp(&b.0));
    // Keep the model's own order: the order the variables were created in.
    let order: BTreeMap<String, usize> = crate::models::named_parameters(vs)
        .into_iter()
        .enumerate()
        .map(|(i, (n, _))| (n, i))
        .collect();
    named.sort_by_key(|(n, _)| order.get(n).copied().unwrap_or(usize::MAX));
    let mut rows: Vec<ModuleRow> = Vec::new();
    let (mut total, mut trainable, mut bytes) = (0, 0, 0);
    for (name, t) in &named {
        let last = name.rsplit('.').next().unwrap_or(name);
        if BUFFERS.contains(&last) {
            continue;
        }
        let parts: Vec<&str> = name.split('.').collect();
        let module = parts[..depth.max(1).min(parts.len().saturating_sub(1).max(1))].join(".");
        let (n, trains) = (t.numel() as i64, t.requires_grad());
        total += n;
        bytes += n * t.kind().elt_size_in_bytes() as i64;
        if trains {
            trainable += n;
        }
        match rows.iter_mut().find(|r| r.name == module) {
            Some(r) => {
                r.params += n;
                r.trainable += if trains { n } else { 0 };
            }
            None => rows.push(ModuleRow {
                name: module,
                params: n,
                trainable: if trains { n } else { 0 },
            }),
        }
    }
    let output_shape = match model {
        Some((net, shape)) => {
            let device = vs.device();
            let kind = named.first().map_or(Kind::Float, |(_, t)| t.kind());
            let x = Tensor::zeros(shape, (kind, device));
            let y = tch::no_grad(|| net.forward_t(&x, false));
            Some(y.size())
        }
        None => None,
    };
    Ok(ModelSummary { rows, total, trainable, bytes, output_shape })
}

/// `n` as Lightning prints counts: `9.4 K`, `21.3 M`.
fn count(n: i64) -> String {
    let n = n as f64;
    match n {
        n if n >= 1e9 => format!("{:.1} B", n / 1e9),
        n if n >= 1e6 => format!("{:.1} M", n / 1e6),
        n if n >= 1e3 => format!("{:.1} K", n / 1e3),
        n => format!("{n}"),
    }
}

impl std::fmt::Display for ModelSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let width = self.rows.iter().map(|r| r.name.len()).max().unwrap_or(4).max(4);
        writeln!(f, "  | {:width$} | Params  | Trains", "Name")?;
        for (i, r) in self.rows.iter().enumerate() {
            let trains = match (r.trainable, r.params) {
                (0, _) => "no",
                (t, p) if t == p => "yes",
                _ => "partly",
            };
            writeln!(f, "{i:<2}| {:width$} | {:>7} | {trains}", r.name, count(r.params))?;
        }
        writeln!(f, "{:<10} Trainable params", count(self.trainable))?;
        writeln!(f, "{:<10} Non-trainable params", count(self.total - self.trainable))?;
        writeln!(f, "{:<10} Total params", count(self.total))?;
        write!(f, "{:<10.3} Total estimated model params size (MB)", self.bytes as f64 / 1e6)?;
        if let Some(shape) = &self.output_shape {
            write!(f, "\nOutput shape {shape:?}")?;
        }
        Ok(())
    }
}
