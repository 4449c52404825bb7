// sync_bn_shim.cpp: SyncBatchNorm's training-mode forward and backward (see sync_bn_shim.h).
//
// The statistics follow torch/nn/modules/_functions.py's SyncBatchNorm: the mean and biased
// variance of the whole group's batch normalise the input, the unbiased variance updates the
// running one, and backward all-reduces sum(dy) and sum(dy * (x - mean)) so that every rank's
// input gradient is that of BatchNorm over the concatenated batch. The weight and bias
// gradients stay local (DDP averages them like any other). Sums are accumulated in float64,
// and the count is a tensor on the device: no value is read on the host.
#include "sync_bn_shim.h"

#include "shim_internal.hpp"

#include <torch/csrc/autograd/custom_function.h>

struct tb_sync_group {
  c10::intrusive_ptr<c10d::Backend> backend;
};

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Sums `t` over the group, in place, waiting for the result.
void all_reduce(c10d::Backend& backend, at::Tensor& t) {
  std::vector<at::Tensor> tensors{t};
  c10d::AllreduceOptions opts;
  opts.reduceOp = c10d::ReduceOp::SUM;
  backend.allreduce(tensors, opts)->wait();
}

// Every dimension but the channels (1).
std::vector<int64_t> reduced_dims(const at::Tensor& x) {
  std::vector<int64_t> dims{0};
  for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  return dims;
}

// A [C] tensor shaped to broadcast against x ([1, C, 1, ...]).
at::Tensor per_channel(const at::Tensor& c, const at::Tensor& x) {
  std::vector<int64_t> shape(x.dim(), 1);
  shape[1] = x.size(1);
  return c.reshape(shape);
}

struct SyncBatchNormFn : public torch::autograd::Function<SyncBatchNormFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input, const at::Tensor& weight,
                            const at::Tensor& bias, at::Tensor running_mean,
                            at::Tensor running_var, double momentum, double eps,
                            int64_t group) {
    auto* g = reinterpret_cast<tb_sync_group*>(group);
    const auto dims = reduced_dims(input);
    const int64_t channels = input.size(1);
    const auto wide = input.to(at::kDouble);
    auto count = at::full({1}, static_cast<double>(input.numel() / channels),
                          input.options().dtype(at::kDouble));
    auto stats = at::cat({wide.sum(dims), (wide * wide).sum(dims), count});
    all_reduce(*g->backend, stats);
    const auto n = stats.narrow(0, 2 * channels, 1);
    const auto mean = stats.narrow(0, 0, channels) / n;
    const auto var = (stats.narrow(0, channels, channels) / n - mean * mean).clamp_min(0.0);
    if (running_mean.defined()) {
      at::NoGradGuard no_grad;
      running_mean.mul_(1.0 - momentum).add_(mean.to(running_mean.scalar_type()), momentum);
      running_var.mul_(1.0 - momentum)
          .add_((var * n / (n - 1.0)).to(running_var.scalar_type()), momentum);
    }
    const auto mean_x = mean.to(input.scalar_type());
    const auto invstd = (var + eps).rsqrt().to(input.scalar_type());
    auto out = (input - per_channel(mean_x, input)) * per_channel(invstd, input);
    if (weight.defined()) out = out * per_channel(weight, input) + per_channel(bias, input);
    ctx->save_for_backward({input, weight, mean_x, invstd, n});
    // The graph keeps its own reference to the backend: backward may run after the model has
    // let go of its group.
    ctx->saved_data["group"] = c10::IValue::make_capsule(g->backend);
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &input = saved[0], &weight = saved[1], &mean = saved[2], &invstd = saved[3],
               &n = saved[4];
    auto backend = c10::static_intrusive_pointer_cast<c10d::Backend>(
        ctx->saved_data["group"].toCapsule());
    const auto dy = grads[0].contiguous();
    const auto dims = reduced_dims(input);
    const int64_t channels = input.size(1);
    const auto xmu = input - per_channel(mean, input);
    const auto sum_dy = dy.sum(dims, false, at::kDouble);
    const auto sum_dy_xmu = (dy * xmu).sum(dims, false, at::kDouble);
    at::Tensor grad_weight, grad_bias;
    if (weight.defined()) {
      grad_weight = (sum_dy_xmu * invstd).to(weight.scalar_type());
      grad_bias = sum_dy.to(weight.scalar_type());
    }
    auto sums = at::cat({sum_dy, sum_dy_xmu});
    all_reduce(*backend, sums);
    const auto mean_dy = (sums.narrow(0, 0, channels) / n).to(input.scalar_type());
    const auto mean_dy_xmu = (sums.narrow(0, channels, channels) / n).to(input.scalar_type());
    auto scale = weight.defined() ? invstd * weight : invstd;
    auto grad_input = (dy - per_channel(mean_dy, input) -
                       xmu * per_channel(invstd * invstd * mean_dy_xmu, input)) *
                      per_channel(scale, input);
    return {grad_input, grad_weight, grad_bias, at::Tensor(), at::Tensor(),
            at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

at::Tensor optional_tensor(const tb_tensor* t) { return t == nullptr ? at::Tensor() : tb::tensor_ref(t); }

}  // namespace

extern "C" {

char* tb_sync_group_new(tb_pg* pg, tb_sync_group** out) {
  if (pg == nullptr || out == nullptr) return tb::null_arg("pg/out");
  return tb::guarded([&] { *out = new tb_sync_group{pg->backend}; });
}

void tb_sync_group_free(tb_sync_group* g) { delete g; }

char* tb_sync_batch_norm(tb_sync_group* g, const tb_tensor* input, const tb_tensor* weight,
                         const tb_tensor* bias, const tb_tensor* running_mean,
                         const tb_tensor* running_var, double momentum, double eps,
                         tb_tensor** out) {
  if (g == nullptr || input == nullptr || out == nullptr) return tb::null_arg("group/input/out");
  return tb::guarded([&] {
    const auto& x = tb::tensor_ref(input);
    if (x.dim() < 2) throw std::invalid_argument("SyncBatchNorm expects [N, C, ...] input");
    auto w = optional_tensor(weight), b = optional_tensor(bias);
    if (w.defined() != b.defined()) throw std::invalid_argument("weight and bias: both or neither");
    auto result = SyncBatchNormFn::apply(x, w, b, optional_tensor(running_mean),
                                         optional_tensor(running_var), momentum, eps,
                                         reinterpret_cast<int64_t>(g));
    *out = new at::Tensor(std::move(result));
  });
}

}  // extern "C"
