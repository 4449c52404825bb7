// shim_internal.hpp: what the shim's translation units share (handle structs, the guard that
// turns C++ exceptions into error strings). Not part of the C API.
#pragma once
#include "c10d_shim.h"

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

struct tb_store {
  c10::intrusive_ptr<c10d::Store> store;
};
// The backend (Gloo or NCCL) for trainbook's own collectives, and the ProcessGroup front end
// that holds it, which c10d's DDP machinery (Reducer, broadcast_coalesced) expects.
struct tb_pg {
  c10::intrusive_ptr<c10d::Backend> backend;
  c10::intrusive_ptr<c10d::ProcessGroup> group;
  // The CUDA device the group is bound to (init_process_group's device_id), or -1.
  int cuda_device = -1;
};
struct tb_work {
  c10::intrusive_ptr<c10d::Work> work;
};

namespace tb {

inline char* dup_message(const std::string& msg) {
  char* out = static_cast<char*>(std::malloc(msg.size() + 1));
  if (out != nullptr) std::memcpy(out, msg.c_str(), msg.size() + 1);
  return out;
}

// Runs `body`, turning any C++ exception into an error string (never lets one escape to Rust).
template <class F>
char* guarded(F&& body) {
  try {
    body();
    return nullptr;
  } catch (const c10::Error& e) {
    return dup_message(e.what_without_backtrace());
  } catch (const std::exception& e) {
    return dup_message(e.what());
  } catch (...) {
    return dup_message("unknown C++ exception in c10d");
  }
}

inline const at::Tensor& tensor_ref(const tb_tensor* t) { return *static_cast<const at::Tensor*>(t); }

inline std::vector<at::Tensor> tensor_list(const tb_tensor* const* tensors, size_t n) {
  std::vector<at::Tensor> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (tensors[i] == nullptr) throw std::invalid_argument("null tensor in a list");
    out.push_back(tensor_ref(tensors[i]));
  }
  return out;
}

inline char* null_arg(const char* what) { return dup_message(std::string("null argument: ") + what); }

}  // namespace tb
