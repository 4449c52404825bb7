//! The one shape of a run's stateful parts: [`Stateful`] saves a part to a small serde value
//! plus named tensors ([`PartState`]) and loads it back, under a stable key. A checkpoint
//! stores any number of parts by key without knowing what they are
//! ([`TrainState::with_parts`](crate::checkpoint::TrainState::with_parts),
//! [`restore_parts`](crate::checkpoint::restore_parts)); the learning-rate schedule, the
//! float16 loss scaler, early stopping and the EMA of the weights are parts.
//!
//! This is torch's protocol under torch's names: `torch.distributed.checkpoint.stateful.Stateful`
//! has `state_dict()` and `load_state_dict(state_dict)`, and Lightning's callbacks keep theirs
//! under a `state_key`. It sits on the crate's ground floor, so the checkpoint layer consumes
//! it while the training loop and `fit` implement it, with no arrow pointing up.
use tch::Tensor;

use crate::{Error, Result};

/// What a part saves: a small serde value (counters, settings, a schedule's position) and
/// named tensors (written as `<key>.safetensors` beside the model's).
#[derive(Debug, Default)]
pub struct PartState {
    /// The part's small state (`serde_json::Value::Null` when it has none).
    pub value: serde_json::Value,
    /// The part's tensors by name (empty when it has none).
    pub tensors: Vec<(String, Tensor)>,
}

impl PartState {
    /// A state of a serde value alone.
    ///
    /// ```
    /// use trainbook::PartState;
    /// let s = PartState::of_value(serde_json::json!({"wait": 2}));
    /// assert_eq!((s.value["wait"].as_u64(), s.tensors.len()), (Some(2), 0));
    /// ```
    pub fn of_value(value: serde_json::Value) -> PartState {
        PartState { value, tensors: Vec::new() }
    }

    /// A state of `value`'s serde form alone. Errors: [`Error::InvalidArgument`] when it has
    /// no JSON form (a map with non-string keys, say).
    pub fn of_serde<T: serde::Serialize>(value: &T) -> Result<PartState> {
        let value =
            serde_json::to_value(value).map_err(|e| Error::InvalidArgument(e.to_string()))?;
        Ok(PartState::of_value(value))
    }

    /// The value as `T`; errors: [`Error::Checkpoint`] naming the part (`key`) when it does not
    /// parse.
    pub fn parse<T: serde::de::DeserializeOwned>(&self, key: &str) -> Result<T> {
        serde_json::from_value(self.value.clone())
            .map_err(|e| Error::Checkpoint(format!("the state of part `{key}` is unreadable: {e}")))
    }
}

/// A part of a run that keeps state across a checkpoint (torch's `Stateful`: `state_dict` and
/// `load_state_dict`, under Lightning's `state_key`).
///
/// ```
/// use trainbook::{PartState, Stateful};
///
/// /// Counts the epochs it has seen.
/// struct Epochs(u64);
///
/// impl Stateful for Epochs {
///     fn state_key(&self) -> String {
///         "epochs_seen".into()
///     }
///     fn state_dict(&self) -> trainbook::Result<PartState> {
///         Ok(PartState::of_value(serde_json::json!(self.0)))
///     }
///     fn load_state_dict(&mut self, state: PartState) -> trainbook::Result<()> {
///         self.0 = state.parse(&self.state_key())?;
///         Ok(())
///     }
/// }
///
/// let mut back = Epochs(0);
/// back.load_state_dict(Epochs(3).state_dict()?)?;
/// assert_eq!(back.0, 3);
/// # Ok::<(), trainbook::Error>(())
/// ```
pub trait Stateful {
    /// The part's name in checkpoints, stable across versions: lowercase ASCII letters,
    /// digits and `_` ([`check_state_key`]); `model`, `optimizer` and `manifest` are taken.
    fn state_key(&self) -> String;
    /// The part's state now. Tensors may stay on their device: the checkpoint copies them to
    /// the host before anything else changes them.
    fn state_dict(&self) -> Result<PartState>;
    /// Puts back a state that [`state_dict`](Self::state_dict) returned. Errors name what
    /// does not fit (a shape, a missing tensor, an unreadable value).
    fn load_state_dict(&mut self, state: PartState) -> Result<()>;
}

/// Checks a part's key: 1 to 64 characters of `a-z`, `0-9` and `_`, and not one of the names
/// the checkpoint's own files use. Errors: [`Error::InvalidArgument`] naming the key.
///
/// ```
/// use trainbook::check_state_key;
/// assert!(check_state_key("early_stopping").is_ok());
/// assert!(check_state_key("model").is_err());
/// assert!(check_state_key("../x").is_err());
/// ```
pub fn check_state_key(key: &str) -> Result<()> {
    let chars_ok = key.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if key.is_empty() || key.len() > 64 || !chars_ok {
        return Err(Error::InvalidArgument(format!(
            "state key {key:?}: use 1 to 64 characters of a-z, 0-9 and _"
        )));
    }
    if ["model", "optimizer", "manifest"].contains(&key) {
        return Err(Error::InvalidArgument(format!(
            "state key {key:?} is taken by the checkpoint's own files"
        )));
    }
    Ok(())
}
