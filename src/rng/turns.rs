//! Ranks that are threads of one process take turns on libtorch's one CPU random generator.
//!
//! A process has a single default CPU generator: model initialisation, dropout and
//! `Tensor::rand` all draw from it. Ranks started as processes (torchrun) each have their own;
//! ranks started as threads by [`spawn`](crate::launch::spawn) would share it, and their draws would
//! interleave differently on every run. So CPU ranks take turns: a rank runs its code while it
//! holds the baton, with its own generator state installed, and hands the baton on (saving its
//! state) whenever it waits for the other ranks (a collective, DDP's backward, the store). A
//! rank's draws then come from its own stream in its own order, exactly as in a process of its
//! own, whatever the timing. Only one CPU rank computes at a time; ranks overlap only while
//! waiting. CUDA ranks do not take turns: each device has its own generator.
use std::cell::RefCell;
use std::sync::{Condvar, Mutex, PoisonError};

use super::generator::{cpu_rng_state, set_cpu_rng_state};
use crate::{Error, Result};

/// The right to compute (and to draw from the CPU generator), held by one CPU rank thread of
/// the process at a time (one baton for all `spawn` calls, should two run at once).
struct Baton {
    taken: Mutex<bool>,
    freed: Condvar,
}

static BATON: Baton = Baton { taken: Mutex::new(false), freed: Condvar::new() };

impl Baton {
    fn acquire(&self) {
        let mut taken = self.taken.lock().unwrap_or_else(PoisonError::into_inner);
        while *taken {
            taken = self.freed.wait(taken).unwrap_or_else(PoisonError::into_inner);
        }
        *taken = true;
    }

    fn release(&self) {
        *self.taken.lock().unwrap_or_else(PoisonError::into_inner) = false;
        self.freed.notify_one();
    }
}

/// This thread's place in the rotation.
struct Turn {
    /// The rank's generator state while it does not hold the baton.
    state: Vec<u8>,
    held: bool,
    /// The first failure to save or restore the state (reported when the rank ends).
    broken: Option<Error>,
}

thread_local! {
    static TURN: RefCell<Option<Turn>> = const { RefCell::new(None) };
}

/// A rank thread's membership in the rotation; [`TurnGuard::finish`] (or dropping it) leaves.
pub(crate) struct TurnGuard {
    _not_send: std::marker::PhantomData<*const ()>,
}

/// Joins the rotation on this thread: waits for the baton, then installs `state` (the
/// generator state every rank starts from, as each process of a launched job would).
pub(crate) fn enter(state: &[u8]) -> Result<TurnGuard> {
    BATON.acquire();
    if let Err(e) = set_cpu_rng_state(state) {
        BATON.release();
        return Err(e);
    }
    TURN.with(|t| *t.borrow_mut() = Some(Turn { state: Vec::new(), held: true, broken: None }));
    Ok(TurnGuard { _not_send: std::marker::PhantomData })
}

impl TurnGuard {
    /// Leaves the rotation and returns the rank's final generator state.
    pub(crate) fn finish(self) -> Result<Vec<u8>> {
        let turn = TURN.with(|t| t.borrow_mut().take());
        std::mem::forget(self);
        let Some(mut turn) = turn else {
            return Err(Error::InvalidArgument("left a rank rotation twice".into()));
        };
        if turn.held {
            let saved = cpu_rng_state();
            BATON.release();
            turn.state = saved?;
        }
        match turn.broken {
            Some(e) => Err(e),
            None => Ok(turn.state),
        }
    }
}

impl Drop for TurnGuard {
    fn drop(&mut self) {
        if let Some(turn) = TURN.with(|t| t.borrow_mut().take()) {
            if turn.held {
                BATON.release();
            }
        }
    }
}

/// Runs `wait`, a call that blocks until other ranks take part, without holding the baton:
/// this rank's generator state is saved before and restored after. Outside a rotation (a rank
/// that is a process, a CUDA rank, any other thread) it just runs `wait`.
pub(crate) fn blocking<T>(wait: impl FnOnce() -> T) -> T {
    let released = TURN.with(|t| {
        let mut slot = t.borrow_mut();
        let Some(turn) = slot.as_mut().filter(|turn| turn.held) else { return false };
        match cpu_rng_state() {
            Ok(state) => turn.state = state,
            Err(e) => {
                turn.broken.get_or_insert(e);
            }
        }
        turn.held = false;
        BATON.release();
        true
    });
    let out = wait();
    if released {
        TURN.with(|t| {
            if let Some(turn) = t.borrow_mut().as_mut() {
                BATON.acquire();
                turn.held = true;
                if let Err(e) = set_cpu_rng_state(&turn.state) {
                    turn.broken.get_or_insert(e);
                }
            }
        });
    }
    out
}
