//! A [`TorchValue`] tree built as the shim's IValue handles (csrc/torch_file_shim.cpp) and
//! pickled by libtorch into the bytes of `torch.save`.
use std::os::raw::c_void;

use super::TorchValue;
use crate::shim::torch_file::*;
use crate::shim::{check_kernel, take_bytes};
use crate::{Error, Result};

/// An owned IValue handle, freed on drop.
struct Handle(*mut TbIValue);

impl Drop for Handle {
    fn drop(&mut self) {
        // SAFETY: the handle came from the shim and is freed once.
        unsafe { tb_ivalue_free(self.0) }
    }
}

/// Builds the IValue of `value`.
fn build(value: &TorchValue) -> Result<Handle> {
    // SAFETY (every call below): constructors return owned handles; inserted values are copied.
    Ok(match value {
        TorchValue::None => Handle(unsafe { tb_ivalue_new_none() }),
        TorchValue::Bool(b) => Handle(unsafe { tb_ivalue_new_bool(*b as i32) }),
        TorchValue::Int(i) => Handle(unsafe { tb_ivalue_new_int(*i) }),
        TorchValue::Float(f) => Handle(unsafe { tb_ivalue_new_double(*f) }),
        TorchValue::Str(s) => {
            Handle(unsafe { tb_ivalue_new_string(s.as_ptr() as *const _, s.len()) })
        }
        TorchValue::Tensor(t) => {
            Handle(unsafe { tb_ivalue_new_tensor(t.as_ptr() as *const c_void) })
        }
        TorchValue::List(items) => {
            let list = Handle(unsafe { tb_ivalue_new_list() });
            for item in items {
                let item = build(item)?;
                check_kernel("torch_file", unsafe { tb_ivalue_list_push(list.0, item.0) })?;
            }
            list
        }
        TorchValue::Tuple(items) => {
            let handles = items.iter().map(build).collect::<Result<Vec<_>>>()?;
            let ptrs: Vec<*const TbIValue> = handles.iter().map(|h| h.0 as *const _).collect();
            Handle(unsafe { tb_ivalue_new_tuple(ptrs.as_ptr(), ptrs.len()) })
        }
        TorchValue::Object { class, .. } => {
            return Err(Error::InvalidArgument(format!(
                "torch.save: cannot write an object of class {class} (trainbook writes None, \
                 bool, int, float, str, tensors, lists, tuples and dicts)"
            )))
        }
        TorchValue::Dict(entries) => {
            let dict = Handle(unsafe { tb_ivalue_new_dict() });
            for (k, v) in entries {
                let (k, v) = (build(k)?, build(v)?);
                check_kernel("torch_file", unsafe { tb_ivalue_dict_insert(dict.0, k.0, v.0) })?;
            }
            dict
        }
    })
}

pub(super) fn to_bytes(value: &TorchValue) -> Result<Vec<u8>> {
    let h = build(value)?;
    let (mut data, mut len) = (std::ptr::null_mut(), 0usize);
    // SAFETY: a live handle; on success `data` holds `len` bytes malloc'ed by the shim.
    check_kernel("torch.save", unsafe { tb_torch_file_bytes(h.0, &mut data, &mut len) })?;
    Ok(unsafe { take_bytes(data, len) })
}
