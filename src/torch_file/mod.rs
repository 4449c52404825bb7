//! Files written by PyTorch's `torch.save`: a state dict from torchvision's hub cache
//! (`resnet34-b627a593.pth`), the nested dicts that the course's checkpoints hold
//! (`{"epoch": .., "model_state_dict": ..}`), an optimizer's `state_dict()`, torchvision's
//! `train.py` checkpoints. A file's content is a [`TorchValue`] tree. [`load`] reads one with a
//! pickle reader of its own (`read.rs`, `rebuild.rs`: libtorch's C++ unpickler turns every
//! `OrderedDict` into None, so it cannot read a state dict), every tensor on the CPU; [`save`]
//! writes one through libtorch's pickler (`convert.rs` and the shim) that `torch.load` reads,
//! `weights_only=True` (its default) included; [`state_dict_of`] finds the state dict in a
//! loaded file. The model-level calls (`load_state_dict_file`, `save_state_dict`) are
//! [`crate::models`]' and build on this module.
//!
//! Only the zip format that `torch.save` writes by default since PyTorch 1.6 is read; a legacy
//! file is an error that says so.
//!
//! ```no_run
//! use trainbook::torch_file::{self, TorchValue};
//! # fn main() -> trainbook::Result<()> {
//! let ckpt = torch_file::load("checkpoint.pt")?;
//! let epoch = ckpt.get("epoch").and_then(TorchValue::as_i64);
//! println!("saved after epoch {epoch:?}; keys {:?}", ckpt.keys());
//! # Ok(()) }
//! ```
mod convert;
mod pickle_value;
mod read;
mod rebuild;
mod state_dict;

use std::path::Path;

use tch::Tensor;

use crate::{Result, WithPath};

pub use state_dict::{state_dict_of, NamedTensors, STATE_DICT_KEYS};

/// One value of a `torch.save` file, as Python would see it after `torch.load`: `None`, a bool,
/// an int, a float, a str, a tensor, a list, a tuple or a dict (in insertion order; keys are
/// values too: optimizer states use int keys).
#[derive(Debug)]
pub enum TorchValue {
    /// Python's `None`.
    None,
    /// A `bool`.
    Bool(bool),
    /// An `int` (64-bit, as libtorch holds it).
    Int(i64),
    /// A `float` (an f64, bit for bit).
    Float(f64),
    /// A `str`.
    Str(String),
    /// A tensor (on the CPU after [`load`]).
    Tensor(Tensor),
    /// A `list`.
    List(Vec<TorchValue>),
    /// A `tuple`.
    Tuple(Vec<TorchValue>),
    /// A `dict` (or `OrderedDict`, as a state dict is), entries in order.
    Dict(Vec<(TorchValue, TorchValue)>),
    /// An object of another Python class (torchvision's checkpoints hold an
    /// `argparse.Namespace` under `"args"`): its class and what the pickle builds it from (its
    /// attributes' dict for a plain class, a constructor's arguments for others). Read only:
    /// [`save`] refuses it.
    Object {
        /// The class's qualified name (`"argparse.Namespace"`).
        class: String,
        /// The state the object is built from.
        state: Box<TorchValue>,
    },
}

impl TorchValue {
    /// A dict's value under the string key `key`, or an object's attribute of that name (None
    /// for other values or a missing key).
    pub fn get(&self, key: &str) -> Option<&TorchValue> {
        match self {
            TorchValue::Object { state, .. } => state.get(key),
            TorchValue::Dict(entries) => entries
                .iter()
                .find(|(k, _)| matches!(k, TorchValue::Str(s) if s == key))
                .map(|(_, v)| v),
            _ => None,
        }
    }

    /// A dict's keys as text (`"0"` for an int key), in order; empty for other values.
    pub fn keys(&self) -> Vec<String> {
        match self {
            TorchValue::Dict(entries) => entries.iter().map(|(k, _)| k.key_text()).collect(),
            _ => Vec::new(),
        }
    }

    /// The value if it is an int.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            TorchValue::Int(i) => Some(*i),
            _ => None,
        }
    }

    /// The value as a float if it is a float or an int (Python's `float(x)`).
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            TorchValue::Float(f) => Some(*f),
            TorchValue::Int(i) => Some(*i as f64),
            _ => None,
        }
    }

    /// The value if it is a str.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            TorchValue::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The value if it is a tensor.
    pub fn as_tensor(&self) -> Option<&Tensor> {
        match self {
            TorchValue::Tensor(t) => Some(t),
            _ => None,
        }
    }

    /// The entries of a dict whose values are all tensors (a state dict), with the keys as
    /// text; `None` for any other value.
    pub fn as_tensor_dict(&self) -> Option<Vec<(String, Tensor)>> {
        match self {
            TorchValue::Dict(entries) => entries
                .iter()
                .map(|(k, v)| v.as_tensor().map(|t| (k.key_text(), t.shallow_clone())))
                .collect(),
            _ => None,
        }
    }

    /// A state dict: a dict from names to tensors (the tensors shared, not copied), as
    /// `model.state_dict()` is.
    pub fn from_tensors(tensors: &[(String, Tensor)]) -> TorchValue {
        TorchValue::Dict(
            tensors
                .iter()
                .map(|(n, t)| (TorchValue::Str(n.clone()), TorchValue::Tensor(t.shallow_clone())))
                .collect(),
        )
    }

    /// A copy sharing the tensors' memory (`TorchValue` holds tensors, which are not `Clone`).
    pub fn shallow_clone(&self) -> TorchValue {
        match self {
            TorchValue::None => TorchValue::None,
            TorchValue::Bool(b) => TorchValue::Bool(*b),
            TorchValue::Int(i) => TorchValue::Int(*i),
            TorchValue::Float(f) => TorchValue::Float(*f),
            TorchValue::Str(s) => TorchValue::Str(s.clone()),
            TorchValue::Tensor(t) => TorchValue::Tensor(t.shallow_clone()),
            TorchValue::List(v) => TorchValue::List(v.iter().map(Self::shallow_clone).collect()),
            TorchValue::Tuple(v) => TorchValue::Tuple(v.iter().map(Self::shallow_clone).collect()),
            TorchValue::Dict(v) => TorchValue::Dict(
                v.iter().map(|(k, x)| (k.shallow_clone(), x.shallow_clone())).collect(),
            ),
            TorchValue::Object { class, state } => {
                TorchValue::Object { class: class.clone(), state: Box::new(state.shallow_clone()) }
            }
        }
    }

    /// A key as text: a str as it is, an int or a float in Python's spelling, else the kind.
    fn key_text(&self) -> String {
        match self {
            TorchValue::Str(s) => s.clone(),
            TorchValue::Int(i) => i.to_string(),
            TorchValue::Float(f) => f.to_string(),
            TorchValue::Bool(b) => if *b { "True" } else { "False" }.into(),
            TorchValue::None => "None".into(),
            other => format!("<{}>", other.kind_name()),
        }
    }

    /// Python's name for the value's type, for messages.
    pub fn kind_name(&self) -> &'static str {
        match self {
            TorchValue::None => "None",
            TorchValue::Bool(_) => "bool",
            TorchValue::Int(_) => "int",
            TorchValue::Float(_) => "float",
            TorchValue::Str(_) => "str",
            TorchValue::Tensor(_) => "Tensor",
            TorchValue::List(_) => "list",
            TorchValue::Tuple(_) => "tuple",
            TorchValue::Dict(_) => "dict",
            TorchValue::Object { .. } => "object",
        }
    }
}

impl From<Tensor> for TorchValue {
    fn from(t: Tensor) -> Self {
        TorchValue::Tensor(t)
    }
}
impl From<i64> for TorchValue {
    fn from(i: i64) -> Self {
        TorchValue::Int(i)
    }
}
impl From<f64> for TorchValue {
    fn from(f: f64) -> Self {
        TorchValue::Float(f)
    }
}
impl From<bool> for TorchValue {
    fn from(b: bool) -> Self {
        TorchValue::Bool(b)
    }
}
impl From<&str> for TorchValue {
    fn from(s: &str) -> Self {
        TorchValue::Str(s.to_string())
    }
}
impl From<String> for TorchValue {
    fn from(s: String) -> Self {
        TorchValue::Str(s)
    }
}

/// Reads a file written by `torch.save` (zip format), every tensor on the CPU, as
/// `torch.load(path, map_location="cpu", weights_only=False)` would, except that nothing named
/// in the file is run: objects of classes other than tensors and containers come back as
/// [`TorchValue::Object`]. Tensors that share a storage in the file share memory here too.
/// Errors: [`Error::Io`](crate::Error::Io) when the file cannot be read,
/// [`Error::Parse`](crate::Error::Parse) naming the file when it is not such a file (the
/// legacy format, a damaged archive or pickle, a storage of a dtype tch lacks).
pub fn load(path: impl AsRef<Path>) -> Result<TorchValue> {
    let path = path.as_ref();
    std::fs::metadata(path).with_path(path)?;
    read::load(path)
}

/// The bytes of `torch.save(value)`: a zip archive that `torch.load` reads.
pub fn to_bytes(value: &TorchValue) -> Result<Vec<u8>> {
    convert::to_bytes(value)
}

/// Writes `value` to `path` as `torch.save` does (creating parent directories), so that
/// `torch.load(path)` in Python returns the same dicts, lists, numbers and tensors. Tensors on a
/// GPU are saved from their device (`torch.load` then needs `map_location` on a machine
/// without one); write CPU tensors for a file anyone can read.
pub fn save(path: impl AsRef<Path>, value: &TorchValue) -> Result<()> {
    let path = path.as_ref();
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_path(dir)?;
    }
    let bytes = to_bytes(value)?;
    std::fs::write(path, bytes).with_path(path)
}

#[cfg(test)]
mod tests;
