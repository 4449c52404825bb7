//! A batch's extra inputs ([`Dataset::extra_inputs`](crate::data::Dataset::extra_inputs)):
//! each sample's tensors kept as they arrive, then checked and stacked along a new first
//! dimension, one batch tensor per input, as torch's `default_collate` stacks the elements of
//! sample tuples.
use tch::Tensor;

use crate::{Error, Result};

/// The extra inputs of a batch under construction, by sample.
pub(crate) struct ExtraInputs {
    samples: Vec<Vec<Tensor>>,
}

impl ExtraInputs {
    /// Room for `len` samples' inputs.
    pub(crate) fn new(len: usize) -> ExtraInputs {
        ExtraInputs { samples: (0..len).map(|_| Vec::new()).collect() }
    }

    /// Sample `k`'s inputs.
    pub(crate) fn set(&mut self, k: usize, inputs: Vec<Tensor>) {
        self.samples[k] = inputs;
    }

    /// The batch's inputs: for each of the samples' inputs, their stack `[B, ...]`. Every
    /// sample must give as many inputs as the first, each of the first's shape and kind; else
    /// an error naming the sample (`indices` are the batch's data set indices).
    pub(crate) fn stack(self, indices: &[usize]) -> Result<Vec<Tensor>> {
        let Some(first) = self.samples.first() else {
            return Ok(Vec::new());
        };
        let describe = |t: &Tensor| format!("{:?} {:?}", t.size(), t.kind());
        for (inputs, &index) in self.samples.iter().zip(indices) {
            if inputs.len() != first.len() {
                return Err(Error::Dataset(format!(
                    "sample {index} has {} extra inputs, but the batch's first sample (sample \
                     {}) has {}: every sample needs the same extra inputs",
                    inputs.len(),
                    indices[0],
                    first.len()
                )));
            }
            for (j, (t, f)) in inputs.iter().zip(first).enumerate() {
                if t.size() != f.size() || t.kind() != f.kind() {
                    return Err(Error::Dataset(format!(
                        "extra input {j} of sample {index} is {}, but the batch's first sample's \
                         is {}: each extra input needs one shape and kind in every sample",
                        describe(t),
                        describe(f)
                    )));
                }
                if t.device() != tch::Device::Cpu {
                    return Err(Error::Dataset(format!(
                        "extra input {j} of sample {index} is on {:?}: a data set gives CPU \
                         tensors (the loader moves the batch to the device)",
                        t.device()
                    )));
                }
            }
        }
        Ok((0..first.len())
            .map(|j| {
                let column: Vec<&Tensor> = self.samples.iter().map(|s| &s[j]).collect();
                Tensor::stack(&column, 0)
            })
            .collect())
    }
}
