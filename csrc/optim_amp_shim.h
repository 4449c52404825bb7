// optim_amp_shim.h: libtorch's multi-tensor optimizer and mixed-precision kernels behind a C API
// for trainbook's Rust side (src/train/kernels.rs mirrors these declarations). tch-rs does not
// bind them: they take lists of tensors that they update in place and return nothing.
//
// Conventions are those of c10d_shim.h: NULL on success, else a malloc'ed error message that
// the caller frees with tb_string_free; tensors are the `at::Tensor*` of tch-rs.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "c10d_shim.h"

#ifdef __cplusplus
extern "C" {
#endif

// torch.optim.Adam / AdamW with fused=True: one `_fused_adam_` / `_fused_adamw_` call over all
// n parameters (same device and dtype). `steps` are float32 scalar tensors incremented here
// before the update, as torch.optim does. grad_scale and found_inf may be NULL (GradScaler
// passes them so that the kernel unscales and skips an inf/nan step itself).
char* tb_fused_adam(const tb_tensor* const* params, const tb_tensor* const* grads,
                    const tb_tensor* const* exp_avgs, const tb_tensor* const* exp_avg_sqs,
                    const tb_tensor* const* steps, size_t n, double lr, double beta1, double beta2,
                    double weight_decay, double eps, int decoupled, const tb_tensor* grad_scale,
                    const tb_tensor* found_inf);

// torch.optim.SGD with foreach=True (`_multi_tensor_sgd`): `_foreach_*` kernels over all n
// parameters. `bufs[i]` is the momentum buffer of parameter i or NULL before its first step;
// a NULL entry receives a new tensor (an owned at::Tensor*, for tch's Tensor::from_ptr).
// `steps` (NULL, or n float32 scalars on the parameters' device) are incremented.
// `found_inf` (NULL, or GradScaler's float32 flag on that device) makes the step conditional
// without a read on the host: the new values are computed by the same kernels, then each
// parameter and buffer keeps its old value where the flag is 1 (`at::where`), and the step
// counts do not advance; every buffer must exist then (a skipped first step would create one).
char* tb_foreach_sgd(const tb_tensor* const* params, const tb_tensor* const* grads,
                     tb_tensor** bufs, const tb_tensor* const* steps, size_t n, double lr,
                     double momentum, double dampening, int nesterov, double weight_decay,
                     const tb_tensor* found_inf);

// Optimizer.zero_grad(set_to_none=True): each of the n parameters' .grad becomes None (an
// undefined tensor), so that the next backward pass hands every parameter its new gradient
// instead of adding it into zeros.
char* tb_set_grads_to_none(const tb_tensor* const* params, size_t n);

// GradScaler.unscale_: multiplies every gradient by inv_scale in place and sets found_inf to
// 1.0 if any of them holds an inf or nan (`_amp_foreach_non_finite_check_and_unscale_`).
char* tb_amp_unscale(const tb_tensor* const* grads, size_t n, const tb_tensor* found_inf,
                     const tb_tensor* inv_scale);

// torch.autocast(device_type, dtype, enabled) entered and left, as its context manager does:
// enter saves the device type's current state (*prev_enabled, *prev_dtype), sets the new one
// and increments the nesting count; exit decrements it, clears the cast cache when the
// outermost region ends, and restores the saved state. device_type: 0 = CPU, 1 = CUDA; dtype
// is an at::ScalarType code (5 = Half, 15 = BFloat16).
// torch.nn.utils.get_total_norm(tensors, ord) for tensors on one device and of one dtype:
// torch.linalg.vector_norm(torch.stack(torch._foreach_norm(tensors, ord)), ord), copied into
// `out` (a 0-dim tensor of that device and dtype).
char* tb_total_norm(const tb_tensor* const* tensors, size_t n, double ord, tb_tensor* out);

// torch's element-wise ops with their scalar arguments, which tch's wrappers leave out, into
// `out` (which may be `self`: the in-place form, e.g. p.add_(b, alpha=-lr)):
// out = self + alpha * other (at::add_out), self + value * t1 * t2 (at::addcmul_out),
// self + value * t1 / t2 (at::addcdiv_out).
char* tb_add_out(tb_tensor* out, const tb_tensor* self, const tb_tensor* other, double alpha);
char* tb_addcmul_out(tb_tensor* out, const tb_tensor* self, const tb_tensor* t1,
                     const tb_tensor* t2, double value);
char* tb_addcdiv_out(tb_tensor* out, const tb_tensor* self, const tb_tensor* t1,
                     const tb_tensor* t2, double value);

char* tb_autocast_enter(int device_type, int enabled, int dtype, int* prev_enabled,
                        int* prev_dtype);
char* tb_autocast_exit(int device_type, int prev_enabled, int prev_dtype);

#ifdef __cplusplus
}
#endif
