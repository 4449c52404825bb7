//! Key-value stores through which ranks find each other: c10d's `TCPStore` and `PrefixStore`.
use std::ffi::CString;
use std::time::Duration;

use crate::shim::c10d as ffi;
use crate::{Error, Result};

/// A c10d key-value store (a `TCPStore`, or a `PrefixStore` view of one), as
/// `torch.distributed.TCPStore`: the rendezvous through which ranks exchange addresses before
/// a process group exists. `Send + Sync`; every call is bounded by the timeout given to
/// [`Store::tcp`]. Keys are strings without NUL bytes, values arbitrary bytes.
pub struct Store {
    raw: *mut ffi::TbStore,
    description: String,
}

// SAFETY: c10d stores are internally synchronised; the handle is only freed in Drop.
unsafe impl Send for Store {}
unsafe impl Sync for Store {}

fn c_string(what: &str, value: &str) -> Result<CString> {
    CString::new(value)
        .map_err(|_| Error::InvalidArgument(format!("{what} contains a NUL byte: {value:?}")))
}

impl Store {
    /// Connects to (or, with `is_server`, hosts) a `TCPStore` at `host:port`, like
    /// `TCPStore(host, port, world_size, is_master, timeout)`. With `num_workers` (the world
    /// size, given on every rank as torch does) each client announces itself and the server
    /// waits until all have joined. Errors: [`Error::Dist`] when the port cannot be bound, the
    /// server cannot be reached, or the workers do not all join within `timeout`;
    /// [`Error::InvalidArgument`] for a host containing a NUL byte.
    pub fn tcp(
        host: &str,
        port: u16,
        is_server: bool,
        num_workers: Option<usize>,
        timeout: Duration,
    ) -> Result<Store> {
        let c_host = c_string("host", host)?;
        let mut raw = std::ptr::null_mut();
        let workers = num_workers.map(|n| n as i64).unwrap_or(-1);
        // SAFETY: pointers are valid for the call; on success `raw` receives an owned handle.
        let err = crate::rng::blocking(|| unsafe {
            ffi::tb_tcp_store_new(
                c_host.as_ptr(),
                port,
                is_server as i32,
                workers,
                1,
                duration_ms(timeout),
                &mut raw,
            )
        });
        let role = if is_server { "hosting" } else { "connecting to" };
        ffi::check(&format!("TCPStore ({role} {host}:{port})"), err)?;
        Ok(Store { raw, description: format!("TCPStore {host}:{port}") })
    }

    /// A view of `self` in which every key is prefixed by `prefix` (c10d's `PrefixStore`).
    pub fn with_prefix(&self, prefix: &str) -> Result<Store> {
        let c_prefix = c_string("prefix", prefix)?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: `self.raw` is a live handle; the new store keeps its own reference to it.
        let err = unsafe { ffi::tb_prefix_store_new(c_prefix.as_ptr(), self.raw, &mut raw) };
        ffi::check("PrefixStore", err)?;
        Ok(Store { raw, description: format!("{} (prefix {prefix:?})", self.description) })
    }

    /// Sets `key` to `value`, replacing any previous value (`store.set(key, value)`); waiters
    /// in [`get`](Self::get) on other ranks wake up.
    pub fn set(&self, key: &str, value: &[u8]) -> Result<()> {
        let c_key = c_string("key", key)?;
        // SAFETY: key and value are valid for the call.
        let err =
            unsafe { ffi::tb_store_set(self.raw, c_key.as_ptr(), value.as_ptr(), value.len()) };
        ffi::check(&format!("store set {key:?} on {}", self.description), err)
    }

    /// Blocks until `key` is set by some rank (up to the store's timeout) and returns its value
    /// (`store.get(key)`); a timeout is an [`Error::Dist`] naming the key.
    pub fn get(&self, key: &str) -> Result<Vec<u8>> {
        let c_key = c_string("key", key)?;
        let mut ptr = std::ptr::null_mut();
        let mut len = 0usize;
        // SAFETY: out-pointers are valid; on success `ptr` owns `len` bytes freed below.
        let err = crate::rng::blocking(|| unsafe {
            ffi::tb_store_get(self.raw, c_key.as_ptr(), &mut ptr, &mut len)
        });
        ffi::check(&format!("store get {key:?} from {}", self.description), err)?;
        // SAFETY: on success the shim returned `len` bytes at `ptr`; they are freed once, here.
        Ok(unsafe { crate::shim::take_bytes(ptr, len) })
    }

    /// Atomically adds `delta` to the integer at `key` (0 when unset) and returns the new value
    /// (`store.add(key, delta)`), e.g. to count the ranks that reached a point.
    pub fn add(&self, key: &str, delta: i64) -> Result<i64> {
        let c_key = c_string("key", key)?;
        let mut out = 0i64;
        // SAFETY: pointers valid for the call.
        let err = unsafe { ffi::tb_store_add(self.raw, c_key.as_ptr(), delta, &mut out) };
        ffi::check(&format!("store add {key:?} on {}", self.description), err)?;
        Ok(out)
    }

    pub(crate) fn raw(&self) -> *const ffi::TbStore {
        self.raw
    }

    /// What this store is, for messages: `TCPStore host:port`, followed by its prefixes.
    pub fn description(&self) -> &str {
        &self.description
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        // SAFETY: the handle was created by the shim and is freed exactly once.
        unsafe { ffi::tb_store_free(self.raw) }
    }
}

pub(crate) fn duration_ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX).max(1)
}
