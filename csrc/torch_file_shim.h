// torch_file_shim.h: writing files that Python's `torch.load` reads, through libtorch's own
// pickler (src/torch_file/ is the Rust side, which mirrors these declarations in
// src/shim/torch_file.rs; it reads such files itself, src/torch_file/read.rs). The value to
// save is built as an IValue tree (dicts, lists, tuples, tensors, numbers, strings, None) behind
// opaque `tb_ivalue` handles. Conventions as in c10d_shim.h (NULL on success, else a malloc'ed
// message).
#pragma once
#include "c10d_shim.h"

#ifdef __cplusplus
extern "C" {
#endif

// One value to save (a c10::IValue), owned by the handle.
typedef struct tb_ivalue tb_ivalue;

// The bytes of `torch.save(value)` (zip format; dicts and lists untagged, so that torch.load
// with weights_only=True reads them); *data is freed with tb_bytes_free.
char* tb_torch_file_bytes(const tb_ivalue* value, uint8_t** data, size_t* len);

void tb_ivalue_free(tb_ivalue* v);
tb_ivalue* tb_ivalue_new_none(void);
tb_ivalue* tb_ivalue_new_bool(int b);
tb_ivalue* tb_ivalue_new_int(int64_t i);
tb_ivalue* tb_ivalue_new_double(double d);
tb_ivalue* tb_ivalue_new_string(const char* data, size_t len);
// Shares the tensor's storage (no copy).
tb_ivalue* tb_ivalue_new_tensor(const tb_tensor* t);
tb_ivalue* tb_ivalue_new_list(void);
tb_ivalue* tb_ivalue_new_dict(void);
// Builds a tuple of the given values (copied; the handles stay the caller's).
tb_ivalue* tb_ivalue_new_tuple(const tb_ivalue* const* items, size_t n);
// Appends (list) or inserts (dict: a later equal key replaces the value) a copy of the value.
char* tb_ivalue_list_push(tb_ivalue* list, const tb_ivalue* item);
char* tb_ivalue_dict_insert(tb_ivalue* dict, const tb_ivalue* key, const tb_ivalue* value);

#ifdef __cplusplus
}
#endif
