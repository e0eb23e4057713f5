// NCCL all-reduce over 2, 4, 8 GPUs of this machine and send/recv between two, from one process
// (ncclCommInitAll). Nothing is written when fewer than two GPUs are visible.
#include <cuda_fp16.h>
#ifndef MB_NO_NCCL
#include <nccl.h>
#endif

#include <chrono>
#include <iostream>
#include <vector>

#include "common.cuh"

namespace mb {

#ifdef MB_NO_NCCL
void run_collectives(const Options&) { std::cerr << " (built without NCCL: no collectives)"; }
#else
namespace {

#define MB_NCCL(call)                                                                                   \
  do {                                                                                                  \
    const ncclResult_t mb_r_ = (call);                                                                  \
    if (mb_r_ != ncclSuccess) ::mb::fail(#call, ncclGetErrorString(mb_r_), __FILE__, __LINE__);       \
  } while (0)

#define MB_NCCL_NOTHROW(call)                                                                           \
  do {                                                                                                  \
    const ncclResult_t mb_r_ = (call);                                                                  \
    if (mb_r_ != ncclSuccess) ::mb::fail_in_cleanup(#call, ncclGetErrorString(mb_r_), __FILE__, __LINE__); \
  } while (0)

struct Group {
  std::vector<ncclComm_t> comms;
  std::vector<cudaStream_t> streams;
  std::vector<void*> buffers;
  int home = 0;  // the device the other benchmarks use, current again after every call here
  Group(int n, size_t bytes, int home_device) : comms(n), streams(n), buffers(n, nullptr), home(home_device) {
    std::vector<int> devs(n);
    for (int i = 0; i < n; ++i) devs[i] = i;
    MB_NCCL(ncclCommInitAll(comms.data(), n, devs.data()));
    for (int i = 0; i < n; ++i) {
      MB_CUDA(cudaSetDevice(i));
      MB_CUDA(cudaStreamCreate(&streams[i]));
      MB_CUDA(cudaMalloc(&buffers[i], bytes));
      MB_CUDA(cudaMemset(buffers[i], 0, bytes));
    }
    MB_CUDA(cudaSetDevice(home));
  }
  ~Group() {
    for (size_t i = 0; i < comms.size(); ++i) {
      MB_CUDA_NOTHROW(cudaSetDevice(static_cast<int>(i)));
      if (buffers[i]) MB_CUDA_NOTHROW(cudaFree(buffers[i]));
      if (streams[i]) MB_CUDA_NOTHROW(cudaStreamDestroy(streams[i]));
      if (comms[i]) MB_NCCL_NOTHROW(ncclCommDestroy(comms[i]));
    }
    MB_CUDA_NOTHROW(cudaSetDevice(home));
  }
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;
  void sync() {
    for (size_t i = 0; i < streams.size(); ++i) {
      MB_CUDA(cudaSetDevice(static_cast<int>(i)));
      MB_CUDA(cudaStreamSynchronize(streams[i]));
    }
    MB_CUDA(cudaSetDevice(home));
  }
};

// Median wall time of `reps` collectives, each waited for (small messages are latency-bound, so a
// host timer around a synchronised call is what a serving engine sees).
template <class F>
double time_collective(Group& g, int reps, F&& f) {
  f();
  g.sync();
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    g.sync();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::nth_element(t.begin(), t.begin() + reps / 2, t.end());
  return t[reps / 2];
}

}  // namespace

void run_collectives(const Options& o) {
  int visible = 0;
  MB_CUDA(cudaGetDeviceCount(&visible));
  if (visible < 2) {
    std::cerr << " (one GPU visible: no collectives)";
    return;
  }
  const size_t max_bytes = o.quick ? size_t{16} << 20 : size_t{256} << 20;
  CsvOut ar(o.out_dir, servesim::calibration::raw::kAllReduceFile, servesim::calibration::raw::kAllReduceHeader);
  for (int n : {2, 4, 8}) {
    if (n > visible) break;
    Group g(n, max_bytes, o.device);
    for (size_t bytes = 4096; bytes <= max_bytes; bytes *= 4) {
      const size_t count = bytes / sizeof(__half);
      const int reps = o.quick ? 5 : 20;
      const double t = time_collective(g, reps, [&] {
        MB_NCCL(ncclGroupStart());
        for (int i = 0; i < n; ++i)
          MB_NCCL(ncclAllReduce(g.buffers[i], g.buffers[i], count, ncclHalf, ncclSum, g.comms[i], g.streams[i]));
        MB_NCCL(ncclGroupEnd());
      });
      ar.row(n, bytes, t, reps);
    }
  }
  CsvOut sr(o.out_dir, servesim::calibration::raw::kSendRecvFile, servesim::calibration::raw::kSendRecvHeader);
  Group g(2, max_bytes, o.device);
  for (size_t bytes = 4096; bytes <= max_bytes; bytes *= 4) {
    const int reps = o.quick ? 5 : 20;
    const double t = time_collective(g, reps, [&] {
      MB_NCCL(ncclGroupStart());
      MB_NCCL(ncclSend(g.buffers[0], bytes, ncclChar, 1, g.comms[0], g.streams[0]));
      MB_NCCL(ncclRecv(g.buffers[1], bytes, ncclChar, 0, g.comms[1], g.streams[1]));
      MB_NCCL(ncclGroupEnd());
    });
    sr.row(bytes, t, reps);
  }
}
#endif

}  // namespace mb
