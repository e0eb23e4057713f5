// servesim-microbench: model-free CUDA microbenchmarks whose raw samples `servesim fit
// --from-microbench` turns into a calibration profile. Usage:
//   servesim-microbench --out DIR [--gpu NAME] [--quick] [--only gemm,streams,...] [--device N]
//                       [--decode-layouts H:KV:D[:B],...]
// Exit codes: 0 all benchmarks ran, 3 no CUDA device, 4 some benchmark failed (the others' files are
// complete; checks.csv says which), 2 usage error.
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <sys/stat.h>

#include <atomic>
#include <cstring>
#include <iostream>
#include <sstream>

#include "common.cuh"

namespace mb {

namespace {
std::atomic<bool> g_cleanup_failed{false};
}  // namespace

void fail(const char* call, const std::string& error, const char* file, int line) {
  throw Failure(std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " + error);
}

void fail_in_cleanup(const char* call, const std::string& error, const char* file, int line) {
  std::cerr << "servesim-microbench: " << call << " failed at " << file << ":" << line << ": " << error << "\n";
  g_cleanup_failed = true;
}

bool cleanup_failed() { return g_cleanup_failed; }

bool event_done(cudaEvent_t e) {
  const cudaError_t status = cudaEventQuery(e);
  if (status == cudaErrorNotReady) {
    const cudaError_t pending = cudaGetLastError();
    if (pending != cudaErrorNotReady) MB_CUDA(pending);  // cudaSuccess passes; anything else is real
    return false;
  }
  MB_CUDA(status);
  return true;
}

double elapsed_seconds(cudaEvent_t a, cudaEvent_t b) {
  float ms = 0;
  MB_CUDA(cudaEventElapsedTime(&ms, a, b));
  return ms * 1e-3;
}

size_t l2_bytes(int device) {
  int l2 = 0;
  MB_CUDA(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
  if (l2 <= 0) throw Failure("the device reports no L2 cache size");
  return static_cast<size_t>(l2);
}

size_t rotation_budget() {
  size_t free_bytes = 0, total_bytes = 0;
  MB_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes));
  return free_bytes / 2;
}

// The GPU's nanosecond global timer: independent of the SM clock, which boosts and throttles.
__device__ inline unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void spin_kernel(unsigned long long ns) {
  const unsigned long long start = global_ns();
  while (global_ns() - start < ns) {
  }
}

void spin(cudaStream_t stream, double ns) {
  spin_kernel<<<1, 1, 0, stream>>>(static_cast<unsigned long long>(ns));
  MB_CHECK_LAUNCH();
}

// A 32-bit hash: deterministic values in [-0.5, 0.5).
__device__ inline float hash_unit(size_t i, unsigned seed) {
  unsigned x = static_cast<unsigned>(i) * 2654435761u ^ (seed * 0x9e3779b9u) ^ static_cast<unsigned>(i >> 32);
  x ^= x >> 16;
  x *= 0x85ebca6bu;
  x ^= x >> 13;
  return (x & 0xffffff) / 16777216.0f - 0.5f;
}

template <class T, class Convert>
__global__ void fill_kernel(T* p, size_t n, unsigned seed, Convert convert) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    p[i] = convert(hash_unit(i, seed));
}

struct ToHalf {
  __device__ __half operator()(float v) const { return __float2half(v); }
};
struct ToBf16 {
  __device__ __nv_bfloat16 operator()(float v) const { return __float2bfloat16(v); }
};
struct ToFp8 {
  __device__ __nv_fp8_e4m3 operator()(float v) const { return __nv_fp8_e4m3(v); }
};

void fill_random_half(void* ptr, size_t n, unsigned seed, cudaStream_t s) {
  fill_kernel<<<1024, 256, 0, s>>>(static_cast<__half*>(ptr), n, seed, ToHalf{});
  MB_CHECK_LAUNCH();
}
void fill_random_bf16(void* ptr, size_t n, unsigned seed, cudaStream_t s) {
  fill_kernel<<<1024, 256, 0, s>>>(static_cast<__nv_bfloat16*>(ptr), n, seed, ToBf16{});
  MB_CHECK_LAUNCH();
}
void fill_random_fp8(void* ptr, size_t n, unsigned seed, cudaStream_t s) {
  fill_kernel<<<1024, 256, 0, s>>>(static_cast<__nv_fp8_e4m3*>(ptr), n, seed, ToFp8{});
  MB_CHECK_LAUNCH();
}

namespace {
// The arena's size, refused before anything is allocated when the plan says it does not fit.
size_t arena_size(const plan::Rotation& r) {
  if (!r.fits) throw Failure("a rotation of " + std::to_string(r.arena_bytes()) + " bytes does not fit the memory budget");
  return r.arena_bytes();
}
}  // namespace

RotatedBuffers::RotatedBuffers(const plan::Rotation& r, unsigned seed, cudaStream_t s)
    : plan_(r), arena_(arena_size(r)) {
  // One grid-stride pass over the whole arena writes it in (about) address order: copy 0 first.
  fill_random_half(arena_.ptr, r.arena_bytes() / 2, seed, s);
}

void RotatedBuffers::set_indices(size_t buffer, const std::vector<int>& values, cudaStream_t s) {
  const size_t width = values.size() * sizeof(int);
  if (width != plan_.bytes.at(buffer)) throw Failure("set_indices: the values do not fill the buffer");
  if (plan_.copies == 1) {
    MB_CUDA(cudaMemcpyAsync(arena_.ptr + plan_.prefix(buffer), values.data(), width, cudaMemcpyHostToDevice, s));
    MB_CUDA(cudaStreamSynchronize(s));  // `values` is pageable and the caller's
    return;
  }
  // The same values into every copy: one strided copy (destination pitch = the slot, under 4 x L2
  // when there are several copies, so well within the copy engine's pitch limit). The source
  // repeats the values, laid out copies times.
  std::vector<int> rows(values.size() * plan_.copies);
  for (size_t c = 0; c < plan_.copies; ++c) std::copy(values.begin(), values.end(), rows.begin() + c * values.size());
  MB_CUDA(cudaMemcpy2DAsync(arena_.ptr + plan_.prefix(buffer), plan_.slot(), rows.data(), width, width, plan_.copies,
                            cudaMemcpyHostToDevice, s));
  MB_CUDA(cudaStreamSynchronize(s));  // `rows` is pageable and about to go
}

__global__ void max_abs_diff_kernel(const __half* a, const float* b, size_t n, float* result) {
  float m = 0;
  for (size_t i = threadIdx.x; i < n; i += blockDim.x) m = fmaxf(m, fabsf(__half2float(a[i]) - b[i]));
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  __shared__ float part[32];
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = m;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < blockDim.x / 32; ++w) m = fmaxf(m, part[w]);
    *result = fmaxf(m, part[0]);
  }
}

float max_abs_error(const void* a_half, const float* b, size_t n, cudaStream_t stream) {
  DeviceBuffer<float> err(1);
  max_abs_diff_kernel<<<1, 256, 0, stream>>>(static_cast<const __half*>(a_half), b, n, err.ptr);
  MB_CHECK_LAUNCH();
  float e = 0;
  MB_CUDA(cudaMemcpyAsync(&e, err.ptr, sizeof e, cudaMemcpyDeviceToHost, stream));
  MB_CUDA(cudaStreamSynchronize(stream));
  return e;
}

}  // namespace mb

namespace {

int usage(const char* why) {
  std::cerr << "servesim-microbench: " << why
            << "\nusage: servesim-microbench --out DIR [--gpu NAME] [--quick] [--only gemm,streams,attention,launch,"
               "collectives,hostcopy] [--device N] [--reps N] [--decode-layouts HEADS:KV_HEADS:HEAD_DIM[:BLOCK],...]\n";
  return 2;
}

void write_device(const mb::Options& o, const cudaDeviceProp& prop, int visible) {
  mb::CsvOut dev(o.out_dir, servesim::calibration::raw::kDeviceFile, servesim::calibration::raw::kDeviceHeader);
  int runtime = 0, driver = 0, clock_khz = 0, mem_khz = 0, bus = 0;
  MB_CUDA(cudaRuntimeGetVersion(&runtime));
  MB_CUDA(cudaDriverGetVersion(&driver));
  MB_CUDA(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, o.device));
  MB_CUDA(cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, o.device));
  MB_CUDA(cudaDeviceGetAttribute(&bus, cudaDevAttrGlobalMemoryBusWidth, o.device));
  std::string name = prop.name;
  for (char& c : name)
    if (c == ',') c = ' ';
  dev.row("name", name);
  dev.row("sm_count", prop.multiProcessorCount);
  dev.row("memory_bytes", static_cast<unsigned long long>(prop.totalGlobalMem));
  dev.row("l2_bytes", mb::l2_bytes(o.device));
  dev.row("compute_capability", std::to_string(prop.major) + "." + std::to_string(prop.minor));
  dev.row("cuda_runtime", runtime);
  dev.row("driver", driver);
  dev.row("visible_gpus", visible);
  dev.row("clock_khz", clock_khz);
  dev.row("memory_clock_khz", mem_khz);
  dev.row("memory_bus_bits", bus);
  if (!o.gpu.empty()) dev.row("servesim_gpu", o.gpu);
}

}  // namespace

int main(int argc, char** argv) {
  mb::Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
      return argv[++i];
    };
    try {
      if (a == "--out") o.out_dir = value();
      else if (a == "--gpu") o.gpu = value();
      else if (a == "--quick") o.quick = true;
      else if (a == "--device") o.device = std::stoi(value());
      else if (a == "--reps") o.reps = std::max(3, std::stoi(value()));
      else if (a == "--only" || a == "--decode-layouts") {
        std::stringstream s(value());
        for (std::string b; std::getline(s, b, ',');) {
          if (a == "--only") o.only.push_back(b);
          else o.decode_layouts.push_back(servesim::calibration::plan::parse_decode_layout(b));
        }
      } else if (a == "--help" || a == "-h") {
        usage("CUDA microbenchmarks for servesim calibration");
        return 0;
      } else {
        return usage(("unknown argument " + a).c_str());
      }
    } catch (const std::exception& e) {
      return usage(e.what());
    }
  }
  if (o.out_dir.empty()) return usage("--out DIR is required");
  mkdir(o.out_dir.c_str(), 0755);

  int visible = 0;
  const cudaError_t count_status = cudaGetDeviceCount(&visible);
  if (count_status != cudaSuccess || visible == 0) {
    std::cerr << "servesim-microbench: no CUDA device is visible (cudaGetDeviceCount: "
              << cudaGetErrorString(count_status) << "); run this on a GPU machine\n";
    return 3;
  }
  if (o.device < 0 || o.device >= visible) return usage("--device out of range");
  cudaDeviceProp prop{};
  cudaError_t device_status = cudaSetDevice(o.device);
  if (device_status == cudaSuccess) device_status = cudaGetDeviceProperties(&prop, o.device);
  if (device_status != cudaSuccess) {
    std::cerr << "servesim-microbench: cannot use device " << o.device << ": " << cudaGetErrorString(device_status) << "\n";
    return 3;
  }
  std::cerr << "servesim-microbench on " << prop.name << " (" << prop.multiProcessorCount << " SMs, "
            << prop.totalGlobalMem / (1 << 20) << " MiB), " << visible << " visible GPU(s), writing " << o.out_dir
            << (o.quick ? " (quick)" : "") << "\n";
  int failures = 0;
  try {
    write_device(o, prop, visible);
  } catch (const std::exception& e) {
    std::cerr << "servesim-microbench: " << e.what() << "\n";
    return 4;
  }
  mb::CsvOut checks(o.out_dir, servesim::calibration::raw::kChecksFile, servesim::calibration::raw::kChecksHeader);

  auto bench = [&](const char* name, auto&& run) {
    if (!o.wants(name)) return;
    std::cerr << "  " << name << " ..." << std::flush;
    try {
      run();
      std::cerr << " done\n";
    } catch (const std::exception& e) {
      ++failures;
      std::cerr << " FAILED: " << e.what() << "\n";
      checks.row(std::string("bench_") + name, 0, 0);
      // Clear a launch error that is not sticky, so the next benchmark can run; a sticky one (the
      // context is lost) makes every later call fail, and each benchmark reports its own.
      const cudaError_t cleared = cudaGetLastError();
      if (cleared != cudaSuccess) std::cerr << "  (cleared: " << cudaGetErrorString(cleared) << ")\n";
    }
  };
  bench("streams", [&] {
    mb::check_elementwise(o, checks);
    mb::run_streams(o, prop);
  });
  bench("gemm", [&] { mb::run_gemm(o, prop); });
  bench("attention", [&] { mb::run_attention(o, prop, checks); });
  bench("launch", [&] { mb::run_launch(o); });
  bench("hostcopy", [&] { mb::run_host_copy(o); });
  bench("collectives", [&] { mb::run_collectives(o); });
  if (mb::cleanup_failed()) ++failures;
  std::cerr << (failures ? "some benchmarks failed (see above and checks.csv)\n" : "all benchmarks done\n");
  return failures ? 4 : 0;
}
