// ddp_shim.cpp: c10d::Reducer, the engine of torch's DistributedDataParallel, behind the C API
// of c10d_shim.h. The Reducer registers autograd hooks on the parameters' gradient
// accumulators: as soon as every gradient of a bucket is ready during backward, the bucket's
// all-reduce starts, overlapping communication with the rest of the backward pass; when the
// backward pass ends, the averaged gradients are in the parameters' `.grad`.
#include "shim_internal.hpp"

#include <torch/csrc/distributed/c10d/comm.hpp>
#include <torch/csrc/distributed/c10d/default_comm_hooks.hpp>
#include <torch/csrc/distributed/c10d/logger.hpp>
#include <torch/csrc/distributed/c10d/reducer.hpp>

#include <algorithm>
#include <limits>
#include <memory>
#include <unordered_map>

using tb::guarded;
using tb::null_arg;

struct tb_reducer {
  std::shared_ptr<c10d::Reducer> reducer;
  std::vector<at::Tensor> params;
  // The Reducer reports to a Logger it holds only weakly (and dereferences it, e.g. when it
  // searches for unused parameters), as torch DDP's constructor sets up. Declared last so that
  // it is destroyed before the Reducer, as its destructor expects.
  std::shared_ptr<c10d::Logger> logger;
};

namespace {

// Gradient compression to bfloat16, the counterpart of torch's Python `bf16_compress_hook`
// (libtorch has only the fp16 one built in): each bucket is cast to bf16 and pre-divided by
// the world size, summed over the ranks, then written back into the float bucket.
class Bf16CompressHook : public c10d::CppCommHookInterface<c10::intrusive_ptr<c10d::ProcessGroup>> {
 public:
  explicit Bf16CompressHook(const c10::intrusive_ptr<c10d::ProcessGroup>& group)
      : CppCommHookInterface(group) {}

  c10::intrusive_ptr<c10::ivalue::Future> runHook(c10d::GradBucket& bucket) override {
    auto buffer = bucket.getBufferRef();
    auto compressed = buffer.to(at::kBFloat16).div_(state_->getSize());
    std::vector<at::Tensor> tensors{compressed};
    auto summed = state_->allreduce(tensors)->getFuture();
    return summed->then(
        [buffer](c10::ivalue::Future& done) {
          auto reduced = done.value().toTensorVector().at(0);
          buffer.copy_(reduced);
          return c10::IValue(buffer);
        },
        summed->elementType());
  }
};

}  // namespace

extern "C" {

char* tb_reducer_new(tb_pg* pg, const tb_tensor* const* params, const char* const* names, size_t n,
                     int64_t bucket_bytes, int64_t first_bucket_bytes, int find_unused,
                     int gradient_as_bucket_view, int static_graph, int comm_hook,
                     tb_reducer** out) {
  if (pg == nullptr || params == nullptr || names == nullptr || out == nullptr)
    return null_arg("pg/params/names/out");
  return guarded([&] {
    auto list = tb::tensor_list(params, n);
    std::unordered_map<size_t, std::string> param_names;
    for (size_t i = 0; i < n; ++i) param_names[i] = names[i] == nullptr ? "" : names[i];
    // torch DDP's initial assignment: one bucket for everything unless unused parameters are
    // searched for (then first_bucket_bytes, then bucket_bytes), computed in model order and
    // reversed (gradients appear roughly in reverse order). After the first iteration the
    // Reducer rebuilds the buckets in the order the gradients actually became ready.
    std::vector<size_t> limits;
    if (static_graph != 0 || find_unused == 0) {
      limits.push_back(std::numeric_limits<size_t>::max());
    } else if (first_bucket_bytes < bucket_bytes) {
      limits = {static_cast<size_t>(first_bucket_bytes), static_cast<size_t>(bucket_bytes)};
    } else {
      limits.push_back(static_cast<size_t>(bucket_bytes));
    }
    auto [buckets, bucket_limits] =
        c10d::compute_bucket_assignment_by_size(list, limits, std::vector<bool>(n, false));
    std::reverse(buckets.begin(), buckets.end());
    auto reducer = std::make_shared<c10d::Reducer>(
        list, buckets, pg->group, std::vector<bool>(n, false), bucket_bytes, find_unused != 0,
        gradient_as_bucket_view != 0, param_names, first_bucket_bytes,
        /*skip_all_reduce_unused_params=*/false, /*use_python_reducer=*/false,
        /*bucket_bytes_cap_list=*/std::vector<int64_t>{});
    if (static_graph != 0) reducer->set_static_graph();
    if (comm_hook == TB_HOOK_FP16) {
      reducer->register_builtin_comm_hook(c10d::BuiltinCommHookType::FP16_COMPRESS);
    } else if (comm_hook == TB_HOOK_BF16) {
      reducer->register_comm_hook(std::make_unique<Bf16CompressHook>(pg->group));
    } else if (comm_hook != TB_HOOK_ALLREDUCE) {
      throw std::invalid_argument("unknown communication hook id " + std::to_string(comm_hook));
    }
    auto logger = std::make_shared<c10d::Logger>(reducer);
    reducer->set_logger(logger);
    // Only logging data (TORCH_DISTRIBUTED_DEBUG); no device ids on the CPU, like torch DDP.
    logger->set_construction_data_and_log("trainbook::dist::Ddp", {}, -1, true, false,
                                          static_graph != 0);
    *out = new tb_reducer{reducer, list, logger};
  });
}

char* tb_reducer_prepare_for_forward(tb_reducer* r, int prepare, int* rebuilt) {
  if (r == nullptr) return null_arg("reducer");
  return guarded([&] {
    if (prepare != 0) r->reducer->prepare_for_forward();
    bool did = r->reducer->rebuild_buckets();
    if (rebuilt != nullptr) *rebuilt = did ? 1 : 0;
  });
}

char* tb_reducer_prepare_for_backward(tb_reducer* r, const tb_tensor* const* outputs, size_t n) {
  if (r == nullptr || (outputs == nullptr && n > 0)) return null_arg("reducer/outputs");
  return guarded([&] { r->reducer->prepare_for_backward(tb::tensor_list(outputs, n)); });
}

char* tb_reducer_delay_all_reduce(tb_reducer* r) {
  if (r == nullptr) return null_arg("reducer");
  return guarded([&] { r->reducer->delay_all_reduce(); });
}

char* tb_reducer_buckets(tb_reducer* r, int64_t* indices, size_t cap, int64_t* counts,
                         size_t counts_cap, size_t* buckets) {
  if (r == nullptr || indices == nullptr || counts == nullptr || buckets == nullptr)
    return null_arg("reducer/indices/counts/buckets");
  return guarded([&] {
    std::unordered_map<const void*, int64_t> index_of;
    for (size_t i = 0; i < r->params.size(); ++i)
      index_of[r->params[i].unsafeGetTensorImpl()] = static_cast<int64_t>(i);
    auto grad_buckets = r->reducer->get_grad_buckets(/*return_zero_tensors=*/false);
    if (grad_buckets.size() > counts_cap) throw std::length_error("too many buckets for the buffer");
    size_t written = 0;
    for (size_t b = 0; b < grad_buckets.size(); ++b) {
      const auto& members = grad_buckets[b].getParameters();
      counts[b] = static_cast<int64_t>(members.size());
      for (const auto& p : members) {
        if (written >= cap) throw std::length_error("too many parameters for the buffer");
        auto found = index_of.find(p.unsafeGetTensorImpl());
        indices[written++] = found == index_of.end() ? -1 : found->second;
      }
    }
    *buckets = grad_buckets.size();
  });
}

void tb_reducer_free(tb_reducer* r) {
  if (r == nullptr) return;
  try {
    delete r;  // ~Reducer is noexcept(false): it may throw while removing its hooks
  } catch (...) {
  }
}

}  // extern "C"
