//! Samples and batches as structs of one's own ([`TensorFields`]): a struct whose fields are
//! tensors, given by a data set as a sample's [`extra_inputs`](super::Dataset::extra_inputs)
//! (one tensor per field, in the fields' order) and read by a step of one's own as the batch's
//! struct ([`StepBatch::fields`](crate::train::StepBatch::fields)), each field stacked along a
//! new first dimension, as torch's `default_collate` collates each key of a dict or field of a
//! named tuple. [`tensor_fields!`](crate::tensor_fields) declares one.
use tch::Tensor;

use crate::{Error, Result};

/// A struct of named tensors that travels as a sample's extra inputs and comes back as the
/// batch's struct. Declare one with [`tensor_fields!`](crate::tensor_fields); a data set
/// returns `sample.into_tensors()` from
/// [`extra_inputs`](super::Dataset::extra_inputs), and a step of one's own reads
/// [`StepBatch::fields`](crate::train::StepBatch::fields).
pub trait TensorFields: Sized {
    /// The struct's name (for errors).
    const NAME: &'static str;
    /// The fields' names, in their order.
    const FIELDS: &'static [&'static str];
    /// The fields as tensors, in [`FIELDS`](Self::FIELDS)' order.
    fn into_tensors(self) -> Vec<Tensor>;
    /// The struct from its fields' tensors in [`FIELDS`](Self::FIELDS)' order: an
    /// [`Error::InvalidArgument`] naming the struct and its fields when there are not as many.
    fn from_tensors(tensors: Vec<Tensor>) -> Result<Self>;
}

/// The error for `got` tensors where `T` has its fields' count.
#[doc(hidden)]
pub fn wrong_field_count<T: TensorFields>(got: usize) -> Error {
    Error::InvalidArgument(format!(
        "{} has {} fields ({}), but the batch has {got} extra inputs",
        T::NAME,
        T::FIELDS.len(),
        T::FIELDS.join(", ")
    ))
}

/// Declares a struct whose fields are tensors, with [`TensorFields`] for it: a data set gives
/// one per sample as its extra inputs, and a step of one's own gets the batch's, each field
/// stacked (`[B, ...]`).
///
/// ```
/// use trainbook::data::TensorFields;
/// use trainbook::tch::{Kind, Tensor};
///
/// trainbook::tensor_fields! {
///     /// A second picture and how far it was taken from the first.
///     pub struct Pair { other: Tensor, distance: Tensor }
/// }
///
/// let sample = Pair { other: Tensor::zeros([3, 4, 4], (Kind::Float, trainbook::tch::Device::Cpu)),
///                     distance: Tensor::from(2.5f32) };
/// let tensors = sample.into_tensors(); // what Dataset::extra_inputs returns
/// assert_eq!(tensors.len(), 2);
/// let back = Pair::from_tensors(tensors)?;
/// assert_eq!(back.distance.double_value(&[]), 2.5);
/// assert_eq!(Pair::FIELDS, ["other", "distance"]);
/// let err = Pair::from_tensors(vec![Tensor::from(1.0f32)]).err().unwrap();
/// assert!(err.to_string().contains("Pair has 2 fields (other, distance), but the batch has 1"));
/// # Ok::<(), trainbook::Error>(())
/// ```
#[macro_export]
macro_rules! tensor_fields {
    ($(#[$meta:meta])* $vis:vis struct $name:ident { $($field:ident : Tensor),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug)]
        $vis struct $name {
            $(
                #[allow(missing_docs)]
                pub $field: $crate::tch::Tensor,
            )+
        }

        impl $crate::data::TensorFields for $name {
            const NAME: &'static str = stringify!($name);
            const FIELDS: &'static [&'static str] = &[$(stringify!($field)),+];
            fn into_tensors(self) -> Vec<$crate::tch::Tensor> {
                vec![$(self.$field),+]
            }
            fn from_tensors(tensors: Vec<$crate::tch::Tensor>) -> $crate::Result<Self> {
                let got = tensors.len();
                if got != <Self as $crate::data::TensorFields>::FIELDS.len() {
                    return Err($crate::data::tensor_fields::wrong_field_count::<Self>(got));
                }
                let mut at = tensors.into_iter();
                Ok($name { $($field: at.next().expect("counted above")),+ })
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::{Device, Kind};

    crate::tensor_fields! {
        /// Two fields for the tests.
        struct Two { left: Tensor, right: Tensor }
    }

    #[test]
    fn fields_go_out_and_come_back_in_their_order() {
        let (l, r) = (Tensor::ones([2, 3], (Kind::Float, Device::Cpu)), Tensor::from(7i64));
        let tensors = Two { left: l.shallow_clone(), right: r.shallow_clone() }.into_tensors();
        assert!(tensors[0].equal(&l) && tensors[1].equal(&r));
        let back = Two::from_tensors(tensors).unwrap();
        assert!(back.left.equal(&l) && back.right.equal(&r));
        let err = Two::from_tensors(Vec::new()).unwrap_err().to_string();
        assert_eq!(
            err,
            "invalid argument: Two has 2 fields (left, right), but the batch has 0 extra inputs"
        );
    }
}
