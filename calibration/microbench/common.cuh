// Shared pieces of the servesim CUDA microbenchmarks: error checks, owned CUDA objects, timing,
// CSV output. Built by nvcc alone (build_and_run.sh) or by meson (-Dcalibration=enabled); no other
// dependency.
//
// Every CUDA, cuBLASLt and NCCL call's status is checked, and every kernel launch is followed by
// MB_CHECK_LAUNCH() (a bad launch configuration is reported only by cudaGetLastError):
// tests/calibration/microbench_sources_test.cc reads these sources and fails on a call whose status
// is dropped or a launch left unchecked. A failed check throws mb::Failure naming the call, file:line and the error string;
// main() reports it, writes `bench_<name>,0,0` to checks.csv and exits 4 once the other benchmarks
// have run (their raw files are complete; a sticky error makes them fail fast too).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "planning.h"
#include "raw_format.h"

namespace mb {

namespace plan = servesim::calibration::plan;

// A failed CUDA, cuBLASLt or NCCL call: the benchmark that made it stops, the others go on.
struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Throws Failure("CALL failed at FILE:LINE: ERROR").
[[noreturn]] void fail(const char* call, const std::string& error, const char* file, int line);
// For destructors, which must not throw: prints the same message and makes main() exit non-zero.
void fail_in_cleanup(const char* call, const std::string& error, const char* file, int line);
bool cleanup_failed();

#define MB_CUDA(call)                                                                 \
  do {                                                                                \
    const cudaError_t mb_err_ = (call);                                               \
    if (mb_err_ != cudaSuccess) ::mb::fail(#call, cudaGetErrorString(mb_err_), __FILE__, __LINE__); \
  } while (0)

#define MB_CUDA_NOTHROW(call)                                                         \
  do {                                                                                \
    const cudaError_t mb_err_ = (call);                                               \
    if (mb_err_ != cudaSuccess) ::mb::fail_in_cleanup(#call, cudaGetErrorString(mb_err_), __FILE__, __LINE__); \
  } while (0)

// After every <<<...>>> launch: a launch that could not start (grid, block or shared memory out of
// range, no kernel image for this GPU) is reported only here, not by the launch.
#define MB_CHECK_LAUNCH() MB_CUDA(cudaGetLastError())

struct Options {
  std::string out_dir;
  std::string gpu;        // the catalogue name, written to device.csv when given
  bool quick = false;     // fewer shapes and repetitions (a smoke run)
  std::vector<std::string> only;  // benchmark names to run; empty = all
  std::vector<plan::DecodeLayout> decode_layouts;  // empty: plan::default_decode_layouts()
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
    if (!out_) throw Failure("writing " + path_ + " failed");
  }

 private:
  std::string path_;
  std::ofstream out_;
};

// ---- Owned CUDA objects: created with checks, destroyed with checks ------------------------------

class Stream {
 public:
  Stream() { MB_CUDA(cudaStreamCreate(&s_)); }
  ~Stream() {
    if (s_) MB_CUDA_NOTHROW(cudaStreamDestroy(s_));
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  operator cudaStream_t() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

class Event {
 public:
  Event() { MB_CUDA(cudaEventCreate(&e_)); }
  ~Event() {
    if (e_) MB_CUDA_NOTHROW(cudaEventDestroy(e_));
  }
  Event(Event&& o) noexcept : e_(o.e_) { o.e_ = nullptr; }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  operator cudaEvent_t() const { return e_; }

 private:
  cudaEvent_t e_ = nullptr;
};

// Whether the work before `e` has finished, without waiting. A query that finds it unfinished
// leaves cudaErrorNotReady as the thread's last error on some drivers, which the next launch check
// would mistake for a failure: it is cleared here, and anything else found there is a failure.
bool event_done(cudaEvent_t e);

// Seconds from `a` to `b` on the GPU (both complete).
double elapsed_seconds(cudaEvent_t a, cudaEvent_t b);

class GraphExec {
 public:
  // Ends the capture on `s` and instantiates the graph it recorded.
  explicit GraphExec(cudaStream_t s) {
    MB_CUDA(cudaStreamEndCapture(s, &graph_));
    MB_CUDA(cudaGraphInstantiate(&exec_, graph_, 0));
  }
  ~GraphExec() {
    if (exec_) MB_CUDA_NOTHROW(cudaGraphExecDestroy(exec_));
    if (graph_) MB_CUDA_NOTHROW(cudaGraphDestroy(graph_));
  }
  GraphExec(const GraphExec&) = delete;
  GraphExec& operator=(const GraphExec&) = delete;
  operator cudaGraphExec_t() const { return exec_; }

 private:
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

// Device memory that frees itself.
template <class T>
struct DeviceBuffer {
  T* ptr = nullptr;
  size_t count = 0;
  explicit DeviceBuffer(size_t n) : count(n) {
    if (n) MB_CUDA(cudaMalloc(&ptr, n * sizeof(T)));
  }
  ~DeviceBuffer() {
    if (ptr) MB_CUDA_NOTHROW(cudaFree(ptr));
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

// Pinned host memory that frees itself.
struct PinnedBuffer {
  void* ptr = nullptr;
  explicit PinnedBuffer(size_t bytes) { MB_CUDA(cudaMallocHost(&ptr, bytes)); }
  ~PinnedBuffer() {
    if (ptr) MB_CUDA_NOTHROW(cudaFreeHost(ptr));
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
};

// ---- Rotation -----------------------------------------------------------------------------------

// The device's L2 size and the memory a sweep point may use for its rotated copies (half of what
// is free now, so the benchmark's other buffers and the library's workspaces still fit).
size_t l2_bytes(int device);
size_t rotation_budget();

// One arena holding a plan::Rotation's copies; ptr(b, call) is buffer b of the copy call number
// `call` uses. The arena is filled with small random fp16 values in address order, so copy 0 was
// written first.
class RotatedBuffers {
 public:
  RotatedBuffers(const plan::Rotation& r, unsigned seed, cudaStream_t s);
  template <class T>
  T* ptr(size_t buffer, uint64_t call) const {
    return reinterpret_cast<T*>(arena_.ptr + plan_.offset(buffer, call));
  }
  const plan::Rotation& rotation() const { return plan_; }
  // Writes `values` (one int32 per element of buffer `b`, the same for every copy) into buffer b of
  // every copy (positions, token ids).
  void set_indices(size_t buffer, const std::vector<int>& values, cudaStream_t s);

 private:
  plan::Rotation plan_;
  DeviceBuffer<char> arena_;
};

// ---- Timing -------------------------------------------------------------------------------------

// Holds the GPU for about `ns` (GPU global timer) so that the work queued after it is queued whole
// before the GPU reaches it: neither the host's launch gaps nor its pace enter what events measure.
void spin(cudaStream_t stream, double ns);

// Times `op` (which enqueues one call on `stream`) `reps` times after `warmup` untimed calls; each
// timed call is bracketed by events, all queued behind a spin kernel. The measurement counts only
// when the spin was still running after the host had queued every timed call (event_done() on the
// first event is false then); otherwise it is repeated with a longer spin. Returns the median
// seconds per call. `warmup` = a rotation's copies puts L2 in the state of a steady rotation: the
// first timed call's data was last touched a whole rotation ago.
template <class Op>
double time_median(cudaStream_t stream, int reps, Op&& op, size_t warmup = 1) {
  for (size_t w = 0; w < warmup; ++w) op();  // also first-call costs (cuBLAS heuristics, modules)
  MB_CUDA(cudaStreamSynchronize(stream));
  std::vector<Event> ev(2 * static_cast<size_t>(reps));
  double spin_ns = 2e6;
  for (int attempt = 0;; ++attempt) {
    spin(stream, spin_ns);
    const auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; ++r) {
      MB_CUDA(cudaEventRecord(ev[2 * r], stream));
      op();
      MB_CUDA(cudaEventRecord(ev[2 * r + 1], stream));
    }
    const double host_ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    const bool queued_ahead = !event_done(ev[0]);
    MB_CUDA(cudaStreamSynchronize(stream));
    if (queued_ahead) break;
    if (attempt == 3)
      throw Failure("the host could not queue " + std::to_string(reps) + " calls within a " +
                    std::to_string(spin_ns * 1e-6) + " ms spin; timings would include its launch gaps");
    spin_ns = std::max(4 * spin_ns, 4 * host_ns);
  }
  std::vector<double> t(static_cast<size_t>(reps));
  for (int r = 0; r < reps; ++r) t[r] = elapsed_seconds(ev[2 * r], ev[2 * r + 1]);
  std::nth_element(t.begin(), t.begin() + reps / 2, t.end());
  return t[reps / 2];
}

// Repetitions for a call expected to take about `seconds`: enough for a stable median, bounded so
// that one point takes at most ~0.2 s.
inline int reps_for(const Options& o, double seconds) {
  const int cap = o.quick ? 5 : o.reps;
  return std::max(3, std::min(cap, static_cast<int>(0.2 / std::max(seconds, 1e-7))));
}

// Fills with small pseudo-random values (deterministic), of any 2-byte or 1-byte type via bytes.
void fill_random_half(void* ptr, size_t count, unsigned seed, cudaStream_t stream);   // __half
void fill_random_bf16(void* ptr, size_t count, unsigned seed, cudaStream_t stream);   // __nv_bfloat16
void fill_random_fp8(void* ptr, size_t count, unsigned seed, cudaStream_t stream);    // __nv_fp8_e4m3

// The largest |a[i] - b[i]| over n elements (a: a kernel's fp16 output, b: a reference's fp32 one).
float max_abs_error(const void* a_half, const float* b, size_t n, cudaStream_t stream);

// The benchmarks (each writes its raw file; a Failure stops only that benchmark).
void run_gemm(const Options& o, const cudaDeviceProp& prop);
void run_streams(const Options& o, const cudaDeviceProp& prop);
void run_attention(const Options& o, const cudaDeviceProp& prop, CsvOut& checks);
void run_launch(const Options& o);
void run_collectives(const Options& o);
void run_host_copy(const Options& o);
void check_elementwise(const Options& o, CsvOut& checks);

}  // namespace mb
