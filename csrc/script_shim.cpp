// script_shim.cpp: TorchScript modules (see script_shim.h).
#include "script_shim.h"

#include <torch/script.h>

#include "shim_internal.hpp"

struct tb_script {
  torch::jit::Module module;
};

extern "C" {

char* tb_script_load(const char* path, int device_type, int device_index, tb_script** out) {
  if (path == nullptr || out == nullptr) return tb::null_arg("path/out");
  return tb::guarded([&] {
    c10::Device device = device_type == 1
                             ? c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(device_index))
                             : c10::Device(c10::DeviceType::CPU);
    *out = new tb_script{torch::jit::load(std::string(path), device)};
  });
}

void tb_script_free(tb_script* m) { delete m; }

char* tb_script_named_tensors(const tb_script* m, int buffers, void* ctx,
                              void (*each)(void* ctx, const char* name, void* tensor)) {
  if (m == nullptr || each == nullptr) return tb::null_arg("module/callback");
  return tb::guarded([&] {
    if (buffers != 0) {
      for (const auto& item : m->module.named_buffers(/*recurse=*/true)) {
        each(ctx, item.name.c_str(), new at::Tensor(item.value));
      }
    } else {
      for (const auto& item : m->module.named_parameters(/*recurse=*/true)) {
        each(ctx, item.name.c_str(), new at::Tensor(item.value));
      }
    }
  });
}

char* tb_script_train(tb_script* m, int on) {
  if (m == nullptr) return tb::null_arg("module");
  return tb::guarded([&] { m->module.train(on != 0); });
}

char* tb_script_forward(tb_script* m, const tb_tensor* const* inputs, size_t n, void** out) {
  if (m == nullptr || out == nullptr || (inputs == nullptr && n > 0)) {
    return tb::null_arg("module/inputs/out");
  }
  return tb::guarded([&] {
    std::vector<c10::IValue> args;
    args.reserve(n);
    for (const auto& t : tb::tensor_list(inputs, n)) args.emplace_back(t);
    c10::IValue result = m->module.forward(args);
    if (!result.isTensor()) {
      throw std::invalid_argument("the module's forward returned a " + result.tagKind() +
                                  ", not a tensor");
    }
    *out = new at::Tensor(result.toTensor());
  });
}

char* tb_script_save(const tb_script* m, const char* path) {
  if (m == nullptr || path == nullptr) return tb::null_arg("module/path");
  return tb::guarded([&] { m->module.save(std::string(path)); });
}

}  // extern "C"
