// optim_amp_shim.cpp: the kernels behind optim_amp_shim.h. Each function only forwards to the
// ATen op that torch.optim / torch.amp call, so the numerics are libtorch's own.
#include "optim_amp_shim.h"

#include <ATen/autocast_mode.h>

#include "shim_internal.hpp"

using tb::guarded;
using tb::null_arg;
using tb::tensor_list;
using tb::tensor_ref;

namespace {

std::optional<at::Tensor> optional_tensor(const tb_tensor* t) {
  if (t == nullptr) return std::nullopt;
  return tensor_ref(t);
}

at::DeviceType device_type(int code) {
  switch (code) {
    case 0:
      return at::kCPU;
    case 1:
      return at::kCUDA;
    default:
      throw std::invalid_argument("autocast device type must be 0 (CPU) or 1 (CUDA), got " +
                                  std::to_string(code));
  }
}

}  // namespace

extern "C" {

char* tb_fused_adam(const tb_tensor* const* params, const tb_tensor* const* grads,
                    const tb_tensor* const* exp_avgs, const tb_tensor* const* exp_avg_sqs,
                    const tb_tensor* const* steps, size_t n, double lr, double beta1, double beta2,
                    double weight_decay, double eps, int decoupled, const tb_tensor* grad_scale,
                    const tb_tensor* found_inf) {
  if (n == 0) return nullptr;
  if (!params || !grads || !exp_avgs || !exp_avg_sqs || !steps) return null_arg("fused adam lists");
  return guarded([&] {
    auto p = tensor_list(params, n), g = tensor_list(grads, n), m = tensor_list(exp_avgs, n);
    auto v = tensor_list(exp_avg_sqs, n), s = tensor_list(steps, n);
    at::_foreach_add_(s, 1);
    std::vector<at::Tensor> no_max;  // amsgrad = False
    auto scale = optional_tensor(grad_scale), inf = optional_tensor(found_inf);
    if (decoupled) {
      at::_fused_adamw_(p, g, m, v, no_max, s, lr, beta1, beta2, weight_decay, eps, false, false,
                        scale, inf);
    } else {
      at::_fused_adam_(p, g, m, v, no_max, s, lr, beta1, beta2, weight_decay, eps, false, false,
                       scale, inf);
    }
    // A skipped step (found_inf = 1) does not count, as in torch.optim's fused path.
    if (inf.has_value()) at::_foreach_sub_(s, std::vector<at::Tensor>(s.size(), *inf));
  });
}

char* tb_set_grads_to_none(const tb_tensor* const* params, size_t n) {
  if (n == 0) return nullptr;
  if (!params) return null_arg("params");
  return guarded([&] {
    for (auto& p : tensor_list(params, n)) p.mutable_grad().reset();
  });
}

char* tb_foreach_sgd(const tb_tensor* const* params, const tb_tensor* const* grads,
                     tb_tensor** bufs, const tb_tensor* const* steps, size_t n, double lr,
                     double momentum, double dampening, int nesterov, double weight_decay,
                     const tb_tensor* found_inf) {
  if (n == 0) return nullptr;
  if (!params || !grads || (momentum != 0.0 && !bufs)) return null_arg("foreach sgd lists");
  return guarded([&] {
    auto p = tensor_list(params, n);
    auto inf = optional_tensor(found_inf);
    // The step is skipped where GradScaler's flag is set (a bool scalar on the device).
    std::optional<at::Tensor> skip;
    if (inf.has_value()) skip = inf->ne(0);
    std::vector<at::Tensor> d_p = tensor_list(grads, n);
    if (weight_decay != 0.0) d_p = at::_foreach_add(d_p, p, weight_decay);
    if (momentum != 0.0) {
      bool all_have_buffers = true;
      for (size_t i = 0; i < n; ++i) all_have_buffers = all_have_buffers && bufs[i] != nullptr;
      if (skip.has_value() && !all_have_buffers) {
        throw std::invalid_argument("a conditional SGD step needs every momentum buffer");
      }
      std::vector<at::Tensor> b;
      if (all_have_buffers) {
        b = tensor_list(const_cast<const tb_tensor* const*>(bufs), n);
        if (skip.has_value()) {
          // The same two kernels out of place, then the old buffer where the step is skipped.
          auto updated = at::_foreach_mul(b, momentum);
          at::_foreach_add_(updated, d_p, 1.0 - dampening);
          for (size_t i = 0; i < n; ++i) at::where_out(b[i], *skip, b[i], updated[i]);
        } else {
          at::_foreach_mul_(b, momentum);
          at::_foreach_add_(b, d_p, 1.0 - dampening);
        }
      } else {
        // First step of some parameters: their buffer starts as a copy of d_p (no dampening).
        for (size_t i = 0; i < n; ++i) {
          if (bufs[i] == nullptr) {
            b.push_back(d_p[i].detach().clone());
          } else {
            at::Tensor buf = tensor_ref(bufs[i]);
            buf.mul_(momentum).add_(d_p[i], 1.0 - dampening);
            b.push_back(buf);
          }
        }
      }
      // Out of place, so that the parameters' .grad are left as backward wrote them.
      d_p = nesterov ? at::_foreach_add(d_p, b, momentum) : b;
      for (size_t i = 0; i < n; ++i) {
        if (bufs[i] == nullptr) bufs[i] = new at::Tensor(b[i]);
      }
    }
    if (skip.has_value()) {
      auto updated = at::_foreach_add(p, d_p, -lr);
      for (size_t i = 0; i < n; ++i) at::where_out(p[i], *skip, p[i], updated[i]);
    } else {
      at::_foreach_add_(p, d_p, -lr);
    }
    if (steps != nullptr) {
      auto s = tensor_list(steps, n);
      at::_foreach_add_(s, 1);
      // A skipped step does not count, as in the fused path.
      if (inf.has_value()) at::_foreach_sub_(s, std::vector<at::Tensor>(s.size(), *inf));
    }
  });
}

char* tb_amp_unscale(const tb_tensor* const* grads, size_t n, const tb_tensor* found_inf,
                     const tb_tensor* inv_scale) {
  if (!found_inf || !inv_scale) return null_arg("found_inf / inv_scale");
  if (n == 0) return nullptr;
  if (!grads) return null_arg("gradients");
  return guarded([&] {
    at::Tensor inf = tensor_ref(found_inf);
    at::_amp_foreach_non_finite_check_and_unscale_(tensor_list(grads, n), inf,
                                                   tensor_ref(inv_scale));
  });
}

char* tb_total_norm(const tb_tensor* const* tensors, size_t n, double ord, tb_tensor* out) {
  if (!tensors || !out) return null_arg("total norm lists");
  return guarded([&] {
    auto norms = at::_foreach_norm(tensor_list(tensors, n), ord);
    static_cast<at::Tensor*>(out)->copy_(at::linalg_vector_norm(at::stack(norms), ord));
  });
}

char* tb_add_out(tb_tensor* out, const tb_tensor* self, const tb_tensor* other, double alpha) {
  if (!out || !self || !other) return null_arg("add tensors");
  return guarded([&] {
    at::Tensor& o = *static_cast<at::Tensor*>(out);
    at::add_out(o, tensor_ref(self), tensor_ref(other), alpha);
  });
}

char* tb_addcmul_out(tb_tensor* out, const tb_tensor* self, const tb_tensor* t1,
                     const tb_tensor* t2, double value) {
  if (!out || !self || !t1 || !t2) return null_arg("addcmul tensors");
  return guarded([&] {
    at::Tensor& o = *static_cast<at::Tensor*>(out);
    at::addcmul_out(o, tensor_ref(self), tensor_ref(t1), tensor_ref(t2), value);
  });
}

char* tb_addcdiv_out(tb_tensor* out, const tb_tensor* self, const tb_tensor* t1,
                     const tb_tensor* t2, double value) {
  if (!out || !self || !t1 || !t2) return null_arg("addcdiv tensors");
  return guarded([&] {
    at::Tensor& o = *static_cast<at::Tensor*>(out);
    at::addcdiv_out(o, tensor_ref(self), tensor_ref(t1), tensor_ref(t2), value);
  });
}

char* tb_autocast_enter(int device_type_code, int enabled, int dtype, int* prev_enabled,
                        int* prev_dtype) {
  if (!prev_enabled || !prev_dtype) return null_arg("output pointers");
  return guarded([&] {
    auto device = device_type(device_type_code);
    auto kind = static_cast<at::ScalarType>(dtype);
    if (kind != at::kHalf && kind != at::kBFloat16) {
      throw std::invalid_argument("autocast dtype must be float16 or bfloat16");
    }
    *prev_enabled = at::autocast::is_autocast_enabled(device) ? 1 : 0;
    *prev_dtype = static_cast<int>(at::autocast::get_autocast_dtype(device));
    at::autocast::set_autocast_enabled(device, enabled != 0);
    at::autocast::set_autocast_dtype(device, kind);
    at::autocast::increment_nesting();
  });
}

char* tb_autocast_exit(int device_type_code, int prev_enabled, int prev_dtype) {
  return guarded([&] {
    auto device = device_type(device_type_code);
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    at::autocast::set_autocast_enabled(device, prev_enabled != 0);
    at::autocast::set_autocast_dtype(device, static_cast<at::ScalarType>(prev_dtype));
  });
}

}  // extern "C"
