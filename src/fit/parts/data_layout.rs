//! The run's data layout (ranks x per-rank batch x accumulation), kept in every checkpoint
//! (key `data_layout`), and the elastic resume it makes possible: a checkpoint written on N
//! ranks continues on M with the same global batch, the accumulation adjusted, and the same
//! samples in every optimizer step from the stop onward.
//!
//! Why the samples stay the same: a `DistributedSampler` (torch's, and trainbook's) draws one
//! permutation of the data set per epoch (from the seed and the epoch, not the rank count) and
//! gives rank r the positions r, r + W, r + 2W, ... With per-rank batches of b and k batches
//! per step, optimizer step s takes the positions [s G, (s + 1) G) of that permutation, G = W b
//! k, whatever W is. Keeping G fixed keeps each step's samples; only the order in which their
//! gradients are summed changes (float rounding), and the per-batch statistics of BatchNorm.
use serde::{Deserialize, Serialize};

use crate::dist::Dist;
use crate::fit::run::resume::Start;
use crate::stateful::{PartState, Stateful};
use crate::Result;

/// Ranks, per-rank batch size and micro-batches per optimizer step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Layout {
    pub world_size: usize,
    pub batch_size: usize,
    pub accumulate: usize,
}

impl Layout {
    /// Samples per optimizer step over all ranks.
    fn global_batch(&self) -> usize {
        self.world_size * self.batch_size * self.accumulate
    }
}

/// The run's layout, and the one of the checkpoint it resumed from (`saved`).
pub(crate) struct DataLayout {
    pub current: Layout,
    pub saved: Option<Layout>,
}

/// How a resumed run continues on another number of ranks.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Elastic {
    /// Micro-batches per optimizer step on this run's ranks.
    pub accumulate: usize,
    /// Batches of the epoch in progress already trained, per rank of this run.
    pub skip: usize,
    /// What changed, for the run's output.
    pub note: String,
}

impl DataLayout {
    /// The layout of a run on `dist`'s ranks, of `batch_size` per rank and `accumulate`
    /// batches per step.
    pub fn of(dist: &Dist, batch_size: usize, accumulate: usize) -> DataLayout {
        let current = Layout { world_size: dist.world_size(), batch_size, accumulate };
        DataLayout { current, saved: None }
    }

    /// A resumed run's `start` on this run's ranks ([`elastic`](Self::elastic), said on rank
    /// 0), and the accumulation when it changed (which the checkpoints then record).
    pub fn adjust(&mut self, dist: &Dist, mut start: Start) -> Result<(Start, Option<usize>)> {
        let Some(plan) = self.elastic(start.skip)? else { return Ok((start, None)) };
        dist.println(&plan.note);
        self.current.accumulate = plan.accumulate;
        start.skip = plan.skip;
        Ok((start, Some(plan.accumulate)))
    }

    /// The plan for a run resumed from a checkpoint that had trained `skip` batches per rank of
    /// its epoch: `None` when the rank count did not change (or the checkpoint has no layout);
    /// else the accumulation that keeps the checkpoint's global batch with this run's ranks and
    /// per-rank batch, and where to continue in this run's batches. An error when no
    /// accumulation does (the global batch is not a multiple of ranks x batch), or the
    /// checkpoint stopped inside an accumulation window.
    pub fn elastic(&self, skip: usize) -> Result<Option<Elastic>> {
        let (now, Some(then)) = (self.current, self.saved) else { return Ok(None) };
        if now.world_size == then.world_size {
            return Ok(None);
        }
        let global = then.global_batch();
        let per_step = now.world_size * now.batch_size;
        let bad = |why: String| {
            Err(crate::Error::InvalidArgument(format!(
                "resuming a checkpoint of {} ranks x batch {} x accumulation {} on {} ranks x batch {}: {why}",
                then.world_size, then.batch_size, then.accumulate, now.world_size, now.batch_size
            )))
        };
        if per_step == 0 || global % per_step != 0 {
            return bad(format!(
                "its global batch of {global} is not a multiple of {per_step}; pick a per-rank batch that divides it"
            ));
        }
        if then.accumulate == 0 || skip % then.accumulate != 0 {
            return bad(format!("it stopped inside an accumulation window ({skip} batches done)"));
        }
        let accumulate = global / per_step;
        let steps = skip / then.accumulate;
        let note = format!(
            "elastic resume: the checkpoint was written by {} ranks x batch {} x accumulation {}; \
             continuing on {} ranks x batch {} x accumulation {accumulate}: the same global batch of \
             {global} and the same samples in every step from step {} of the epoch on (sums over \
             ranks in another order: float rounding differs; RNG states not restored)",
            then.world_size,
            then.batch_size,
            then.accumulate,
            now.world_size,
            now.batch_size,
            steps
        );
        Ok(Some(Elastic { accumulate, skip: steps * accumulate, note }))
    }
}

impl Stateful for DataLayout {
    fn state_key(&self) -> String {
        "data_layout".into()
    }
    fn state_dict(&self) -> Result<PartState> {
        PartState::of_serde(&self.current)
    }
    fn load_state_dict(&mut self, state: PartState) -> Result<()> {
        self.saved = Some(state.parse(&self.state_key())?);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(world_size: usize, batch_size: usize, accumulate: usize) -> Layout {
        Layout { world_size, batch_size, accumulate }
    }

    #[test]
    fn the_global_batch_and_the_position_carry_over() {
        let from = |saved, current| DataLayout { current, saved: Some(saved) };
        // 2 ranks x 4 -> 1 rank x 4: accumulate 2; 3 steps done = 6 batches of the one rank.
        let e = from(layout(2, 4, 1), layout(1, 4, 1)).elastic(3).unwrap().unwrap();
        assert_eq!((e.accumulate, e.skip), (2, 6));
        assert!(e.note.contains("global batch of 8"), "{}", e.note);
        // 1 rank x 4 x 2 -> 2 ranks x 4: accumulate 1; 3 steps = 6 batches -> 3 per rank.
        let e = from(layout(1, 4, 2), layout(2, 4, 2)).elastic(6).unwrap().unwrap();
        assert_eq!((e.accumulate, e.skip), (1, 3));
        // 4 ranks x 8 -> 2 ranks x 16: accumulate 1.
        let e = from(layout(4, 8, 1), layout(2, 16, 1)).elastic(5).unwrap().unwrap();
        assert_eq!((e.accumulate, e.skip), (1, 5));
        // The same rank count: nothing changes; no saved layout: nothing either.
        assert_eq!(from(layout(2, 4, 1), layout(2, 8, 1)).elastic(3).unwrap(), None);
        let fresh = DataLayout { current: layout(2, 4, 1), saved: None };
        assert_eq!(fresh.elastic(3).unwrap(), None);
        // A global batch of 8 on 3 ranks x 4: no accumulation makes it; an error says so.
        let err = from(layout(2, 4, 1), layout(3, 4, 1)).elastic(3).unwrap_err();
        assert!(err.to_string().contains("not a multiple of 12"), "{err}");
        let err = from(layout(1, 4, 2), layout(2, 4, 1)).elastic(3).unwrap_err();
        assert!(err.to_string().contains("inside an accumulation window"), "{err}");
    }

    #[test]
    fn the_layout_goes_through_a_checkpoint_as_the_saved_one() {
        let mut part = DataLayout { current: layout(2, 4, 1), saved: None };
        let state = part.state_dict().unwrap();
        let mut later = DataLayout { current: layout(1, 4, 1), saved: None };
        later.load_state_dict(state).unwrap();
        assert_eq!((later.saved, later.current), (Some(layout(2, 4, 1)), layout(1, 4, 1)));
        part.load_state_dict(PartState::of_value(serde_json::json!({"x": 1}))).unwrap_err();
    }
}
