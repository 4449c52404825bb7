// device_shim.h: a C API over libtorch's per-process device settings for trainbook's Rust
// side (src/shim.rs): the thread's current CUDA device. Same error convention as c10d_shim.h
// (NULL on success, else a malloc'ed message freed with tb_string_free).
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

#ifdef __cplusplus
}
#endif
