// Shared pieces of the servesim CUDA microbenchmarks: error checks, timing, CSV output.
// Built by nvcc alone (build_and_run.sh) or by meson (-Dcalibration=enabled); no other dependency.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "raw_format.h"

namespace mb {

// A failed CUDA call: the benchmark that made it stops, the others go on.
struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

#define MB_CUDA(call)                                                                                    \
  do {                                                                                                   \
    cudaError_t mb_err_ = (call);                                                                        \
    if (mb_err_ != cudaSuccess)                                                                          \
      throw ::mb::Failure(std::string(#call) + ": " + cudaGetErrorString(mb_err_) + " at " + __FILE__ + \
                          ":" + std::to_string(__LINE__));                                               \
  } while (0)

struct Options {
  std::string out_dir;
  std::string gpu;        // the catalogue name, written to device.csv when given
  bool quick = false;     // fewer shapes and repetitions (a smoke run)
  std::vector<std::string> only;  // benchmark names to run; empty = all
  int device = 0;
  int reps = 20;          // timed repetitions per point (fewer for long calls)
  bool wants(const std::string& name) const {
    return only.empty() || std::find(only.begin(), only.end(), name) != only.end();
  }
};

// Appends rows to one raw CSV file, writing the header first.
class CsvOut {
 public:
  CsvOut(const std::string& dir, const char* file, const char* header) : path_(dir + "/" + file) {
    out_.open(path_, std::ios::trunc);
    if (!out_) throw Failure("cannot write " + path_);
    out_ << header << "\n";
  }
  // One line, written and flushed at once: a run stopped between rows leaves whole rows only.
  template <class... T>
  void row(const T&... cells) {
    std::ostringstream line;
    line.precision(9);
    bool first = true;
    ((line << (first ? "" : ",") << cells, first = false), ...);
    line << "\n";
    out_ << line.str();
    out_.flush();
  }

 private:
  std::string path_;
  std::ofstream out_;
};

// Keeps the GPU busy for about `ns` so that the work queued after it runs back to back, without
// the host's launch gaps between the timing events and the kernels they bracket.
void spin(cudaStream_t stream, double ns);

// Times `op` (which enqueues one call on `stream`) `reps` times after one warm-up call; each call is
// bracketed by events, all queued behind a spin kernel. Returns the median seconds per call.
template <class Op>
double time_median(cudaStream_t stream, int reps, Op&& op) {
  op();  // warm-up: first-call costs (cuBLAS heuristics, module loading)
  MB_CUDA(cudaStreamSynchronize(stream));
  std::vector<cudaEvent_t> ev(2 * static_cast<size_t>(reps));
  for (auto& e : ev) MB_CUDA(cudaEventCreate(&e));
  spin(stream, 2e6);
  for (int r = 0; r < reps; ++r) {
    MB_CUDA(cudaEventRecord(ev[2 * r], stream));
    op();
    MB_CUDA(cudaEventRecord(ev[2 * r + 1], stream));
  }
  MB_CUDA(cudaStreamSynchronize(stream));
  std::vector<double> t(static_cast<size_t>(reps));
  for (int r = 0; r < reps; ++r) {
    float ms = 0;
    MB_CUDA(cudaEventElapsedTime(&ms, ev[2 * r], ev[2 * r + 1]));
    t[r] = ms * 1e-3;
  }
  for (auto& e : ev) cudaEventDestroy(e);
  std::nth_element(t.begin(), t.begin() + reps / 2, t.end());
  return t[reps / 2];
}

// Repetitions for a call expected to take about `seconds`: enough for a stable median, bounded so
// that one point takes at most ~0.2 s.
inline int reps_for(const Options& o, double seconds) {
  const int cap = o.quick ? 5 : o.reps;
  return std::max(3, std::min(cap, static_cast<int>(0.2 / std::max(seconds, 1e-7))));
}

// Device memory that frees itself.
template <class T>
struct DeviceBuffer {
  T* ptr = nullptr;
  size_t count = 0;
  explicit DeviceBuffer(size_t n) : count(n) {
    if (n) MB_CUDA(cudaMalloc(&ptr, n * sizeof(T)));
  }
  ~DeviceBuffer() {
    if (ptr) cudaFree(ptr);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

// Fills with small pseudo-random values (deterministic), of any 2-byte or 1-byte type via bytes.
void fill_random_half(void* ptr, size_t count, unsigned seed, cudaStream_t stream);   // __half
void fill_random_bf16(void* ptr, size_t count, unsigned seed, cudaStream_t stream);   // __nv_bfloat16
void fill_random_fp8(void* ptr, size_t count, unsigned seed, cudaStream_t stream);    // __nv_fp8_e4m3

// The largest |a[i] - b[i]| over n elements (a: a kernel's fp16 output, b: a reference's fp32 one).
float max_abs_error(const void* a_half, const float* b, size_t n, cudaStream_t stream);

// How many copies of a buffer of `bytes` keep the working set of repeated calls out of L2 (twice
// its size), at most 64: serving never finds the next layer's weights in L2.
int rotation_count(size_t bytes, size_t l2_bytes);

// The benchmarks (each writes its raw file; a Failure stops only that benchmark).
void run_gemm(const Options& o, const cudaDeviceProp& prop);
void run_streams(const Options& o, const cudaDeviceProp& prop);
void run_attention(const Options& o, const cudaDeviceProp& prop, CsvOut& checks);
void run_launch(const Options& o);
void run_collectives(const Options& o);
void run_host_copy(const Options& o);
void check_elementwise(const Options& o, CsvOut& checks);

}  // namespace mb
