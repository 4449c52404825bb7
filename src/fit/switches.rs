//! The process-wide switches a run sets for as long as it lasts and puts back after (torch's
//! are process-wide too): autograd's anomaly detection, cuDNN's benchmark and the float32
//! matmul precision, as [`FitConfig`] asks; and NVTX ranges (the thread's, for the run).
use crate::fit::config::FitConfig;
use crate::train::{
    determinism, emit_nvtx, float32_matmul_precision, set_cudnn_benchmark,
    set_float32_matmul_precision, AnomalyGuard, Float32MatmulPrecision, NvtxRanges,
};
use crate::Result;

/// The switches as they were before the run, put back on drop.
pub(crate) struct RunSwitches {
    _anomaly: Option<AnomalyGuard>,
    _nvtx: Option<NvtxRanges>,
    benchmark: Option<bool>,
    precision: Option<Float32MatmulPrecision>,
}

impl RunSwitches {
    /// Sets what `cfg` asks for; an error (cuDNN's benchmark in the deterministic mode, say)
    /// leaves every switch as it was.
    pub fn apply(cfg: &FitConfig) -> Result<RunSwitches> {
        let mut switches =
            RunSwitches { _anomaly: None, _nvtx: None, benchmark: None, precision: None };
        if cfg.cudnn_benchmark {
            let before = determinism()?.cudnn_benchmark;
            set_cudnn_benchmark(true)?;
            switches.benchmark = Some(before);
        }
        if let Some(p) = cfg.float32_matmul_precision {
            let before = float32_matmul_precision()?;
            set_float32_matmul_precision(p)?;
            switches.precision = Some(before);
        }
        switches._anomaly = cfg.detect_anomaly.then(AnomalyGuard::enable).transpose()?;
        switches._nvtx = cfg.emit_nvtx.then(emit_nvtx).transpose()?;
        Ok(switches)
    }
}

impl Drop for RunSwitches {
    fn drop(&mut self) {
        if let Some(on) = self.benchmark {
            let _ = set_cudnn_benchmark(on);
        }
        if let Some(p) = self.precision {
            let _ = set_float32_matmul_precision(p);
        }
    }
}
