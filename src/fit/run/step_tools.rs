//! What a run keeps around its training steps across epochs besides the parts a checkpoint
//! holds: the step as a CUDA graph (`FitConfig::cuda_graphs`) and the profiler
//! (`FitConfig::profile`, traces in `OUT/profile/`).
use std::cell::RefCell;

use tch::Device;

use crate::dist::Dist;
use crate::fit::config::FitConfig;
use crate::train::{EpochOptions, Profiler, StepGraph};
use crate::Result;

/// The folder under the run's output where `fit` writes its profiler traces.
pub const PROFILE_DIR: &str = "profile";

/// The run's CUDA graph and profiler, each when asked for.
pub(crate) struct StepTools {
    graph: Option<RefCell<StepGraph>>,
    profiler: Option<RefCell<Profiler>>,
}

impl StepTools {
    /// The tools `cfg` asks for; each rank's traces are named after it (`rank0.*.pt.trace.json`).
    pub fn for_run(dist: &Dist, cfg: &FitConfig) -> Result<StepTools> {
        let profiler = cfg
            .profile
            .map(|schedule| -> Result<_> {
                let p = Profiler::new(cfg.out.join(PROFILE_DIR), schedule)?
                    .cuda(matches!(dist.device(), Device::Cuda(_)))
                    .worker_name(format!("rank{}", dist.rank()));
                Ok(RefCell::new(p))
            })
            .transpose()?;
        Ok(StepTools { graph: cfg.cuda_graphs.then(|| RefCell::new(StepGraph::new())), profiler })
    }

    /// `opts` with the graph and the profiler.
    pub fn apply<'a>(&'a self, mut opts: EpochOptions<'a>) -> EpochOptions<'a> {
        if let Some(g) = &self.graph {
            opts = opts.cuda_graph(g);
        }
        if let Some(p) = &self.profiler {
            opts = opts.profiler(p);
        }
        opts
    }

    /// Stops the profiler (a cycle cut short by the run's end is saved as it stands) and says
    /// where this rank's traces are.
    pub fn finish(&self, dist: &Dist) -> Result<()> {
        let Some(p) = &self.profiler else { return Ok(()) };
        let traces = p.borrow_mut().stop()?;
        match traces.as_slice() {
            [] => dist.println(format!(
                "profile: no step was recorded (the run ended before the schedule's active steps: {:?})",
                p.borrow().schedule()
            )),
            [one] => dist.println(format!("profile: trace in {}", one.display())),
            many => dist.println(format!(
                "profile: {} traces in {}",
                many.len(),
                many[0].parent().map_or_else(String::new, |d| d.display().to_string())
            )),
        }
        Ok(())
    }
}
