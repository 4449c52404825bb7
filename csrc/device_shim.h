// device_shim.h: a C API over libtorch's device settings for trainbook's Rust side: the
// thread's current CUDA device (src/shim.rs), the caching allocator's peak memory
// (src/cuda_memory.rs), the process's deterministic mode (src/train/determinism.rs) and
// autograd's anomaly detection (src/train/anomaly.rs). Same error convention as c10d_shim.h (NULL on success, else a
// malloc'ed message freed with tb_string_free).
//
// Everything here dispatches at run time (through the device hooks that libtorch_cuda
// registers when it is loaded), so it compiles in every build; where CUDA is missing or
// unusable, a call returns libtorch's error.
#pragma once
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// torch.cuda.set_device(index): initialises CUDA if needed, then makes CUDA device `index` the
// calling thread's current device (the device of new contexts, handles and NCCL's guesses).
char* tb_cuda_set_device(int index);
// torch.cuda.current_device() for the calling thread.
char* tb_cuda_current_device(int* index);

// torch.cuda.max_memory_allocated(index) and torch.cuda.max_memory_reserved(index): the peaks of
// the caching allocator's allocated and reserved bytes on CUDA device `index` since the start
// or the last tb_cuda_reset_peak_memory.
char* tb_cuda_memory_peaks(int index, int64_t* allocated, int64_t* reserved);
// torch.cuda.reset_peak_memory_stats(index).
char* tb_cuda_reset_peak_memory(int index);
// torch.cuda.empty_cache(): the caching allocator's unused cached blocks go back to the driver.
char* tb_cuda_empty_cache(int index);

// on != 0: torch.use_deterministic_algorithms(True) + torch.backends.cudnn.deterministic = True
// + torch.backends.cudnn.benchmark = False. on == 0: both deterministic switches off (benchmark
// is left as it is). Exist in every build (cuDNN's switches are plain flags on the CPU).
char* tb_set_deterministic(int on);
// The three switches as libtorch holds them: deterministic algorithms, cuDNN deterministic,
// cuDNN benchmark (1 = on).
char* tb_deterministic_state(int* algorithms, int* cudnn_deterministic, int* cudnn_benchmark);

// torch.backends.cudnn.benchmark = on (cuDNN times its algorithms for each new shape and keeps
// the fastest).
char* tb_set_cudnn_benchmark(int on);
// torch.set_float32_matmul_precision(name) with name "highest", "high" or "medium";
// torch.get_float32_matmul_precision() as 0, 1 or 2.
char* tb_set_float32_matmul_precision(const char* name);
char* tb_float32_matmul_precision(int* level);
// torch.backends.cudnn.allow_tf32 = on (cuDNN's float32 convolutions may use TF32 tensor
// cores; on by default, as in torch) and its current value.
char* tb_set_cudnn_allow_tf32(int on);
char* tb_cudnn_allow_tf32(int* on);

// torch.autograd.set_detect_anomaly(on): the autograd engine checks every backward function's
// outputs for NaN and throws "Function 'XBackward0' returned nan values in its 0th output."
// (a process-wide switch, as torch's).
char* tb_set_anomaly(int on);
// Whether anomaly detection is on (torch.is_anomaly_enabled()).
char* tb_anomaly_enabled(int* on);

// The 16 bytes of CUDA device `index`'s UUID (torch.cuda.get_device_properties(index).uuid),
// which tell whether two ranks hold the same physical GPU whatever CUDA_VISIBLE_DEVICES each
// sees. Only in builds with the `cuda` feature (USE_CUDA); an error otherwise.
char* tb_cuda_device_uuid(int index, uint8_t* uuid16);
// tensor.pin_memory(): a copy of the CPU tensor `t` in page-locked host memory (the CUDA host
// allocator), which a non-blocking copy to the GPU can overlap with compute. Without the device
// argument that torch 2.11 deprecates (tch's pin_memory passes one, and torch warns per call).
char* tb_pin_memory(const void* t, void** out);

#ifdef __cplusplus
}
#endif
