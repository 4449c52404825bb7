//! Mixed precision with torch.amp's semantics: [`Precision`] (float32, or autocast to bfloat16
//! or float16 on CPU and CUDA), the autocast regions it opens, and [`GradScaler`] for float16.
mod autocast;
mod grad_scaler;
mod precision;

pub use grad_scaler::{GradScaler, GradScalerConfig, GradScalerState};
pub use precision::Precision;
