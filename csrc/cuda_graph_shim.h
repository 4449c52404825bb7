// cuda_graph_shim.h: a C API over libtorch's CUDA graphs (at::cuda::CUDAGraph, what
// torch.cuda.CUDAGraph wraps) for trainbook's graphed training step (src/train/cuda_graph/),
// plus the two global switches a graph capture needs around it: autocast's weight-cast cache
// and a parameter's .grad. Same error convention as c10d_shim.h (NULL on success, else a
// malloc'ed message freed with tb_string_free).
//
// A graph and its side stream exist only in builds with the `cuda` feature (USE_CUDA); there
// tb_cuda_graph_new returns an error saying so, and the other graph calls take only what it
// made. The switches compile in every build.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "c10d_shim.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tb_cuda_graph tb_cuda_graph;

// A new, empty graph for CUDA device `index`, with a side stream of its own from libtorch's
// stream pool (torch.cuda.Stream()): the stream its warm-up steps and its capture run on.
char* tb_cuda_graph_new(int index, tb_cuda_graph** out);
void tb_cuda_graph_free(tb_cuda_graph* g);
// The calling thread's current stream becomes the graph's side stream, after it waits for
// the work queued so far on the current stream (torch's `with torch.cuda.stream(s)` after
// s.wait_stream(torch.cuda.current_stream())).
char* tb_cuda_graph_enter_side_stream(tb_cuda_graph* g);
// Back to the stream that was current before, which first waits for the side stream's work.
char* tb_cuda_graph_exit_side_stream(tb_cuda_graph* g);
// Starts capturing the side stream into the graph (CUDAGraph::capture_begin with a private
// memory pool, in cudaStreamCaptureModeThreadLocal: other threads, such as a loader's, may go
// on allocating pinned memory meanwhile). Enter the side stream first.
char* tb_cuda_graph_capture_begin(tb_cuda_graph* g);
// Ends the capture and instantiates the graph (CUDAGraph::capture_end); an error when the
// capture was invalidated (an operation that synchronises, say).
char* tb_cuda_graph_capture_end(tb_cuda_graph* g);
// Launches the captured graph on the calling thread's current stream (CUDAGraph::replay).
char* tb_cuda_graph_replay(tb_cuda_graph* g);

// torch.is_autocast_cache_enabled() / torch.set_autocast_cache_enabled(on).
char* tb_autocast_cache(int on, int* previous);
// Makes each grads[i] the .grad of params[i] (torch's `p.grad = g`); shapes must match.
char* tb_set_grads(const tb_tensor* const* params, const tb_tensor* const* grads, size_t n);

#ifdef __cplusplus
}
#endif
