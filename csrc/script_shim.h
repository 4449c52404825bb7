// script_shim.h: a C API over libtorch's TorchScript modules (torch::jit::Module: what
// torch.jit.load returns), for trainbook's ScriptModule (src/models/script.rs): load a module
// saved by torch.jit.script / torch.jit.trace (torch.jit.save), list its parameters and
// buffers by their dotted names (the tensors themselves, sharing storage, so that an optimizer
// updating them updates the module), switch training mode, run forward, save. Same error
// convention as c10d_shim.h (NULL on success, else a malloc'ed message freed with
// tb_string_free).
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "c10d_shim.h"

#ifdef __cplusplus
extern "C" {
#endif

// A loaded TorchScript module, owned by the handle.
typedef struct tb_script tb_script;

// torch.jit.load(path, map_location=device): device_type 0 = CPU, 1 = CUDA (device_index).
char* tb_script_load(const char* path, int device_type, int device_index, tb_script** out);
void tb_script_free(tb_script* m);
// Calls `each(ctx, name, tensor)` for every parameter (buffers = 0) or buffer (buffers = 1),
// recursively, in the module's order (named_parameters() / named_buffers()); `tensor` is a
// new at::Tensor* sharing the module's, owned by the callee.
char* tb_script_named_tensors(const tb_script* m, int buffers, void* ctx,
                              void (*each)(void* ctx, const char* name, void* tensor));
// module.train(on) (recursively).
char* tb_script_train(tb_script* m, int on);
// module.forward(*inputs); the result must be a tensor (*out, owned by the caller).
char* tb_script_forward(tb_script* m, const tb_tensor* const* inputs, size_t n, void** out);
// torch.jit.save(module, path).
char* tb_script_save(const tb_script* m, const char* path);

// torch.jit.trace of a model defined outside TorchScript: a module holding `n_named` named
// tensors (`names[i]` dotted, as "layer1.0.conv1.weight"; `is_param[i]` says parameter or
// buffer), its forward traced on `example` while `forward(ctx, input)` computes the model's
// output from those very tensors (returned as a new at::Tensor*, or NULL on failure); the
// module is saved to `path` (torch.jit.save). Uses of the named tensors become the module's
// attributes, not constants.
char* tb_script_trace_save(const char* const* names, const tb_tensor* const* tensors,
                           const int* is_param, size_t n_named, const tb_tensor* example,
                           void* ctx, void* (*forward)(void* ctx, const void* input),
                           const char* path);

#ifdef __cplusplus
}
#endif
