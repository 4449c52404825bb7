//! Atomic, checksummed checkpoints (safetensors + JSON manifest) and exact resume.
//!
//! Filled by the checkpoint issue; nothing here yet.
