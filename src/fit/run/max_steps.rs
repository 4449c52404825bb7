//! `Trainer::max_steps(n)` (Lightning's `max_steps`): the run ends after its n-th optimizer
//! step, even mid-epoch. The epoch that reaches it trains only the batches that make up the
//! missing steps (a batch limit for that epoch), is validated and checkpointed like any other,
//! and the run ends there; a run resumed from it has nothing left to train.
use crate::checkpoint::Checkpointer;
use crate::fit::FitConfig;

/// Whether `steps_done` optimizer steps finish the run.
pub(crate) fn reached(max_steps: Option<u64>, steps_done: u64) -> bool {
    max_steps.is_some_and(|m| steps_done >= m)
}

/// The batch limit of an epoch that starts (or resumes after `skip` batches) with the
/// checkpointer's steps behind it: the run's own limit, lowered to the batches of the steps
/// still missing (`cfg.accumulate` batches per step) when that is fewer.
pub(crate) fn epoch_limit(
    cfg: &FitConfig,
    ckpt: &Checkpointer,
    skip: usize,
    run_limit: Option<usize>,
) -> Option<usize> {
    limit_for(cfg.max_steps, ckpt.global_step(), (skip, cfg.accumulate), run_limit)
}

fn limit_for(
    max_steps: Option<u64>,
    steps_done: u64,
    (skip, accumulate): (usize, usize),
    run_limit: Option<usize>,
) -> Option<usize> {
    let Some(m) = max_steps else { return run_limit };
    let missing = m.saturating_sub(steps_done) as usize;
    let allowed = skip + missing.saturating_mul(accumulate.max(1));
    Some(run_limit.map_or(allowed, |l| l.min(allowed)))
}

/// After `epoch`: the line to print when the run's steps reached `max_steps` (it ends there).
pub(crate) fn end(cfg: &FitConfig, ckpt: &Checkpointer, epoch: u64) -> Option<String> {
    let m = cfg.max_steps.filter(|&m| ckpt.global_step() >= m)?;
    Some(format!(
        "max_steps: {m} optimizer steps reached in epoch {}; the run ends here",
        epoch + 1
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_covers_the_missing_steps_only() {
        assert_eq!(limit_for(None, 5, (0, 1), Some(3)), Some(3));
        assert_eq!(limit_for(Some(10), 8, (0, 1), None), Some(2));
        assert_eq!(limit_for(Some(10), 8, (0, 4), Some(100)), Some(8));
        assert_eq!(limit_for(Some(10), 8, (4, 2), Some(5)), Some(5));
        assert_eq!(limit_for(Some(10), 8, (4, 2), None), Some(8));
        assert!(reached(Some(3), 3) && !reached(Some(3), 2) && !reached(None, 100));
        let cfg = FitConfig { max_steps: Some(0), ..Default::default() };
        assert!(cfg.check_counts().unwrap_err().to_string().contains("max_steps"));
    }
}
