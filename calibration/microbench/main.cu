// servesim-microbench: model-free CUDA microbenchmarks whose raw samples `servesim fit
// --from-microbench` turns into a calibration profile. Usage:
//   servesim-microbench --out DIR [--gpu NAME] [--quick] [--only gemm,streams,...] [--device N]
// Exit codes: 0 all benchmarks ran, 3 no CUDA device, 4 some benchmark failed (the others' files are
// complete; checks.csv says which), 2 usage error.
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <sys/stat.h>

#include <cstring>
#include <iostream>
#include <sstream>

#include "common.cuh"

namespace mb {

__global__ void spin_kernel(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

void spin(cudaStream_t stream, double ns) {
  int device = 0, khz = 0;
  MB_CUDA(cudaGetDevice(&device));
  MB_CUDA(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, device));
  spin_kernel<<<1, 1, 0, stream>>>(static_cast<long long>(ns * 1e-6 * khz));
  MB_CUDA(cudaGetLastError());
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
  MB_CUDA(cudaGetLastError());
}
void fill_random_bf16(void* ptr, size_t n, unsigned seed, cudaStream_t s) {
  fill_kernel<<<1024, 256, 0, s>>>(static_cast<__nv_bfloat16*>(ptr), n, seed, ToBf16{});
  MB_CUDA(cudaGetLastError());
}
void fill_random_fp8(void* ptr, size_t n, unsigned seed, cudaStream_t s) {
  fill_kernel<<<1024, 256, 0, s>>>(static_cast<__nv_fp8_e4m3*>(ptr), n, seed, ToFp8{});
  MB_CUDA(cudaGetLastError());
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
  MB_CUDA(cudaGetLastError());
  float e = 0;
  MB_CUDA(cudaMemcpyAsync(&e, err.ptr, sizeof e, cudaMemcpyDeviceToHost, stream));
  MB_CUDA(cudaStreamSynchronize(stream));
  return e;
}

int rotation_count(size_t bytes, size_t l2_bytes) {
  if (bytes == 0) return 1;
  const size_t copies = (2 * l2_bytes + bytes - 1) / bytes;
  return static_cast<int>(std::max<size_t>(1, std::min<size_t>(64, copies)));
}

}  // namespace mb

namespace {

int usage(const char* why) {
  std::cerr << "servesim-microbench: " << why
            << "\nusage: servesim-microbench --out DIR [--gpu NAME] [--quick] [--only gemm,streams,attention,launch,"
               "collectives,hostcopy] [--device N] [--reps N]\n";
  return 2;
}

void write_device(const mb::Options& o, const cudaDeviceProp& prop, int visible) {
  mb::CsvOut dev(o.out_dir, servesim::calibration::raw::kDeviceFile, servesim::calibration::raw::kDeviceHeader);
  int runtime = 0, driver = 0, clock_khz = 0, mem_khz = 0, bus = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, o.device);
  cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, o.device);
  cudaDeviceGetAttribute(&bus, cudaDevAttrGlobalMemoryBusWidth, o.device);
  std::string name = prop.name;
  for (char& c : name)
    if (c == ',') c = ' ';
  dev.row("name", name);
  dev.row("sm_count", prop.multiProcessorCount);
  dev.row("memory_bytes", static_cast<unsigned long long>(prop.totalGlobalMem));
  dev.row("l2_bytes", prop.l2CacheSize);
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
      else if (a == "--only") {
        std::stringstream s(value());
        for (std::string b; std::getline(s, b, ',');) o.only.push_back(b);
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
  if (cudaGetDeviceCount(&visible) != cudaSuccess || visible == 0) {
    std::cerr << "servesim-microbench: no CUDA device is visible (cudaGetDeviceCount: "
              << cudaGetErrorString(cudaGetDeviceCount(&visible)) << "); run this on a GPU machine\n";
    return 3;
  }
  if (o.device < 0 || o.device >= visible) return usage("--device out of range");
  cudaDeviceProp prop{};
  if (cudaSetDevice(o.device) != cudaSuccess || cudaGetDeviceProperties(&prop, o.device) != cudaSuccess) {
    std::cerr << "servesim-microbench: cannot use device " << o.device << "\n";
    return 3;
  }
  std::cerr << "servesim-microbench on " << prop.name << " (" << prop.multiProcessorCount << " SMs, "
            << prop.totalGlobalMem / (1 << 20) << " MiB), " << visible << " visible GPU(s), writing " << o.out_dir
            << (o.quick ? " (quick)" : "") << "\n";
  write_device(o, prop, visible);
  mb::CsvOut checks(o.out_dir, servesim::calibration::raw::kChecksFile, servesim::calibration::raw::kChecksHeader);

  int failures = 0;
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
      cudaGetLastError();  // clear a sticky launch error so the next benchmark can run
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
  std::cerr << (failures ? "some benchmarks failed (see above and checks.csv)\n" : "all benchmarks done\n");
  return failures ? 4 : 0;
}
