// cuda_graph_shim.cpp: implementation of cuda_graph_shim.h. With the `cuda` feature the graph
// is an at::cuda::CUDAGraph and its side stream a c10::cuda::CUDAStream from the pool; the
// stream order between the side stream and the current one goes through events, as
// torch.cuda.Stream.wait_stream does.
#include "cuda_graph_shim.h"

#include <ATen/autocast_mode.h>
#include <c10/core/Event.h>
#ifdef USE_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include "shim_internal.hpp"

using tb::guarded;
using tb::null_arg;
using tb::tensor_list;

struct tb_cuda_graph {
#ifdef USE_CUDA
  std::unique_ptr<at::cuda::CUDAGraph> graph;
  c10::cuda::CUDAStream side;
  std::optional<c10::cuda::CUDAStream> previous;
  explicit tb_cuda_graph(c10::cuda::CUDAStream s)
      : graph(std::make_unique<at::cuda::CUDAGraph>()), side(s) {}
#endif
};

#ifdef USE_CUDA
// `waiter` waits (on the device) for the work queued so far on `waited`. Through c10's
// device-generic event (libc10_cuda's implementation), so the shim calls no CUDA runtime
// function itself and needs no link to libcudart.
static void wait_stream(const c10::cuda::CUDAStream& waiter, const c10::cuda::CUDAStream& waited) {
  c10::Event event(c10::DeviceType::CUDA);
  event.record(waited.unwrap());
  event.block(waiter.unwrap());
}
#endif

extern "C" {

char* tb_cuda_graph_new(int index, tb_cuda_graph** out) {
  if (out == nullptr) return null_arg("out");
  return guarded([&] {
#ifdef USE_CUDA
    if (index < 0) throw std::invalid_argument("CUDA device index " + std::to_string(index));
    at::globalContext().lazyInitDevice(c10::DeviceType::CUDA);
    auto side = c10::cuda::getStreamFromPool(false, static_cast<c10::DeviceIndex>(index));
    *out = new tb_cuda_graph(side);
#else
    (void)index;
    throw std::runtime_error(
        "CUDA graphs need trainbook built with the `cuda` feature (this build has no CUDA "
        "runtime to capture with)");
#endif
  });
}

void tb_cuda_graph_free(tb_cuda_graph* g) { delete g; }

char* tb_cuda_graph_enter_side_stream(tb_cuda_graph* g) {
  if (g == nullptr) return null_arg("graph");
  return guarded([&] {
#ifdef USE_CUDA
    if (g->previous) throw std::logic_error("the graph's side stream is already current");
    auto current = c10::cuda::getCurrentCUDAStream(g->side.device_index());
    wait_stream(g->side, current);
    g->previous = current;
    c10::cuda::setCurrentCUDAStream(g->side);
#endif
  });
}

char* tb_cuda_graph_exit_side_stream(tb_cuda_graph* g) {
  if (g == nullptr) return null_arg("graph");
  return guarded([&] {
#ifdef USE_CUDA
    if (!g->previous) throw std::logic_error("the graph's side stream is not current");
    auto back = *g->previous;
    g->previous.reset();
    c10::cuda::setCurrentCUDAStream(back);
    wait_stream(back, g->side);
#endif
  });
}

char* tb_cuda_graph_capture_begin(tb_cuda_graph* g) {
  if (g == nullptr) return null_arg("graph");
  return guarded([&] {
#ifdef USE_CUDA
    if (!g->previous) throw std::logic_error("capture starts on the graph's side stream");
    g->graph->capture_begin({0, 0}, cudaStreamCaptureModeThreadLocal);
#endif
  });
}

char* tb_cuda_graph_capture_end(tb_cuda_graph* g) {
  if (g == nullptr) return null_arg("graph");
  return guarded([&] {
#ifdef USE_CUDA
    g->graph->capture_end();
#endif
  });
}

char* tb_cuda_graph_replay(tb_cuda_graph* g) {
  if (g == nullptr) return null_arg("graph");
  return guarded([&] {
#ifdef USE_CUDA
    g->graph->replay();
#endif
  });
}

char* tb_autocast_cache(int on, int* previous) {
  return guarded([&] {
    if (previous != nullptr) *previous = at::autocast::is_autocast_cache_enabled() ? 1 : 0;
    at::autocast::set_autocast_cache_enabled(on != 0);
  });
}

char* tb_set_grads(const tb_tensor* const* params, const tb_tensor* const* grads, size_t n) {
  if (n == 0) return nullptr;
  if (!params || !grads) return null_arg("params or grads");
  return guarded([&] {
    auto p = tensor_list(params, n);
    auto g = tensor_list(grads, n);
    for (size_t i = 0; i < n; ++i) {
      if (p[i].sizes() != g[i].sizes())
        throw std::invalid_argument("a gradient of shape " + c10::str(g[i].sizes()) +
                                    " for a parameter of shape " + c10::str(p[i].sizes()));
      p[i].mutable_grad() = g[i];
    }
  });
}

}  // extern "C"
