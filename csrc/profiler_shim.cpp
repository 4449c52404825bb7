// profiler_shim.cpp: implementation of profiler_shim.h over torch/csrc/autograd/profiler_kineto.h
// (the functions torch.autograd.profiler.profile calls from Python) and at::RecordFunction.
#include "profiler_shim.h"

#include <ATen/record_function.h>
#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/csrc/profiler/stubs/base.h>

#include <memory>
#include <set>
#include <stdexcept>
#include <string>

#include "shim_internal.hpp"

using tb::guarded;
using tb::null_arg;
namespace prof = torch::profiler::impl;

struct tb_record_function {
  at::RecordFunction record;
  tb_record_function() : record(at::RecordScope::USER_SCOPE) {}
};

// The ProfilerConfig and activities torch.profiler.profile builds from its arguments.
static prof::ProfilerConfig kineto_config(const tb_profile_config& c) {
  return prof::ProfilerConfig(prof::ProfilerState::KINETO, c.record_shapes != 0,
                              c.profile_memory != 0, /*with_stack=*/false, c.with_flops != 0,
                              /*with_modules=*/false);
}

static std::set<prof::ActivityType> activities(const tb_profile_config& c) {
  std::set<prof::ActivityType> out{prof::ActivityType::CPU};
  if (c.cuda != 0) out.insert(prof::ActivityType::CUDA);
  return out;
}

extern "C" {

char* tb_profiler_prepare(const tb_profile_config* config) {
  if (config == nullptr) return null_arg("config");
  return guarded([&] {
    torch::autograd::profiler::prepareProfiler(kineto_config(*config), activities(*config));
  });
}

char* tb_profiler_enable(const tb_profile_config* config) {
  if (config == nullptr) return null_arg("config");
  return guarded([&] {
    if (prof::profilerEnabled()) throw std::logic_error("a profiler is already recording on this thread");
    torch::autograd::profiler::enableProfiler(kineto_config(*config), activities(*config));
  });
}

char* tb_profiler_disable(const char* path) {
  return guarded([&] {
    if (!prof::profilerEnabled()) throw std::logic_error("no profiler is recording on this thread");
    auto result = torch::autograd::profiler::disableProfiler();
    if (path != nullptr && result) result->save(std::string(path));
  });
}

int tb_profiler_enabled(void) { return prof::profilerEnabled() ? 1 : 0; }

char* tb_profiler_nvtx_enable(void) {
  return guarded([&] {
    if (!prof::cudaStubs()->enabled())
      throw std::runtime_error(
          "NVTX ranges need libtorch with CUDA (trainbook built with the `cuda` feature)");
    if (prof::profilerEnabled()) throw std::logic_error("a profiler is already recording on this thread");
    torch::autograd::profiler::enableProfiler(
        prof::ProfilerConfig(prof::ProfilerState::NVTX), {prof::ActivityType::CPU});
  });
}

char* tb_profiler_nvtx_disable(void) {
  return guarded([&] {
    if (!prof::profilerEnabled()) throw std::logic_error("NVTX ranges are not on for this thread");
    torch::autograd::profiler::disableProfiler();
  });
}

char* tb_record_function_begin(const char* name, tb_record_function** out) {
  if (name == nullptr) return null_arg("name");
  if (out == nullptr) return null_arg("out");
  return guarded([&] {
    auto range = std::make_unique<tb_record_function>();
    if (range->record.isActive()) range->record.before(std::string(name));
    *out = range.release();
  });
}

void tb_record_function_end(tb_record_function* range) {
  if (range == nullptr) return;
  range->record.end();
  delete range;
}

}  // extern "C"
