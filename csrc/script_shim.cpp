// script_shim.cpp: TorchScript modules (see script_shim.h).
#include "script_shim.h"

#include <torch/csrc/jit/frontend/tracer.h>
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

char* tb_script_trace_save(const char* const* names, const tb_tensor* const* tensors,
                           const int* is_param, size_t n_named, const tb_tensor* example,
                           void* ctx, void* (*forward)(void* ctx, const void* input),
                           const char* path) {
  if ((n_named > 0 && (names == nullptr || tensors == nullptr || is_param == nullptr)) ||
      example == nullptr || forward == nullptr || path == nullptr) {
    return tb::null_arg("names/tensors/example/forward/path");
  }
  return tb::guarded([&] {
    torch::jit::Module root("__torch__.trainbook.Model");
    for (size_t i = 0; i < n_named; ++i) {
      // The dotted name's parents become submodules, made on first use.
      std::string name(names[i]);
      std::vector<torch::jit::Module> chain{root};
      size_t start = 0;
      for (size_t dot = name.find('.'); dot != std::string::npos; dot = name.find('.', start)) {
        std::string part = name.substr(start, dot - start);
        torch::jit::Module parent = chain.back();
        if (!parent.hasattr(part)) {
          torch::jit::Module sub("__torch__.trainbook.Model_" + std::to_string(i) + "_" +
                                 std::to_string(chain.size()));
          parent.register_module(part, sub);
        }
        chain.push_back(parent.attr(part).toModule());
        start = dot + 1;
      }
      const at::Tensor& t = tb::tensor_ref(tensors[i]);
      std::string leaf = name.substr(start);
      if (is_param[i] != 0) {
        chain.back().register_parameter(leaf, t, /*is_buffer=*/false);
      } else {
        chain.back().register_buffer(leaf, t);
      }
    }
    root.eval();
    torch::jit::Stack inputs{c10::IValue(tb::tensor_ref(example))};
    std::string failure;
    auto traced_fn = [&](torch::jit::Stack in) -> torch::jit::Stack {
      const at::Tensor x = in.at(0).toTensor();
      void* out = forward(ctx, &x);
      if (out == nullptr) throw std::runtime_error("the model's forward failed while tracing");
      at::Tensor y = *static_cast<at::Tensor*>(out);
      delete static_cast<at::Tensor*>(out);
      return {c10::IValue(y)};
    };
    auto lookup = [](const at::Tensor&) { return std::string(); };
    auto traced = torch::jit::tracer::trace(std::move(inputs), traced_fn, lookup,
                                            /*strict=*/true, /*force_outplace=*/false, &root);
    auto graph = traced.first->graph;
    auto fn = root._ivalue()->compilation_unit()->create_function(
        c10::QualifiedName(*root.type()->name(), "forward"), graph);
    root.type()->addMethod(fn);
    root.save(std::string(path));
  });
}

}  // extern "C"
