// profiler_shim.h: a C API over libtorch's own profiler (Kineto, what torch.profiler.profile
// drives: prepareProfiler / enableProfiler / disableProfiler and ProfilerResult::save, the
// Chrome trace) and over at::RecordFunction (what torch.profiler.record_function opens), for
// trainbook's profiler (src/train/profile/). Same error convention as c10d_shim.h (NULL on
// success, else a malloc'ed message freed with tb_string_free).
//
// The profiler is enabled for the calling thread (as torch's is, by default).
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "c10d_shim.h"

#ifdef __cplusplus
extern "C" {
#endif

// What torch.profiler.profile's arguments select. `cuda` adds ProfilerActivity.CUDA (kernels
// and memory copies, through CUPTI) to ProfilerActivity.CPU; the flags are record_shapes,
// profile_memory and with_flops.
typedef struct tb_profile_config {
  int cuda;
  int record_shapes;
  int profile_memory;
  int with_flops;
} tb_profile_config;

// torch.profiler's prepare_trace (the warm-up: Kineto set up, nothing kept yet).
char* tb_profiler_prepare(const tb_profile_config* config);
// torch.profiler's start_trace: from now on the thread's operators are recorded.
char* tb_profiler_enable(const tb_profile_config* config);
// torch.profiler's stop_trace, then export_chrome_trace(path) when path is not NULL.
char* tb_profiler_disable(const char* path);
// Whether a profiler is recording on this thread (torch.autograd.profiler._is_profiler_enabled).
int tb_profiler_enabled(void);
// torch.autograd.profiler.emit_nvtx: every operator (and every range opened below) becomes an
// NVTX range for Nsight Systems; an error in a build whose libtorch has no CUDA.
char* tb_profiler_nvtx_enable(void);
char* tb_profiler_nvtx_disable(void);

typedef struct tb_record_function tb_record_function;
// torch.profiler.record_function(name).__enter__: a user-scope range named `name` on this
// thread (recorded by an active profiler, else nothing). End it on the same thread.
char* tb_record_function_begin(const char* name, tb_record_function** out);
void tb_record_function_end(tb_record_function* range);

#ifdef __cplusplus
}
#endif
