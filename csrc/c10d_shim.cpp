// c10d_shim.cpp: implementation of c10d_shim.h on top of PyTorch's c10d classes.
// Built by build.rs with -DUSE_C10D_GLOO (and -DUSE_C10D_NCCL under the `cuda` feature).
#include "shim_internal.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/distributed/c10d/comm.hpp>
#include <torch/csrc/distributed/c10d/reducer.hpp>
#include <torch/version.h>
#ifdef USE_C10D_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using tb::dup_message;
using tb::guarded;
using tb::null_arg;
using tb::tensor_ref;


extern "C" {

void tb_string_free(char* s) { std::free(s); }
void tb_bytes_free(uint8_t* b) { std::free(b); }

const char* tb_torch_version(void) { return TORCH_VERSION; }

int tb_has_nccl(void) {
#ifdef USE_C10D_NCCL
  return 1;
#else
  return 0;
#endif
}

namespace {

// The default generator of a device: the CPU one, or CUDA device `index`'s (through the CUDA
// hooks that libtorch_cuda registers when it is loaded; without them this throws).
at::Generator default_generator(int device_type, int index) {
  if (device_type == 0) return at::detail::getDefaultCPUGenerator();
  if (device_type == 1) {
    return at::globalContext().defaultGenerator(c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(index)));
  }
  throw std::invalid_argument("RNG device type must be 0 (CPU) or 1 (CUDA)");
}

}  // namespace

char* tb_rng_get_state(int device_type, int index, uint8_t** out, size_t* len) {
  if (out == nullptr || len == nullptr) return null_arg("out/len");
  return guarded([&] {
    auto gen = default_generator(device_type, index);
    at::Tensor state;
    {
      std::lock_guard<std::mutex> lock(gen.mutex());
      state = gen.get_state();
    }
    auto bytes = state.contiguous();
    size_t n = static_cast<size_t>(bytes.numel());
    auto* buf = static_cast<uint8_t*>(std::malloc(n == 0 ? 1 : n));
    if (buf == nullptr) throw std::bad_alloc();
    std::memcpy(buf, bytes.data_ptr(), n);
    *out = buf;
    *len = n;
  });
}

char* tb_rng_set_state(int device_type, int index, const uint8_t* state, size_t len) {
  if (state == nullptr) return null_arg("state");
  return guarded([&] {
    auto t = at::empty({static_cast<int64_t>(len)}, at::kByte);
    std::memcpy(t.data_ptr(), state, len);
    auto gen = default_generator(device_type, index);
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(t);
  });
}

char* tb_rng_manual_seed(int device_type, int index, uint64_t seed) {
  return guarded([&] {
    auto gen = default_generator(device_type, index);
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_current_seed(seed);
  });
}

char* tb_tcp_store_new(const char* host, uint16_t port, int is_server, int64_t num_workers,
                       int wait_workers, int64_t timeout_ms, tb_store** out) {
  if (host == nullptr || out == nullptr) return null_arg("host/out");
  return guarded([&] {
    c10d::TCPStoreOptions opts;
    opts.port = port;
    opts.isServer = is_server != 0;
    if (num_workers >= 0) opts.numWorkers = static_cast<size_t>(num_workers);
    opts.waitWorkers = wait_workers != 0;
    opts.timeout = std::chrono::milliseconds(timeout_ms);
    auto store = c10::make_intrusive<c10d::TCPStore>(std::string(host), opts);
    *out = new tb_store{store};
  });
}

char* tb_prefix_store_new(const char* prefix, const tb_store* base, tb_store** out) {
  if (prefix == nullptr || base == nullptr || out == nullptr) return null_arg("prefix/base/out");
  return guarded([&] {
    auto store = c10::make_intrusive<c10d::PrefixStore>(std::string(prefix), base->store);
    *out = new tb_store{store};
  });
}

char* tb_store_set(tb_store* s, const char* key, const uint8_t* value, size_t len) {
  if (s == nullptr || key == nullptr || (value == nullptr && len > 0)) return null_arg("store/key/value");
  return guarded([&] { s->store->set(std::string(key), std::vector<uint8_t>(value, value + len)); });
}

char* tb_store_get(tb_store* s, const char* key, uint8_t** value, size_t* len) {
  if (s == nullptr || key == nullptr || value == nullptr || len == nullptr) return null_arg("store/key/value/len");
  return guarded([&] {
    std::vector<uint8_t> bytes = s->store->get(std::string(key));
    auto* buf = static_cast<uint8_t*>(std::malloc(bytes.empty() ? 1 : bytes.size()));
    if (buf == nullptr) throw std::bad_alloc();
    if (!bytes.empty()) std::memcpy(buf, bytes.data(), bytes.size());
    *value = buf;
    *len = bytes.size();
  });
}

char* tb_store_add(tb_store* s, const char* key, int64_t delta, int64_t* out) {
  if (s == nullptr || key == nullptr || out == nullptr) return null_arg("store/key/out");
  return guarded([&] { *out = s->store->add(std::string(key), delta); });
}

void tb_store_free(tb_store* s) { delete s; }

char* tb_pg_new(const tb_store* store, int backend, int rank, int size, int64_t timeout_ms,
                int cuda_device, tb_pg** out) {
  if (store == nullptr || out == nullptr) return null_arg("store/out");
  return guarded([&] {
    auto timeout = std::chrono::milliseconds(timeout_ms);
    c10::intrusive_ptr<c10d::Backend> impl;
    c10::DeviceType device = c10::DeviceType::CPU;
    auto type = c10d::ProcessGroup::BackendType::GLOO;
    if (backend == TB_BACKEND_GLOO) {
      auto opts = c10d::ProcessGroupGloo::Options::create_default(timeout);
      impl = c10::make_intrusive<c10d::ProcessGroupGloo>(store->store, rank, size, opts);
    } else if (backend == TB_BACKEND_NCCL) {
#ifdef USE_C10D_NCCL
      auto opts = c10d::ProcessGroupNCCL::Options::create();
      opts->timeout = timeout;
      impl = c10::make_intrusive<c10d::ProcessGroupNCCL>(store->store, rank, size, opts);
      device = c10::DeviceType::CUDA;
      type = c10d::ProcessGroup::BackendType::NCCL;
#else
      throw std::runtime_error(
          "NCCL backend requested, but trainbook was built without the `cuda` feature");
#endif
    } else {
      throw std::invalid_argument("unknown backend id " + std::to_string(backend));
    }
    // What init_process_group does next: the group's sequence number (rank 0 draws it and
    // publishes it in the store, the others read it), then the ProcessGroup front end.
    impl->setSequenceNumberForGroup();
    auto group = c10::make_intrusive<c10d::ProcessGroup>(store->store, rank, size);
    std::optional<at::Device> bound;
    if (cuda_device >= 0) {
      // init_process_group(device_id=...): the group is bound before its backend is registered
      // (setBackend hands the bound device on to the backend) ...
      bound = at::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(cuda_device));
      group->setBoundDeviceId(bound);
    }
    group->setBackend(device, type, impl);
    if (type == c10d::ProcessGroup::BackendType::GLOO) {
      // init_process_group("gloo") registers Gloo for both devices it serves (its backend
      // capability is cpu and cuda): CUDA tensors go through the same Gloo backend, which
      // stages them through the host (2 ranks sharing one GPU, where NCCL refuses).
      group->setBackend(c10::DeviceType::CUDA, type, impl);
    }
    group->setDefaultBackend(type);
    // ... and NCCL then creates its communicator on that device at once.
    if (bound && type == c10d::ProcessGroup::BackendType::NCCL) {
      impl->eagerConnectSingleDevice(*bound);
    }
    *out = new tb_pg{impl, group, bound ? cuda_device : -1};
  });
}

void tb_pg_free(tb_pg* pg) { delete pg; }

char* tb_pg_allreduce_sum(tb_pg* pg, const tb_tensor* tensor, tb_work** out) {
  if (pg == nullptr || tensor == nullptr || out == nullptr) return null_arg("pg/tensor/out");
  return guarded([&] {
    std::vector<at::Tensor> tensors{tensor_ref(tensor)};
    c10d::AllreduceOptions opts;
    opts.reduceOp = c10d::ReduceOp::SUM;
    *out = new tb_work{pg->backend->allreduce(tensors, opts)};
  });
}

char* tb_pg_broadcast(tb_pg* pg, const tb_tensor* tensor, int root, tb_work** out) {
  if (pg == nullptr || tensor == nullptr || out == nullptr) return null_arg("pg/tensor/out");
  return guarded([&] {
    std::vector<at::Tensor> tensors{tensor_ref(tensor)};
    c10d::BroadcastOptions opts;
    opts.rootRank = root;
    opts.rootTensor = 0;
    *out = new tb_work{pg->backend->broadcast(tensors, opts)};
  });
}

char* tb_pg_all_gather(tb_pg* pg, const tb_tensor* input, const tb_tensor* const* outputs, size_t n,
                       tb_work** out) {
  if (pg == nullptr || input == nullptr || outputs == nullptr || out == nullptr)
    return null_arg("pg/input/outputs/out");
  return guarded([&] {
    std::vector<at::Tensor> inputs{tensor_ref(input)};
    std::vector<std::vector<at::Tensor>> gathered(1);
    gathered[0].reserve(n);
    for (size_t i = 0; i < n; ++i) {
      if (outputs[i] == nullptr) throw std::invalid_argument("null output tensor");
      gathered[0].push_back(tensor_ref(outputs[i]));
    }
    *out = new tb_work{pg->backend->allgather(gathered, inputs, c10d::AllgatherOptions())};
  });
}

char* tb_pg_barrier(tb_pg* pg, tb_work** out) {
  if (pg == nullptr || out == nullptr) return null_arg("pg/out");
  return guarded([&] {
    c10d::BarrierOptions opts;
    if (pg->cuda_device >= 0) {
      opts.device_ids = {pg->cuda_device};
      opts.device = at::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(pg->cuda_device));
    }
    *out = new tb_work{pg->backend->barrier(opts)};
  });
}

char* tb_pg_broadcast_coalesced(tb_pg* pg, const tb_tensor* const* tensors, size_t n,
                                int64_t buffer_bytes, int root) {
  if (pg == nullptr || (tensors == nullptr && n > 0)) return null_arg("pg/tensors");
  return guarded([&] {
    auto list = tb::tensor_list(tensors, n);
    if (list.empty()) return;
    c10d::broadcast_coalesced(pg->group, list, static_cast<size_t>(buffer_bytes), root);
  });
}

char* tb_pg_verify_params(tb_pg* pg, const tb_tensor* const* params, size_t n) {
  if (pg == nullptr || (params == nullptr && n > 0)) return null_arg("pg/params");
  return guarded([&] { c10d::verify_params_across_processes(pg->group, tb::tensor_list(params, n), std::nullopt); });
}

char* tb_work_wait(tb_work* w, int64_t timeout_ms) {
  if (w == nullptr) return null_arg("work");
  return guarded([&] {
    if (timeout_ms > 0) {
      w->work->wait(std::chrono::milliseconds(timeout_ms));
    } else {
      w->work->wait();
    }
  });
}

void tb_work_free(tb_work* w) { delete w; }

}  // extern "C"
