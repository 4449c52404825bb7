//! How the ranks of a multi-rank run agree on stopping at the same step without a host sync of
//! the GPU: after every optimizer step each rank starts an asynchronous all-reduce (sum) of a
//! small CPU tensor saying whether it was asked to stop (and by which signal), and after the next step it waits
//! on that all-reduce (long finished by then: it ran while the step trained) and reads it. A
//! request seen by any rank at step k therefore stops every rank after step k+1, the same step
//! on all ranks by construction.
//!
//! The all-reduce runs on a Gloo group on the CPU: the run's own group when its backend is
//! Gloo, or, under NCCL, a second Gloo group over the same store with its own key prefix (as
//! `torch.distributed.new_group(backend="gloo")` makes one), created at the run's first step.
use tch::{Device, Kind, Tensor};

use super::deadline::MAX_TIME;
use crate::dist::{Backend, Dist, ProcessGroup, Work};
use crate::Result;

/// The signals (and `max_time`) whose arrival on any rank every rank learns (besides whether
/// any rank asked): they decide the examples' exit status and the Slurm requeue.
const SIGNALS: [&str; 3] = ["SIGTERM", "SIGUSR1", MAX_TIME];

/// The agreement of one multi-rank run (see the module's header).
pub(crate) struct StopAgreement {
    /// The Gloo group of an NCCL run, made at its first step.
    own_group: Option<ProcessGroup>,
    /// The previous step's all-reduce: its work, its tensor and this rank's reason then.
    in_flight: Option<(Work, Tensor, Option<String>)>,
}

impl StopAgreement {
    /// Nothing is started before the first step.
    pub(crate) fn new(_dist: &Dist) -> StopAgreement {
        StopAgreement { own_group: None, in_flight: None }
    }

    /// The Gloo group the flags are summed on.
    fn group<'a>(&'a mut self, dist: &'a Dist) -> Result<&'a ProcessGroup> {
        let pg = dist.process_group().ok_or_else(|| crate::Error::Dist {
            op: "stop agreement".into(),
            message: "a multi-rank run without a group".into(),
        })?;
        if pg.backend() == Backend::Gloo {
            return Ok(pg);
        }
        if self.own_group.is_none() {
            // Each run on this group gets keys of its own: every rank adds 1 to a counter, and
            // the n-th run's adds (all ranks join a run's group before any starts the next)
            // return values in (n*size, (n+1)*size].
            let size = pg.size() as i64;
            let n = (pg.store().add("trainbook_stop_gloo_runs", 1)? - 1) / size;
            let store = pg.store().with_prefix(&format!("trainbook_stop_gloo_{n}/"))?;
            self.own_group =
                Some(ProcessGroup::new(store, Backend::Gloo, pg.rank(), pg.size(), pg.timeout())?);
        }
        Ok(self.own_group.as_ref().expect("made above"))
    }

    /// After every optimizer step: reads the previous step's all-reduce and, unless that says
    /// stop, starts this step's with `reason`. Returns why every rank stops now: this rank's
    /// own reason, else the signal another rank received (`"SIGUSR1 (another rank)"`), else
    /// `"another rank"`.
    pub(crate) fn after_step(
        &mut self,
        dist: &Dist,
        reason: Option<String>,
    ) -> Result<Option<String>> {
        if let Some((work, flags, asked)) = self.in_flight.take() {
            work.wait()?;
            let sums = Vec::<f64>::try_from(&flags)?;
            if sums[0] > 0.0 {
                // Every rank read the same sums: all stop after this step, none starts another.
                let others = SIGNALS
                    .iter()
                    .zip(&sums[1..])
                    .find(|(_, &n)| n > 0.0)
                    .map_or("another rank".to_string(), |(s, _)| format!("{s} (another rank)"));
                return Ok(Some(asked.or(reason).unwrap_or(others)));
            }
        }
        let mut values = [reason.is_some() as u8 as f64, 0.0, 0.0, 0.0];
        for (value, signal) in values[1..].iter_mut().zip(SIGNALS) {
            *value = (reason.as_deref() == Some(signal)) as u8 as f64;
        }
        let flags = Tensor::from_slice(&values).to_kind(Kind::Double).to_device(Device::Cpu);
        let work = self.group(dist)?.all_reduce_sum_async(&flags)?;
        self.in_flight = Some((work, flags, reason));
        Ok(None)
    }

    /// Waits for the all-reduce still in flight, if any (every rank started it).
    pub(crate) fn finish(&mut self, _dist: &Dist) -> Result<()> {
        match self.in_flight.take() {
            Some((work, _, _)) => work.wait(),
            None => Ok(()),
        }
    }
}
