// c10d_shim.h: a small C API over PyTorch's own c10d (TCPStore, PrefixStore, ProcessGroupGloo,
// ProcessGroupNCCL) for trainbook's Rust side (src/dist/ffi.rs mirrors these declarations).
//
// Conventions:
// - Every function that can fail returns NULL on success or a malloc'ed, NUL-terminated error
//   message that the caller releases with tb_string_free. No C++ exception ever crosses this API.
// - Tensors are passed as the `at::Tensor*` that tch-rs hands out (`Tensor::as_ptr()`).
// - Collective operations are asynchronous: they return a tb_work to wait on.
#pragma once
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tb_store tb_store;
typedef struct tb_pg tb_pg;
typedef struct tb_work tb_work;
typedef void tb_tensor;  // an at::Tensor, as owned by tch-rs

enum tb_backend { TB_BACKEND_GLOO = 0, TB_BACKEND_NCCL = 1 };

void tb_string_free(char* s);
void tb_bytes_free(uint8_t* b);

// Version of the libtorch the shim was compiled against (TORCH_VERSION, e.g. "2.13.0").
const char* tb_torch_version(void);
// 1 when the shim was built with the NCCL process group (cargo feature `cuda`).
int tb_has_nccl(void);

// State of a device's default random generator (dropout masks, randn, ...), as bytes:
// device_type 0 = CPU (torch.get_rng_state()), 1 = CUDA device `index`
// (torch.cuda.get_rng_state(index); needs libtorch_cuda loaded).
char* tb_rng_get_state(int device_type, int index, uint8_t** out, size_t* len);
char* tb_rng_set_state(int device_type, int index, const uint8_t* state, size_t len);
// Seeds that one generator (what torch.manual_seed does to each generator it seeds; unlike
// torch.manual_seed, no other device's generator is touched).
char* tb_rng_manual_seed(int device_type, int index, uint64_t seed);

// TCPStore: `is_server` hosts the store in this process; `num_workers` < 0 means unknown.
char* tb_tcp_store_new(const char* host, uint16_t port, int is_server, int64_t num_workers,
                       int wait_workers, int64_t timeout_ms, tb_store** out);
// A view of `base` in which every key is prefixed with `prefix`.
char* tb_prefix_store_new(const char* prefix, const tb_store* base, tb_store** out);
char* tb_store_set(tb_store* s, const char* key, const uint8_t* value, size_t len);
// Blocks until `key` exists (up to the store's timeout). *value is freed with tb_bytes_free.
char* tb_store_get(tb_store* s, const char* key, uint8_t** value, size_t* len);
char* tb_store_add(tb_store* s, const char* key, int64_t delta, int64_t* out);
void tb_store_free(tb_store* s);

// `cuda_device` >= 0 binds the group to that CUDA device, as init_process_group(device_id=...)
// does: the group's bound device (NCCL's barrier uses it), and NCCL connects eagerly on it.
// -1: no bound device (a CPU group, or CUDA tensors whose device NCCL has to infer).
char* tb_pg_new(const tb_store* store, int backend, int rank, int size, int64_t timeout_ms,
                int cuda_device, tb_pg** out);
void tb_pg_free(tb_pg* pg);

char* tb_pg_allreduce_sum(tb_pg* pg, const tb_tensor* tensor, tb_work** out);
char* tb_pg_broadcast(tb_pg* pg, const tb_tensor* tensor, int root, tb_work** out);
// Gathers `input` from every rank into outputs[0..n) (n must equal the group size).
char* tb_pg_all_gather(tb_pg* pg, const tb_tensor* input, const tb_tensor* const* outputs, size_t n,
                       tb_work** out);
// On a group bound to a CUDA device, NCCL's barrier runs on that device (BarrierOptions'
// device_ids and device, as torch.distributed.barrier passes the bound device).
char* tb_pg_barrier(tb_pg* pg, tb_work** out);

// Broadcasts `tensors` from `root` in flattened chunks of at most `buffer_bytes` (c10d's
// broadcast_coalesced, what torch DDP uses for module states and buffers).
char* tb_pg_broadcast_coalesced(tb_pg* pg, const tb_tensor* const* tensors, size_t n,
                                int64_t buffer_bytes, int root);
// c10d's verify_params_across_processes: fails on every rank when the ranks' parameter counts,
// shapes or strides differ (an all-gather of their metadata).
char* tb_pg_verify_params(tb_pg* pg, const tb_tensor* const* params, size_t n);

// ---- DDP: c10d::Reducer (ddp_shim.cpp) ----------------------------------------------------
typedef struct tb_reducer tb_reducer;
enum tb_comm_hook { TB_HOOK_ALLREDUCE = 0, TB_HOOK_FP16 = 1, TB_HOOK_BF16 = 2 };
// A Reducer over `params` (leaves that require grad, in model order; names[i] names params[i]).
// Buckets come from compute_bucket_assignment_by_size over the reversed parameters with the
// limits {first_bucket_bytes, bucket_bytes}, as torch DDP assigns them.
char* tb_reducer_new(tb_pg* pg, const tb_tensor* const* params, const char* const* names, size_t n,
                     int64_t bucket_bytes, int64_t first_bucket_bytes, int find_unused,
                     int gradient_as_bucket_view, int static_graph, int comm_hook,
                     tb_reducer** out);
// Before a forward pass: with `prepare` (a synchronised step) starts the iteration; then, as
// torch DDP does before every forward with gradients, rebuilds the buckets once after the
// first iteration (a broadcast from rank 0); fails if the last backward left buckets unreduced.
char* tb_reducer_prepare_for_forward(tb_reducer* r, int prepare, int* rebuilt);
// After the forward pass: arms the autograd hooks. `outputs` are only read with find_unused.
char* tb_reducer_prepare_for_backward(tb_reducer* r, const tb_tensor* const* outputs, size_t n);
// Current bucket assignment: counts[b] parameter indices per bucket, written into `indices`
// (capacity `cap`, must be >= the number of parameters); *buckets receives the bucket count.
// static_graph's first iteration: the hooks only counted gradients; reduce every bucket now
// (torch queues this as a callback at the end of that backward pass).
char* tb_reducer_delay_all_reduce(tb_reducer* r);
char* tb_reducer_buckets(tb_reducer* r, int64_t* indices, size_t cap, int64_t* counts,
                         size_t counts_cap, size_t* buckets);
void tb_reducer_free(tb_reducer* r);

// Waits for completion; timeout_ms <= 0 waits up to the process group's own timeout.
char* tb_work_wait(tb_work* w, int64_t timeout_ms);
void tb_work_free(tb_work* w);

#ifdef __cplusplus
}
#endif
