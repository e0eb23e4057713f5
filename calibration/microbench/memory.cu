// Memory-bound kernels: HBM read and copy, the elementwise kernels of a transformer block (RMSNorm,
// rotary embedding, SiLU-and-multiply, residual add, embedding gather) written the way serving
// engines write them (one block per row, 16-byte vector accesses), and pinned host<->device copies.
// Every buffer a timed call touches rotates over enough copies that its data was last touched 4 x L2
// ago (planning.h): in serving, the next layer's activations and weights are not in L2, and a
// kernel timed on the same small buffers again and again would report L2 bandwidth.
#include <cuda_fp16.h>

#include <cmath>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "common.cuh"

namespace mb {
namespace {

using raw_half = __half;
constexpr int kThreads = 256;

// Sum of a buffer of 16-byte words, so the compiler cannot drop the reads.
__global__ void read_kernel(const uint4* __restrict__ in, size_t n, unsigned* __restrict__ sink) {
  unsigned acc = 0;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const uint4 v = in[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x12345678u) *sink = acc;
}

__global__ void copy_kernel(const uint4* __restrict__ in, uint4* __restrict__ out, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    out[i] = in[i];
}

// RMSNorm of one row per block: out = x / rms(x) * w.
__global__ void rms_norm_kernel(const __half* __restrict__ x, const __half* __restrict__ w, __half* __restrict__ out,
                                int width, float eps) {
  const __half* row = x + static_cast<size_t>(blockIdx.x) * width;
  __half* orow = out + static_cast<size_t>(blockIdx.x) * width;
  float ss = 0;
  for (int i = threadIdx.x * 8; i < width; i += blockDim.x * 8) {
    const uint4 v = *reinterpret_cast<const uint4*>(row + i);
    const __half2* h = reinterpret_cast<const __half2*>(&v);
    for (int j = 0; j < 4; ++j) {
      const float2 f = __half22float2(h[j]);
      ss += f.x * f.x + f.y * f.y;
    }
  }
  __shared__ float partial[32];
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = ss;
  __syncthreads();
  if (threadIdx.x < 32) {
    float v = threadIdx.x < blockDim.x / 32 ? partial[threadIdx.x] : 0.f;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (threadIdx.x == 0) partial[0] = rsqrtf(v / width + eps);
  }
  __syncthreads();
  const float scale = partial[0];
  for (int i = threadIdx.x * 8; i < width; i += blockDim.x * 8) {
    uint4 v = *reinterpret_cast<const uint4*>(row + i);
    const uint4 wv = *reinterpret_cast<const uint4*>(w + i);
    __half2* h = reinterpret_cast<__half2*>(&v);
    const __half2* wh = reinterpret_cast<const __half2*>(&wv);
    for (int j = 0; j < 4; ++j) {
      const float2 f = __half22float2(h[j]), g = __half22float2(wh[j]);
      h[j] = __floats2half2_rn(f.x * scale * g.x, f.y * scale * g.y);
    }
    *reinterpret_cast<uint4*>(orow + i) = v;
  }
}

// Rotary embedding, neox style, in place on a row of width = heads x 128 (query and key heads
// side by side): each thread rotates one pair (i, i + 64) of one head.
__global__ void rope_kernel(__half* __restrict__ qk, const int* __restrict__ pos, int width) {
  constexpr int kHead = 128, kHalf = 64;
  __half* row = qk + static_cast<size_t>(blockIdx.x) * width;
  const float p = static_cast<float>(pos[blockIdx.x]);
  for (int t = threadIdx.x; t < width / 2; t += blockDim.x) {
    const int head = t / kHalf, i = t % kHalf;
    const float inv_freq = __powf(10000.f, -2.f * i / kHead);
    float s, c;
    __sincosf(p * inv_freq, &s, &c);
    __half* h = row + head * kHead;
    const float a = __half2float(h[i]), b = __half2float(h[i + kHalf]);
    h[i] = __float2half(a * c - b * s);
    h[i + kHalf] = __float2half(b * c + a * s);
  }
}

// out[r, i] = silu(gu[r, i]) * gu[r, width + i].
__global__ void silu_mul_kernel(const __half* __restrict__ gu, __half* __restrict__ out, int width) {
  const __half* g = gu + static_cast<size_t>(blockIdx.x) * 2 * width;
  const __half* u = g + width;
  __half* o = out + static_cast<size_t>(blockIdx.x) * width;
  for (int i = threadIdx.x * 8; i < width; i += blockDim.x * 8) {
    const uint4 gv = *reinterpret_cast<const uint4*>(g + i), uv = *reinterpret_cast<const uint4*>(u + i);
    uint4 ov;
    const __half2 *gh = reinterpret_cast<const __half2*>(&gv), *uh = reinterpret_cast<const __half2*>(&uv);
    __half2* oh = reinterpret_cast<__half2*>(&ov);
    for (int j = 0; j < 4; ++j) {
      const float2 a = __half22float2(gh[j]), b = __half22float2(uh[j]);
      oh[j] = __floats2half2_rn(a.x / (1.f + __expf(-a.x)) * b.x, a.y / (1.f + __expf(-a.y)) * b.y);
    }
    *reinterpret_cast<uint4*>(o + i) = ov;
  }
}

// x += residual, over 16-byte words.
__global__ void add_kernel(uint4* __restrict__ x, const uint4* __restrict__ residual, size_t words) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < words;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    uint4 a = x[i];
    const uint4 b = residual[i];
    __half2* ah = reinterpret_cast<__half2*>(&a);
    const __half2* bh = reinterpret_cast<const __half2*>(&b);
    for (int j = 0; j < 4; ++j) ah[j] = __hadd2(ah[j], bh[j]);
    x[i] = a;
  }
}

// out[r] = table[ids[r]].
__global__ void embedding_kernel(const int* __restrict__ ids, const uint4* __restrict__ table, uint4* __restrict__ out,
                                 int words_per_row) {
  const uint4* src = table + static_cast<size_t>(ids[blockIdx.x]) * words_per_row;
  uint4* dst = out + static_cast<size_t>(blockIdx.x) * words_per_row;
  for (int i = threadIdx.x; i < words_per_row; i += blockDim.x) dst[i] = src[i];
}

// ---- Reference kernels for the checks: one thread per element, float math. ----

__global__ void rms_norm_ref(const __half* x, const __half* w, float* out, int rows, int width, float eps) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  float ss = 0;
  for (int i = 0; i < width; ++i) ss += __half2float(x[r * width + i]) * __half2float(x[r * width + i]);
  const float s = 1.f / sqrtf(ss / width + eps);
  for (int i = 0; i < width; ++i) out[r * width + i] = __half2float(x[r * width + i]) * s * __half2float(w[i]);
}

__global__ void silu_mul_ref(const __half* gu, float* out, int rows, int width) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= rows * width) return;
  const int r = t / width, i = t % width;
  const float a = __half2float(gu[r * 2 * width + i]), b = __half2float(gu[r * 2 * width + width + i]);
  out[t] = a / (1.f + expf(-a)) * b;
}

int grid_for(size_t words, const cudaDeviceProp& prop) {
  return static_cast<int>(std::min<size_t>((words + kThreads - 1) / kThreads, prop.multiProcessorCount * 8));
}

// One call of an elementwise kernel on the buffers of rotation copy `call` (the buffer order of
// plan::elementwise_buffers).
void launch_elementwise(const std::string& kernel, const RotatedBuffers& b, uint64_t call, int rows, int width,
                        const cudaDeviceProp& prop, cudaStream_t s) {
  const size_t row_words = static_cast<size_t>(width) * sizeof(__half) / 16;
  if (kernel == "rms_norm") {
    rms_norm_kernel<<<rows, kThreads, 0, s>>>(b.ptr<__half>(0, call), b.ptr<__half>(1, call), b.ptr<__half>(2, call),
                                              width, 1e-5f);
    MB_CHECK_LAUNCH();
  } else if (kernel == "rope") {
    rope_kernel<<<rows, kThreads, 0, s>>>(b.ptr<__half>(0, call), b.ptr<int>(1, call), width);
    MB_CHECK_LAUNCH();
  } else if (kernel == "act") {
    silu_mul_kernel<<<rows, kThreads, 0, s>>>(b.ptr<__half>(0, call), b.ptr<__half>(1, call), width);
    MB_CHECK_LAUNCH();
  } else if (kernel == "add") {
    const size_t words = static_cast<size_t>(rows) * row_words;
    add_kernel<<<grid_for(words, prop), kThreads, 0, s>>>(b.ptr<uint4>(0, call), b.ptr<const uint4>(1, call), words);
    MB_CHECK_LAUNCH();
  } else if (kernel == "embedding") {
    embedding_kernel<<<rows, kThreads, 0, s>>>(b.ptr<const int>(0, call), b.ptr<const uint4>(1, call),
                                               b.ptr<uint4>(2, call), static_cast<int>(row_words));
    MB_CHECK_LAUNCH();
  } else {
    throw Failure("no elementwise kernel " + kernel);
  }
}

// Times `launch` (which uses rotation copy `call++`) after a whole rotation of untimed calls.
template <class Launch>
std::pair<double, int> time_rotated(const Options& o, cudaStream_t s, const plan::Rotation& r, Launch&& launch) {
  const double probe = time_median(s, 3, launch, r.copies);
  const int reps = reps_for(o, probe);
  return {time_median(s, reps, launch, r.copies), reps};
}

}  // namespace

void check_elementwise(const Options& /*o*/, CsvOut& checks) {
  Stream s;
  constexpr int rows = 7, width = 4096;
  DeviceBuffer<__half> x(rows * width), w(width), y(rows * width), gu(rows * 2 * width);
  DeviceBuffer<float> ref(rows * 2 * width);
  fill_random_half(x.ptr, x.count, 11, s);
  fill_random_half(w.ptr, w.count, 12, s);
  fill_random_half(gu.ptr, gu.count, 13, s);
  rms_norm_kernel<<<rows, kThreads, 0, s>>>(x.ptr, w.ptr, y.ptr, width, 1e-5f);
  MB_CHECK_LAUNCH();
  rms_norm_ref<<<1, 32, 0, s>>>(x.ptr, w.ptr, ref.ptr, rows, width, 1e-5f);
  MB_CHECK_LAUNCH();
  float e = max_abs_error(y.ptr, ref.ptr, static_cast<size_t>(rows) * width, s);
  checks.row("rms_norm", e, e < 0.02f ? 1 : 0);
  silu_mul_kernel<<<rows, kThreads, 0, s>>>(gu.ptr, y.ptr, width);
  MB_CHECK_LAUNCH();
  silu_mul_ref<<<(rows * width + 255) / 256, 256, 0, s>>>(gu.ptr, ref.ptr, rows, width);
  MB_CHECK_LAUNCH();
  e = max_abs_error(y.ptr, ref.ptr, static_cast<size_t>(rows) * width, s);
  checks.row("act", e, e < 0.01f ? 1 : 0);
}

void run_streams(const Options& o, const cudaDeviceProp& prop) {
  CsvOut out(o.out_dir, servesim::calibration::raw::kStreamFile, servesim::calibration::raw::kStreamHeader);
  Stream s;
  DeviceBuffer<unsigned> sink(1);
  int device = 0;
  MB_CUDA(cudaGetDevice(&device));
  const size_t l2 = l2_bytes(device);
  auto skip = [&](const std::string& what, const plan::Rotation& r) {
    std::cerr << " (" << what << " skipped: " << r.copies << " copies to keep it out of L2 need "
              << (r.arena_bytes() >> 20) << " MiB)";
  };

  // HBM streaming, 256 KiB .. 4 GiB (quick: 1 MiB .. 256 MiB), at most a quarter of the memory.
  for (size_t bytes : plan::stream_sizes(o.quick, prop.totalGlobalMem / 4)) {
    const size_t words = bytes / 16;
    for (const char* kernel : {"read", "copy"}) {
      const plan::Rotation r = plan::plan_rotation(plan::streaming_buffers(kernel, bytes), l2, rotation_budget());
      if (!r.fits) {
        skip(std::string(kernel) + " of " + std::to_string(bytes) + " bytes", r);
        continue;
      }
      RotatedBuffers b(r, 1, s);
      uint64_t call = 0;
      const bool copy = std::string(kernel) == "copy";
      const auto [t, reps] = time_rotated(o, s, r, [&] {
        if (copy) {
          copy_kernel<<<grid_for(words, prop), kThreads, 0, s>>>(b.ptr<const uint4>(0, call), b.ptr<uint4>(1, call), words);
          MB_CHECK_LAUNCH();
        } else {
          read_kernel<<<grid_for(words, prop), kThreads, 0, s>>>(b.ptr<const uint4>(0, call), words, sink.ptr);
          MB_CHECK_LAUNCH();
        }
        ++call;
      });
      out.row(kernel, 1, bytes, copy ? 2 * bytes : bytes, t, reps, 0);
    }
  }

  // The L2 read ceiling, measured on purpose (l2_resident = 1): one buffer of at most half the L2
  // read again and again stays in L2 after the first call. Not a serving condition (the fit keeps
  // it out of every curve); it shows what the rotation keeps out of every other row.
  for (size_t bytes = size_t{256} << 10; bytes <= l2 / 2; bytes *= 4) {
    const size_t words = bytes / 16;
    DeviceBuffer<uint4> a(words);
    fill_random_half(a.ptr, bytes / 2, 2, s);
    auto launch = [&] {
      read_kernel<<<grid_for(words, prop), kThreads, 0, s>>>(a.ptr, words, sink.ptr);
      MB_CHECK_LAUNCH();
    };
    const double probe = time_median(s, 3, launch, 3);
    const int reps = reps_for(o, probe);
    out.row("read", 1, bytes, bytes, time_median(s, reps, launch, 3), reps, 1);
  }

  // The block's elementwise kernels over rows x width (fp16), every buffer rotated.
  for (int width : plan::elementwise_widths())
    for (int rows : plan::elementwise_rows(o.quick))
      for (const std::string& kernel : plan::elementwise_kernels()) {
        const plan::Rotation r =
            plan::plan_rotation(plan::elementwise_buffers(kernel, rows, width), l2, rotation_budget());
        if (!r.fits) {
          skip(kernel + " of " + std::to_string(rows) + " x " + std::to_string(width), r);
          continue;
        }
        RotatedBuffers b(r, 3, s);
        if (const int index = plan::index_buffer(kernel); index >= 0) {
          std::vector<int> values(static_cast<size_t>(rows));
          for (int i = 0; i < rows; ++i)
            values[i] = kernel == "rope" ? i % 8192 : static_cast<int>(plan::embedding_id(i, rows));
          b.set_indices(static_cast<size_t>(index), values, s);
        }
        uint64_t call = 0;
        const auto [t, reps] =
            time_rotated(o, s, r, [&] { launch_elementwise(kernel, b, call++, rows, width, prop, s); });
        out.row(kernel, rows, width, plan::elementwise_moved_bytes(kernel, rows, width), t, reps, 0);
      }
}

void run_host_copy(const Options& o) {
  CsvOut out(o.out_dir, servesim::calibration::raw::kHostCopyFile, servesim::calibration::raw::kHostCopyHeader);
  Stream s;
  const size_t max_bytes = o.quick ? size_t{64} << 20 : size_t{1} << 30;
  PinnedBuffer host(max_bytes);
  DeviceBuffer<char> dev(max_bytes);
  for (size_t bytes = size_t{1} << 20; bytes <= max_bytes; bytes *= 4) {
    const int reps = reps_for(o, bytes / 20e9);
    const double h2d =
        time_median(s, reps, [&] { MB_CUDA(cudaMemcpyAsync(dev.ptr, host.ptr, bytes, cudaMemcpyHostToDevice, s)); });
    out.row("h2d", bytes, h2d, reps);
    const double d2h =
        time_median(s, reps, [&] { MB_CUDA(cudaMemcpyAsync(host.ptr, dev.ptr, bytes, cudaMemcpyDeviceToHost, s)); });
    out.row("d2h", bytes, d2h, reps);
  }
}

}  // namespace mb
