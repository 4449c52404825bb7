// device_shim.cpp: implementation of device_shim.h. With the `cuda` feature (USE_CUDA) the
// current device is set by c10::cuda::set_device, as torch.cuda.set_device does; otherwise by
// the CUDA device-guard implementation that libtorch_cuda registers when it is loaded (without
// it, libtorch's error "PyTorch is not linked with support for cuda devices" comes back).
#include "device_shim.h"

#include <ATen/Context.h>
#include <torch/csrc/autograd/anomaly_mode.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#ifdef USE_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

#include <cstring>

#include <stdexcept>
#include <string>

#include "shim_internal.hpp"

using tb::guarded;
using tb::null_arg;

extern "C" {

char* tb_cuda_set_device(int index) {
  return guarded([&] {
    if (index < 0) throw std::invalid_argument("CUDA device index " + std::to_string(index));
    // torch.cuda.set_device: CUDA's lazy initialisation first (it fails clearly where there is
    // no driver or no device), then the thread's device.
    at::globalContext().lazyInitDevice(c10::DeviceType::CUDA);
    auto device = static_cast<c10::DeviceIndex>(index);
#ifdef USE_CUDA
    c10::cuda::set_device(device);
#else
    c10::impl::VirtualGuardImpl(c10::DeviceType::CUDA)
        .setDevice(c10::Device(c10::DeviceType::CUDA, device));
#endif
  });
}

char* tb_cuda_current_device(int* index) {
  if (index == nullptr) return null_arg("index");
  return guarded([&] {
    at::globalContext().lazyInitDevice(c10::DeviceType::CUDA);
    *index = static_cast<int>(c10::impl::VirtualGuardImpl(c10::DeviceType::CUDA).getDevice().index());
  });
}

// CUDA's caching allocator, as libtorch_cuda registers it (an error naming CUDA without it).
static c10::DeviceAllocator* cuda_allocator(int index) {
  if (index < 0) throw std::invalid_argument("CUDA device index " + std::to_string(index));
  at::globalContext().lazyInitDevice(c10::DeviceType::CUDA);
  return c10::getDeviceAllocator(c10::DeviceType::CUDA);
}

char* tb_cuda_memory_peaks(int index, int64_t* allocated, int64_t* reserved) {
  if (!allocated || !reserved) return null_arg("outputs");
  return guarded([&] {
    auto stats = cuda_allocator(index)->getDeviceStats(static_cast<c10::DeviceIndex>(index));
    constexpr auto all = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
    *allocated = stats.allocated_bytes[all].peak;
    *reserved = stats.reserved_bytes[all].peak;
  });
}

char* tb_cuda_reset_peak_memory(int index) {
  return guarded([&] { cuda_allocator(index)->resetPeakStats(static_cast<c10::DeviceIndex>(index)); });
}

char* tb_cuda_empty_cache(int index) {
  return guarded([&] { cuda_allocator(index)->emptyCache(); });
}

char* tb_set_deterministic(int on) {
  return guarded([&] {
    auto& context = at::globalContext();
    context.setDeterministicAlgorithms(on != 0, /*warn_only=*/false);
    context.setDeterministicCuDNN(on != 0);
    if (on != 0) context.setBenchmarkCuDNN(false);
  });
}

char* tb_deterministic_state(int* algorithms, int* cudnn_deterministic, int* cudnn_benchmark) {
  if (!algorithms || !cudnn_deterministic || !cudnn_benchmark) return null_arg("outputs");
  return guarded([&] {
    auto& context = at::globalContext();
    *algorithms = context.deterministicAlgorithms() ? 1 : 0;
    *cudnn_deterministic = context.deterministicCuDNN() ? 1 : 0;
    *cudnn_benchmark = context.benchmarkCuDNN() ? 1 : 0;
  });
}

char* tb_set_cudnn_benchmark(int on) {
  return guarded([&] { at::globalContext().setBenchmarkCuDNN(on != 0); });
}

char* tb_set_float32_matmul_precision(const char* name) {
  if (name == nullptr) return null_arg("name");
  return guarded([&] {
    std::string s(name);
    if (s != "highest" && s != "high" && s != "medium")
      throw std::invalid_argument("float32 matmul precision '" + s +
                                  "' (expected highest, high or medium)");
    at::globalContext().setFloat32MatmulPrecision(s);
  });
}

char* tb_float32_matmul_precision(int* level) {
  if (level == nullptr) return null_arg("level");
  return guarded([&] {
    switch (at::globalContext().float32MatmulPrecision()) {
      case at::Float32MatmulPrecision::HIGHEST: *level = 0; break;
      case at::Float32MatmulPrecision::HIGH: *level = 1; break;
      case at::Float32MatmulPrecision::MEDIUM: *level = 2; break;
    }
  });
}

char* tb_set_cudnn_allow_tf32(int on) {
  return guarded([&] { at::globalContext().setAllowTF32CuDNN(on != 0); });
}

char* tb_cudnn_allow_tf32(int* on) {
  if (on == nullptr) return null_arg("on");
  return guarded([&] { *on = at::globalContext().allowTF32CuDNN() ? 1 : 0; });
}

char* tb_set_anomaly(int on) {
  return guarded([&] { torch::autograd::AnomalyMode::set_enabled(on != 0, /*check_nan=*/true); });
}

char* tb_anomaly_enabled(int* on) {
  if (on == nullptr) return null_arg("on");
  return guarded([&] { *on = torch::autograd::AnomalyMode::is_enabled() ? 1 : 0; });
}

char* tb_cuda_device_uuid(int index, uint8_t* uuid16) {
  if (uuid16 == nullptr) return null_arg("uuid16");
  return guarded([&] {
    if (index < 0) throw std::invalid_argument("CUDA device index " + std::to_string(index));
#ifdef USE_CUDA
    const cudaDeviceProp* props = at::cuda::getDeviceProperties(static_cast<c10::DeviceIndex>(index));
    static_assert(sizeof(props->uuid.bytes) == 16, "a CUDA UUID has 16 bytes");
    std::memcpy(uuid16, props->uuid.bytes, 16);
#else
    throw std::runtime_error("a GPU's UUID needs trainbook built with the `cuda` feature");
#endif
  });
}

char* tb_pin_memory(const void* t, void** out) {
  if (t == nullptr || out == nullptr) return null_arg("tensor/out");
  return guarded([&] { *out = new at::Tensor(static_cast<const at::Tensor*>(t)->pin_memory()); });
}

}  // extern "C"
