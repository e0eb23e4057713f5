// Launch costs: what an eager kernel launch costs the host, an empty kernel's time on the GPU when
// kernels are queued back to back, and the same through a replayed CUDA graph.
#include <chrono>
#include <functional>
#include <vector>

#include "common.cuh"

namespace mb {
namespace {

__global__ void empty_kernel() {}

double host_seconds_per(int n, const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / n;
}

}  // namespace

void run_launch(const Options& o) {
  CsvOut out(o.out_dir, servesim::calibration::raw::kLaunchFile, servesim::calibration::raw::kLaunchHeader);
  cudaStream_t s = nullptr;
  MB_CUDA(cudaStreamCreate(&s));
  const int n = o.quick ? 200 : 2000;
  const int trials = o.quick ? 3 : 7;
  auto median = [&](std::vector<double> v) {
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return v[v.size() / 2];
  };

  // Host time per eager launch: n launches back to back, then wait.
  std::vector<double> eager;
  for (int t = 0; t < trials; ++t) {
    MB_CUDA(cudaStreamSynchronize(s));
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) empty_kernel<<<1, 32, 0, s>>>();
    MB_CUDA(cudaStreamSynchronize(s));
    eager.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / n);
  }
  out.row("kernel_eager", median(eager), trials);

  // GPU time per empty kernel queued behind a spin kernel (no host gaps).
  cudaEvent_t a, b;
  MB_CUDA(cudaEventCreate(&a));
  MB_CUDA(cudaEventCreate(&b));
  std::vector<double> gpu;
  for (int t = 0; t < trials; ++t) {
    spin(s, 20e6);
    MB_CUDA(cudaEventRecord(a, s));
    for (int i = 0; i < n; ++i) empty_kernel<<<1, 32, 0, s>>>();
    MB_CUDA(cudaEventRecord(b, s));
    MB_CUDA(cudaEventSynchronize(b));
    float ms = 0;
    MB_CUDA(cudaEventElapsedTime(&ms, a, b));
    gpu.push_back(ms * 1e-3 / n);
  }
  out.row("kernel_gpu", median(gpu), trials);

  // A graph of n empty kernels: GPU time per node on replay.
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  MB_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < n; ++i) empty_kernel<<<1, 32, 0, s>>>();
  MB_CUDA(cudaStreamEndCapture(s, &graph));
  MB_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  MB_CUDA(cudaGraphLaunch(exec, s));
  MB_CUDA(cudaStreamSynchronize(s));
  std::vector<double> per_node;
  for (int t = 0; t < trials; ++t) {
    spin(s, 1e6);
    MB_CUDA(cudaEventRecord(a, s));
    MB_CUDA(cudaGraphLaunch(exec, s));
    MB_CUDA(cudaEventRecord(b, s));
    MB_CUDA(cudaEventSynchronize(b));
    float ms = 0;
    MB_CUDA(cudaEventElapsedTime(&ms, a, b));
    per_node.push_back(ms * 1e-3 / n);
  }
  out.row("graph_kernel", median(per_node), trials);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);

  // A one-node graph: host time per replay, launched back to back.
  MB_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  empty_kernel<<<1, 32, 0, s>>>();
  MB_CUDA(cudaStreamEndCapture(s, &graph));
  MB_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  std::vector<double> replay;
  for (int t = 0; t < trials; ++t) {
    MB_CUDA(cudaStreamSynchronize(s));
    replay.push_back(host_seconds_per(n, [&] { cudaGraphLaunch(exec, s); }));
    MB_CUDA(cudaStreamSynchronize(s));
  }
  out.row("graph_launch", median(replay), trials);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  MB_CUDA(cudaGetLastError());
  MB_CUDA(cudaStreamDestroy(s));
}

}  // namespace mb
