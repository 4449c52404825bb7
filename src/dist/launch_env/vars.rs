//! Reading a launcher's variables: the environment as a map, with parsing that names the
//! variable in every error.
use std::collections::HashMap;

use crate::{Error, Result};

/// The environment as a map, with parsing that names the variable in every error.
pub(super) struct Vars<'a>(pub &'a HashMap<String, String>);

impl Vars<'_> {
    pub fn get(&self, name: &str) -> Option<String> {
        self.0.get(name).map(|v| v.trim().to_string()).filter(|v| !v.is_empty())
    }

    pub fn has(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// A required non-negative integer; `hint` says who normally sets it.
    pub fn number(&self, name: &str, hint: &str) -> Result<usize> {
        let raw =
            self.get(name).ok_or_else(|| Error::DistEnv(format!("{name} is not set ({hint})")))?;
        raw.parse()
            .map_err(|_| Error::DistEnv(format!("{name}={raw:?} is not a non-negative integer")))
    }

    /// An optional non-negative integer (absent: `None`; present but malformed: an error).
    pub fn optional_number(&self, name: &str) -> Result<Option<usize>> {
        match self.get(name) {
            None => Ok(None),
            Some(_) => self.number(name, "").map(Some),
        }
    }

    /// MASTER_PORT if set (and valid), else `default`.
    pub fn port_or(&self, default: Option<u16>) -> Result<u16> {
        match self.get("MASTER_PORT") {
            None => default.ok_or_else(|| Error::DistEnv("MASTER_PORT is not set".into())),
            Some(raw) => {
                raw.parse::<u16>().ok().filter(|p| *p != 0).ok_or_else(|| {
                    Error::DistEnv(format!("MASTER_PORT={raw:?} is not a port number"))
                })
            }
        }
    }

    pub fn restart_count(&self) -> Result<u32> {
        for name in ["TORCHELASTIC_RESTART_COUNT", "TRAINBOOK_RESTART_COUNT"] {
            if let Some(raw) = self.get(name) {
                return raw
                    .parse()
                    .map_err(|_| Error::DistEnv(format!("{name}={raw:?} is not an integer")));
            }
        }
        Ok(0)
    }
}
