//! Raw declarations of the C API in `csrc/torch_file_shim.h`: torch.save files written through
//! libtorch's pickler, from opaque IValue handles. The safe side is `crate::torch_file`.
use std::os::raw::{c_char, c_int, c_void};

/// An opaque value of a torch file (`tb_ivalue`, a c10::IValue).
#[repr(C)]
pub(crate) struct TbIValue {
    _private: [u8; 0],
}

extern "C" {
    pub(crate) fn tb_torch_file_bytes(
        value: *const TbIValue,
        data: *mut *mut u8,
        len: *mut usize,
    ) -> *mut c_char;

    pub(crate) fn tb_ivalue_free(v: *mut TbIValue);

    pub(crate) fn tb_ivalue_new_none() -> *mut TbIValue;
    pub(crate) fn tb_ivalue_new_bool(b: c_int) -> *mut TbIValue;
    pub(crate) fn tb_ivalue_new_int(i: i64) -> *mut TbIValue;
    pub(crate) fn tb_ivalue_new_double(d: f64) -> *mut TbIValue;
    pub(crate) fn tb_ivalue_new_string(data: *const c_char, len: usize) -> *mut TbIValue;
    pub(crate) fn tb_ivalue_new_tensor(t: *const c_void) -> *mut TbIValue;
    pub(crate) fn tb_ivalue_new_list() -> *mut TbIValue;
    pub(crate) fn tb_ivalue_new_dict() -> *mut TbIValue;
    pub(crate) fn tb_ivalue_new_tuple(items: *const *const TbIValue, n: usize) -> *mut TbIValue;
    pub(crate) fn tb_ivalue_list_push(list: *mut TbIValue, item: *const TbIValue) -> *mut c_char;
    pub(crate) fn tb_ivalue_dict_insert(
        dict: *mut TbIValue,
        key: *const TbIValue,
        value: *const TbIValue,
    ) -> *mut c_char;
}
