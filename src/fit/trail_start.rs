//! The weight trail's writer for a run (`FitConfig::weight_trail`): rank 0 only, its header
//! from the run's settings (see [`crate::trail`]).
use crate::dist::Dist;
use crate::fit::config::FitConfig;
use crate::trail::{program_checksum, TrailHeader, TrailRecorder};
use crate::Result;

/// The weight trail's writer on rank 0 when the run keeps one; a resumed run
/// (`resumed_steps`: its checkpoint's step) keeps the lines up to that step.
pub(crate) fn start_trail(
    dist: &Dist,
    cfg: &FitConfig,
    resumed_steps: Option<u64>,
    (train_samples, batch_size): (usize, usize),
) -> Result<Option<TrailRecorder>> {
    let Some(every) = cfg.weight_trail.filter(|_| dist.is_main()) else { return Ok(None) };
    let (program, program_crc32) = program_checksum();
    let header = TrailHeader {
        every,
        trainbook: env!("CARGO_PKG_VERSION").to_string(),
        program,
        program_crc32,
        world_size: dist.world_size(),
        seed: cfg.seed,
        config: cfg.config.clone(),
        train_samples,
        batch_size,
    };
    TrailRecorder::start(&cfg.out, header, resumed_steps).map(Some)
}
