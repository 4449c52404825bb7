//! Ranks that are threads of one process take turns on libtorch's shared random generators.
//!
//! A process has a single default CPU generator: model initialisation, dropout and
//! `Tensor::rand` all draw from it. Ranks started as processes (torchrun) each have their own;
//! ranks started as threads by [`spawn`](crate::launch::spawn) would share it, and their draws would
//! interleave differently on every run. So CPU ranks take turns: a rank runs its code while it
//! holds the baton, with its own generator state installed, and hands the baton on (saving its
//! state) whenever it waits for the other ranks (a collective, DDP's backward, the store). A
//! rank's draws then come from its own stream in its own order, exactly as in a process of its
//! own, whatever the timing. Only one CPU rank computes at a time; ranks overlap only while
//! waiting. CUDA ranks with a GPU each do not take turns: each device has its own generator
//! (seeded per rank by [`manual_seed`](super::manual_seed), which leaves the other GPUs'
//! alone). Ranks that share a GPU take turns like CPU ranks, and their turn carries the
//! state of that GPU's generator along with the CPU generator's.
use std::cell::RefCell;
use std::sync::{Condvar, Mutex, PoisonError};

use tch::Device;

use super::generator::{rng_state, set_rng_state};
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
    /// The generators the rank shares with other ranks, each with the rank's state while it
    /// does not hold the baton.
    states: Vec<(Device, Vec<u8>)>,
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

/// Joins the rotation on this thread: waits for the baton, then installs `starts`, the state
/// each shared generator starts from (the CPU's, and a shared GPU's), as each process of a
/// launched job would start.
pub(crate) fn enter(starts: Vec<(Device, Vec<u8>)>) -> Result<TurnGuard> {
    BATON.acquire();
    if let Err(e) = install(&starts) {
        BATON.release();
        return Err(e);
    }
    let turn = Turn { states: starts, held: true, broken: None };
    TURN.with(|t| *t.borrow_mut() = Some(turn));
    Ok(TurnGuard { _not_send: std::marker::PhantomData })
}

/// Makes `states` the generators' current states.
fn install(states: &[(Device, Vec<u8>)]) -> Result<()> {
    states.iter().try_for_each(|(device, state)| set_rng_state(*device, state))
}

/// Reads the generators' current states into `states`.
fn save(states: &mut [(Device, Vec<u8>)]) -> Result<()> {
    for (device, state) in states.iter_mut() {
        *state = rng_state(*device)?;
    }
    Ok(())
}

impl TurnGuard {
    /// Leaves the rotation and returns the rank's final generator states.
    pub(crate) fn finish(self) -> Result<Vec<(Device, Vec<u8>)>> {
        let turn = TURN.with(|t| t.borrow_mut().take());
        std::mem::forget(self);
        let Some(mut turn) = turn else {
            return Err(Error::InvalidArgument("left a rank rotation twice".into()));
        };
        if turn.held {
            let saved = save(&mut turn.states);
            BATON.release();
            saved?;
        }
        match turn.broken {
            Some(e) => Err(e),
            None => Ok(turn.states),
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
/// this rank's generator states are saved before and restored after. Outside a rotation (a
/// rank that is a process, a CUDA rank with a GPU of its own, any other thread) it just runs
/// `wait`.
pub(crate) fn blocking<T>(wait: impl FnOnce() -> T) -> T {
    let released = TURN.with(|t| {
        let mut slot = t.borrow_mut();
        let Some(turn) = slot.as_mut().filter(|turn| turn.held) else { return false };
        if let Err(e) = save(&mut turn.states) {
            turn.broken.get_or_insert(e);
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
                if let Err(e) = install(&turn.states) {
                    turn.broken.get_or_insert(e);
                }
            }
        });
    }
    out
}
