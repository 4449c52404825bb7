//! Model weights in safetensors files with PyTorch state_dict names, so that torchvision
//! weights load into trainbook models and trainbook models load into PyTorch
//! (`model.load_state_dict(safetensors.torch.load_file(path))`), and the model's trainable
//! parameters by name in PyTorch's order ([`named_parameters`]); and the same weights in
//! `torch.save` files ([`load_state_dict_file`], [`save_state_dict`]), read and written through
//! [`crate::torch_file`].
use std::collections::BTreeMap;
use std::path::Path;

use safetensors::tensor::{Dtype, TensorView};
use safetensors::SafeTensors;
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

use crate::torch_file::{state_dict_of, TorchValue};
use crate::{Error, Result, WithPath};

/// The trainable variables of `vs` with their names, in creation order (PyTorch's
/// `named_parameters()` order for models built in module order).
pub fn named_parameters(vs: &VarStore) -> Vec<(String, Tensor)> {
    let by_ptr: Vec<(String, Tensor)> = vs.variables().into_iter().collect();
    vs.trainable_variables()
        .into_iter()
        .filter_map(|t| {
            by_ptr.iter().find(|(_, v)| v.data_ptr() == t.data_ptr()).map(|(n, _)| (n.clone(), t))
        })
        .collect()
}

/// What a load matched, like the `missing_keys`/`unexpected_keys` that PyTorch's
/// `load_state_dict(strict=False)` returns (`num_batches_tracked` is never listed).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LoadReport {
    /// Names copied into the model, in the file's order.
    pub loaded: Vec<String>,
    /// Names of model variables the file does not hold (left as they were), sorted.
    pub missing: Vec<String>,
    /// Names in the file that the model does not have (ignored), in the file's order.
    pub unexpected: Vec<String>,
}

/// Converts a safetensors view to a CPU tensor of its own dtype (a copy). Errors:
/// [`Error::InvalidArgument`] naming `name` for dtypes other than F32, F64, F16, BF16, I64,
/// I32 and U8.
pub fn tensor_from_view(name: &str, view: &TensorView<'_>) -> Result<Tensor> {
    let kind = match view.dtype() {
        Dtype::F32 => Kind::Float,
        Dtype::F64 => Kind::Double,
        Dtype::F16 => Kind::Half,
        Dtype::BF16 => Kind::BFloat16,
        Dtype::I64 => Kind::Int64,
        Dtype::I32 => Kind::Int,
        Dtype::U8 => Kind::Uint8,
        other => {
            return Err(Error::InvalidArgument(format!("{name}: unsupported dtype {other:?}")))
        }
    };
    let shape: Vec<i64> = view.shape().iter().map(|&d| d as i64).collect();
    Ok(Tensor::f_from_data_size(view.data(), &shape, kind)?)
}

fn dtype_of(kind: Kind) -> Result<Dtype> {
    Ok(match kind {
        Kind::Float => Dtype::F32,
        Kind::Double => Dtype::F64,
        Kind::Half => Dtype::F16,
        Kind::BFloat16 => Dtype::BF16,
        Kind::Int64 => Dtype::I64,
        Kind::Int => Dtype::I32,
        Kind::Uint8 => Dtype::U8,
        other => {
            return Err(Error::InvalidArgument(format!("cannot store {other:?} in safetensors")))
        }
    })
}

/// A tensor's bytes as safetensors sees them, borrowed from a contiguous CPU tensor.
struct TensorBytes<'a> {
    dtype: Dtype,
    shape: Vec<usize>,
    data: &'a [u8],
}

impl safetensors::View for TensorBytes<'_> {
    fn dtype(&self) -> Dtype {
        self.dtype
    }
    fn shape(&self) -> &[usize] {
        &self.shape
    }
    fn data(&self) -> std::borrow::Cow<'_, [u8]> {
        std::borrow::Cow::Borrowed(self.data)
    }
    fn data_len(&self) -> usize {
        self.data.len()
    }
}

/// Runs `f` on zero-copy safetensors views of the tensors (moved to contiguous CPU memory).
fn with_views<T>(
    tensors: &[(String, Tensor)],
    f: impl FnOnce(Vec<(String, TensorBytes<'_>)>) -> Result<T>,
) -> Result<T> {
    let cpu: Vec<(String, Tensor)> =
        tensors.iter().map(|(n, t)| (n.clone(), t.to_device(Device::Cpu).contiguous())).collect();
    let mut views = Vec::with_capacity(cpu.len());
    for (name, t) in &cpu {
        let len = t.numel() * t.kind().elt_size_in_bytes();
        // SAFETY: `t` is a contiguous CPU tensor kept alive by `cpu` while the views are used.
        let data = if len == 0 {
            &[][..]
        } else {
            unsafe { std::slice::from_raw_parts(t.data_ptr() as *const u8, len) }
        };
        views.push((
            name.clone(),
            TensorBytes {
                dtype: dtype_of(t.kind())?,
                shape: t.size().iter().map(|&d| d as usize).collect(),
                data,
            },
        ));
    }
    f(views)
}

/// Serialises named tensors (any device) to safetensors bytes, with optional `__metadata__`
/// (what `safetensors.torch.save` produces). Errors: [`Error::InvalidArgument`] for a dtype
/// safetensors cannot hold here (not F32, F64, F16, BF16, I64, I32 or U8).
pub fn to_safetensors_bytes(
    tensors: &[(String, Tensor)],
    metadata: Option<std::collections::HashMap<String, String>>,
) -> Result<Vec<u8>> {
    with_views(tensors, |views| {
        safetensors::serialize(views, metadata)
            .map_err(|e| Error::InvalidArgument(format!("safetensors: {e}")))
    })
}

/// Writes named tensors to a safetensors file, streaming each tensor's memory to disk (no
/// intermediate buffer of the whole file).
pub fn save_tensors_file(tensors: &[(String, Tensor)], path: &Path) -> Result<()> {
    let mut names = std::collections::BTreeSet::new();
    if let Some((twice, _)) = tensors.iter().find(|(n, _)| !names.insert(n.as_str())) {
        return Err(Error::InvalidArgument(format!(
            "{}: two tensors are named {twice}",
            path.display()
        )));
    }
    with_views(tensors, |views| {
        safetensors::serialize_to_file(views, None, path).map_err(|e| match e {
            safetensors::SafeTensorError::IoError(io) => Error::io(path, io),
            other => Error::InvalidArgument(format!("{}: safetensors: {other}", path.display())),
        })
    })
}

/// Reads every tensor of a safetensors buffer (CPU copies), in file order; `origin` names the
/// source in errors ([`Error::Dataset`] when the bytes are not safetensors).
pub fn from_safetensors_bytes(bytes: &[u8], origin: &Path) -> Result<Vec<(String, Tensor)>> {
    let st =
        SafeTensors::deserialize(bytes).map_err(|e| Error::parse(origin, "safetensors file", e))?;
    st.tensors()
        .iter()
        .map(|(name, view)| Ok((name.clone(), tensor_from_view(name, view)?)))
        .collect()
}

/// The model's state dict: every variable (parameters and BatchNorm running statistics) with
/// PyTorch's names, plus the `num_batches_tracked` counters PyTorch's BatchNorm expects where
/// the model has none of its own (trainbook's BatchNorm; a TorchScript module has them).
pub fn state_dict(vs: &VarStore) -> Vec<(String, Tensor)> {
    let vars: BTreeMap<String, Tensor> = vs.variables().into_iter().collect();
    let mut out: Vec<(String, Tensor)> =
        vars.iter().map(|(n, t)| (n.clone(), t.shallow_clone())).collect();
    for name in vars.keys().filter_map(|n| n.strip_suffix(".running_mean")) {
        let counter = format!("{name}.num_batches_tracked");
        if !vars.contains_key(&counter) {
            out.push((counter, Tensor::from(0i64)));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// Saves the model's state dict ([`state_dict`]) to `path` as safetensors, creating parent
/// directories: PyTorch loads it with `model.load_state_dict(safetensors.torch.load_file(path))`.
pub fn save_safetensors(vs: &VarStore, path: &Path) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_path(dir)?;
    }
    save_tensors_file(&state_dict(vs), path)
}

/// Copies named tensors into the model's variables, converting the dtype as PyTorch's
/// `load_state_dict` does (`copy_`). `num_batches_tracked` is ignored where the model has no
/// such variable (trainbook's BatchNorm has none). A shape mismatch, or an
/// integer tensor for a floating-point variable (or the reverse), is always an error listing
/// every such name; with `strict`, so are missing and unexpected names.
pub fn load_state_dict(
    vs: &mut VarStore,
    tensors: &[(String, Tensor)],
    strict: bool,
) -> Result<LoadReport> {
    let vars: BTreeMap<String, Tensor> = vs.variables().into_iter().collect();
    let mut report = LoadReport::default();
    let mut mismatched = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for (name, t) in tensors {
        if name.ends_with("num_batches_tracked") && !vars.contains_key(name) {
            continue;
        }
        match vars.get(name) {
            None => report.unexpected.push(name.clone()),
            Some(var) if var.size() != t.size() => {
                mismatched.push(format!("{name}: file {:?}, model {:?}", t.size(), var.size()))
            }
            Some(var) if var.is_floating_point() != t.is_floating_point() => mismatched
                .push(format!("{name}: file dtype {:?}, model dtype {:?}", t.kind(), var.kind())),
            Some(_) => {
                seen.insert(name.clone());
            }
        }
    }
    report.missing = vars.keys().filter(|n| !seen.contains(*n)).cloned().collect();
    if !mismatched.is_empty() {
        return Err(Error::InvalidArgument(format!(
            "shape or dtype mismatch for {} tensor(s):\n  {}",
            mismatched.len(),
            mismatched.join("\n  ")
        )));
    }
    if strict && (!report.missing.is_empty() || !report.unexpected.is_empty()) {
        return Err(Error::InvalidArgument(format!(
            "state dict does not match the model: missing {:?}, unexpected {:?}",
            report.missing, report.unexpected
        )));
    }
    tch::no_grad(|| -> Result<()> {
        for (name, t) in tensors {
            if let Some(var) = vars.get(name).filter(|_| seen.contains(name)) {
                let mut var = var.shallow_clone();
                var.f_copy_(&t.to_device(var.device()).to_kind(var.kind()))?;
                report.loaded.push(name.clone());
            }
        }
        Ok(())
    })?;
    Ok(report)
}

/// Loads a safetensors file into the model (see [`load_state_dict`]).
pub fn load_safetensors(vs: &mut VarStore, path: &Path, strict: bool) -> Result<LoadReport> {
    let bytes = std::fs::read(path).with_path(path)?;
    let tensors = from_safetensors_bytes(&bytes, path)?;
    load_state_dict(vs, &tensors, strict).map_err(|e| match e {
        Error::InvalidArgument(m) => Error::InvalidArgument(format!("{}: {m}", path.display())),
        other => other,
    })
}

/// Loads a weights file into the model, whichever of the two formats it is: a `torch.save`
/// file (`.pt`/`.pth`, recognised by its zip header; see
/// [`load_state_dict_file`]) or safetensors ([`load_safetensors`]).
///
/// ```no_run
/// use tch::nn::VarStore;
/// use trainbook::models::{load_weights, resnet34_classifier};
/// # fn main() -> trainbook::Result<()> {
/// let mut vs = VarStore::new(tch::Device::Cpu);
/// let net = resnet34_classifier(&vs.root(), 3);
/// // torchvision's ImageNet weights; the course's head stays as initialised.
/// let report = load_weights(&mut vs, "resnet34-b627a593.pth", false)?;
/// println!("new head: {:?}", report.missing);
/// # Ok(()) }
/// ```
pub fn load_weights(vs: &mut VarStore, path: impl AsRef<Path>, strict: bool) -> Result<LoadReport> {
    let path = path.as_ref();
    if is_torch_save(path)? {
        load_state_dict_file(vs, path, strict)
    } else {
        load_safetensors(vs, path, strict)
    }
}

/// Whether the file at `path` starts as a zip archive, `torch.save`'s format (else it is taken
/// for safetensors).
pub(super) fn is_torch_save(path: &Path) -> Result<bool> {
    use std::io::Read;
    let mut magic = [0u8; 2];
    let mut file = std::fs::File::open(path).with_path(path)?;
    let n = file.read(&mut magic).with_path(path)?;
    Ok(n == 2 && &magic == b"PK")
}

/// Loads the state dict of a `torch.save` file into the model (see [`state_dict_of`] for where
/// it is looked for, and [`load_state_dict`] for `strict` and the checks). Errors name the file.
///
/// ```no_run
/// use tch::nn::VarStore;
/// use trainbook::models::{resnet34, HeadKind};
/// # fn main() -> trainbook::Result<()> {
/// let mut vs = VarStore::new(tch::Device::Cpu);
/// let net = resnet34(&vs.root(), 1000, HeadKind::Linear);
/// // torchvision's file, as `torchvision.models.resnet34(weights="IMAGENET1K_V1")` caches it.
/// let report = trainbook::models::load_state_dict_file(
///     &mut vs,
///     "/home/me/.cache/torch/hub/checkpoints/resnet34-b627a593.pth",
///     true,
/// )?;
/// assert!(report.missing.is_empty());
/// # Ok(()) }
/// ```
pub fn load_state_dict_file(
    vs: &mut VarStore,
    path: impl AsRef<Path>,
    strict: bool,
) -> Result<LoadReport> {
    let path = path.as_ref();
    let value = crate::torch_file::load(path)?;
    let (_, tensors) = state_dict_of(&value, path)?;
    load_state_dict(vs, &tensors, strict).map_err(|e| match e {
        Error::InvalidArgument(m) => Error::InvalidArgument(format!("{}: {m}", path.display())),
        other => other,
    })
}

/// Writes the model's state dict ([`state_dict`]: parameters, BatchNorm statistics and
/// `num_batches_tracked`, on the CPU) as `torch.save(model.state_dict(), path)` does, so that a
/// PyTorch user loads it with `model.load_state_dict(torch.load(path))`.
pub fn save_state_dict(vs: &VarStore, path: impl AsRef<Path>) -> Result<()> {
    let cpu: Vec<(String, Tensor)> =
        state_dict(vs).into_iter().map(|(n, t)| (n, t.to_device(Device::Cpu))).collect();
    crate::torch_file::save(path, &TorchValue::from_tensors(&cpu))
}
