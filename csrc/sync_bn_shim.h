// sync_bn_shim.h: torch.nn.SyncBatchNorm's training-mode computation as an autograd function
// whose forward and backward all-reduce their per-channel sums over a process group
// (src/dist/sync_batch_norm.rs mirrors these declarations). Conventions as in c10d_shim.h.
#pragma once
#include "c10d_shim.h"

#ifdef __cplusplus
extern "C" {
#endif

// A reference to a process group's backend that the layers of a model keep (it outlives the
// tb_pg it was taken from).
typedef struct tb_sync_group tb_sync_group;

char* tb_sync_group_new(tb_pg* pg, tb_sync_group** out);
void tb_sync_group_free(tb_sync_group* g);

// Batch normalisation of `input` ([N, C, ...]) with the statistics of the whole group's batch:
// forward all-reduces each channel's sum, sum of squares and count, backward the sums of the
// output gradient and of its product with the centred input (as torch's SyncBatchNorm's
// backward; its forward all-gathers per-rank statistics instead). `weight`,
// `bias`, `running_mean` and `running_var` may be NULL; the running statistics are updated in
// place with `momentum` and the unbiased variance of the whole batch. *out receives a new tensor.
char* tb_sync_batch_norm(tb_sync_group* g, const tb_tensor* input, const tb_tensor* weight,
                         const tb_tensor* bias, const tb_tensor* running_mean,
                         const tb_tensor* running_var, double momentum, double eps,
                         tb_tensor** out);

#ifdef __cplusplus
}
#endif
