//! A callback of one's own that keeps state ([`Callback::state_key`]) as one of the run's parts:
//! saved in every checkpoint under its key and put back on a resume like the built-in parts,
//! its key checked first (a valid key, not a built-in part's, not another callback's).
use crate::fit::callbacks::{Callbacks, SharedCallback};
#[cfg(doc)]
use crate::fit::Callback;
use crate::stateful::{check_state_key, PartState, Stateful};
use crate::{Error, Result};

/// A shared callback seen as a [`Stateful`] part under the key it gave.
pub(crate) struct CallbackPart {
    key: String,
    callback: SharedCallback,
}

impl Stateful for CallbackPart {
    fn state_key(&self) -> String {
        self.key.clone()
    }
    fn state_dict(&self) -> Result<PartState> {
        // A callback that panicked earlier left its lock poisoned: its state is still there.
        self.callback.lock().unwrap_or_else(|e| e.into_inner()).state_dict()
    }
    fn load_state_dict(&mut self, state: PartState) -> Result<()> {
        self.callback.lock().unwrap_or_else(|e| e.into_inner()).load_state_dict(state)
    }
}

/// The callbacks among `callbacks` that keep state, as parts. Errors
/// ([`Error::InvalidArgument`], naming the key): a key [`check_state_key`] refuses, a built-in
/// part's key (`built_in`), or a key two callbacks give.
pub(crate) fn stateful_callbacks(
    callbacks: &Callbacks,
    built_in: &[&str],
) -> Result<Vec<CallbackPart>> {
    let mut parts: Vec<CallbackPart> = Vec::new();
    let mut failure = None;
    callbacks.each_shared(|callback| {
        if failure.is_some() {
            return;
        }
        let key = callback.lock().unwrap_or_else(|e| e.into_inner()).state_key();
        let Some(key) = key else { return };
        let refused =
            |why: String| Error::InvalidArgument(format!("a callback's state key {key:?}: {why}"));
        failure = if let Err(e) = check_state_key(&key) {
            let why = match e {
                Error::InvalidArgument(m) => m.replace(&format!("state key {key:?}: "), ""),
                other => other.to_string(),
            };
            Some(refused(why))
        } else if built_in.contains(&key.as_str()) {
            Some(refused(format!("`{key}` is the key of one of the run's built-in parts")))
        } else if parts.iter().any(|p| p.key == key) {
            Some(refused(format!(
                "two callbacks keep their state under `{key}`: give each its own key"
            )))
        } else {
            parts.push(CallbackPart { key, callback });
            None
        };
    });
    failure.map_or(Ok(parts), Err)
}
