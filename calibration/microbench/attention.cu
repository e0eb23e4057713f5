// Attention, the project's own kernels (no cuDNN/FlashAttention dependency, so they build from the
// CUDA toolkit alone):
// - decode: one query token per sequence against a paged KV cache (vLLM's layout, 16-token pages),
//   split into 512-token partitions (flash-decoding) and reduced; one warp per key token, 8-byte
//   vector loads. Memory-bound: its efficiency over (batch, context) is what the profile records.
// - prefill: causal FlashAttention-2-style tiles on tensor cores through WMMA (64 queries x 32 keys
//   per step, online softmax). Engines run FlashAttention-2/3, which use the newer asynchronous
//   tensor-core paths; this kernel is slower than those, so the prefill efficiency it measures is
//   a lower bound (docs/calibration.md).
// Both are checked against plain reference kernels before they are timed (checks.csv).
#include <cuda_fp16.h>
#include <mma.h>

#include <cmath>
#include <vector>

#include "common.cuh"

namespace mb {
namespace {

constexpr int kHeadDim = 128;
constexpr int kBlockSize = 16;       // tokens per KV page
constexpr int kPartition = 512;      // tokens per decode partition

// ---- Decode -------------------------------------------------------------------------------------

// grid (kv_heads, batch, partitions), 128 threads. Writes per (sequence, query head, partition) the
// running max, the sum of exponentials and the unnormalised output. kGroup query heads share a KV
// head (a template parameter, so the per-head registers are not spilled).
template <int kGroup>
__global__ void decode_partial_kernel(const __half* __restrict__ q, const __half* __restrict__ k_cache,
                                      const __half* __restrict__ v_cache, const int* __restrict__ block_tables,
                                      const int* __restrict__ context_lens, int max_blocks, int heads, int kv_heads,
                                      int partitions, float* __restrict__ max_logits, float* __restrict__ exp_sums,
                                      float* __restrict__ partial_out) {
  const int kvh = blockIdx.x, seq = blockIdx.y, part = blockIdx.z;
  constexpr int group = kGroup;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int len = context_lens[seq];
  const int begin = part * kPartition, end = min(len, begin + kPartition);
  const float scale = rsqrtf(static_cast<float>(kHeadDim));

  float qr[kGroup][4], m[kGroup], l[kGroup], acc[kGroup][4];
#pragma unroll
  for (int g = 0; g < group; ++g) {
    const __half* qh = q + (static_cast<size_t>(seq) * heads + kvh * group + g) * kHeadDim + lane * 4;
    for (int j = 0; j < 4; ++j) {
      qr[g][j] = __half2float(qh[j]) * scale;
      acc[g][j] = 0.f;
    }
    m[g] = -INFINITY;
    l[g] = 0.f;
  }
  for (int t = begin + warp; t < end; t += 4) {
    const int page = block_tables[seq * max_blocks + t / kBlockSize];
    const size_t row = ((static_cast<size_t>(page) * kv_heads + kvh) * kBlockSize + t % kBlockSize) * kHeadDim;
    const uint2 kraw = *reinterpret_cast<const uint2*>(k_cache + row + lane * 4);
    const uint2 vraw = *reinterpret_cast<const uint2*>(v_cache + row + lane * 4);
    const __half2* kh = reinterpret_cast<const __half2*>(&kraw);
    const __half2* vh = reinterpret_cast<const __half2*>(&vraw);
    const float2 k01 = __half22float2(kh[0]), k23 = __half22float2(kh[1]);
    const float2 v01 = __half22float2(vh[0]), v23 = __half22float2(vh[1]);
#pragma unroll
    for (int g = 0; g < group; ++g) {
      float s = qr[g][0] * k01.x + qr[g][1] * k01.y + qr[g][2] * k23.x + qr[g][3] * k23.y;
      for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
      const float m_new = fmaxf(m[g], s);
      const float corr = __expf(m[g] - m_new), p = __expf(s - m_new);
      l[g] = l[g] * corr + p;
      acc[g][0] = acc[g][0] * corr + p * v01.x;
      acc[g][1] = acc[g][1] * corr + p * v01.y;
      acc[g][2] = acc[g][2] * corr + p * v23.x;
      acc[g][3] = acc[g][3] * corr + p * v23.y;
      m[g] = m_new;
    }
  }
  // Merge the four warps.
  __shared__ float sm_m[4][kGroup], sm_l[4][kGroup], sm_acc[4][kGroup][kHeadDim];
#pragma unroll
  for (int g = 0; g < group; ++g) {
    if (lane == 0) {
      sm_m[warp][g] = m[g];
      sm_l[warp][g] = l[g];
    }
    for (int j = 0; j < 4; ++j) sm_acc[warp][g][lane * 4 + j] = acc[g][j];
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < group * kHeadDim; idx += blockDim.x) {
    const int g = idx / kHeadDim, d = idx % kHeadDim;
    float mx = -INFINITY;
    for (int w = 0; w < 4; ++w) mx = fmaxf(mx, sm_m[w][g]);
    float sum = 0.f, out = 0.f;
    for (int w = 0; w < 4; ++w) {
      const float f = sm_m[w][g] == -INFINITY ? 0.f : __expf(sm_m[w][g] - mx);
      sum += sm_l[w][g] * f;
      out += sm_acc[w][g][d] * f;
    }
    const size_t slot = (static_cast<size_t>(seq) * heads + kvh * group + g) * partitions + part;
    partial_out[slot * kHeadDim + d] = out;
    if (d == 0) {
      max_logits[slot] = mx;
      exp_sums[slot] = sum;
    }
  }
}

// grid (heads, batch), 128 threads: one output dimension each.
__global__ void decode_reduce_kernel(const float* __restrict__ max_logits, const float* __restrict__ exp_sums,
                                     const float* __restrict__ partial_out, const int* __restrict__ context_lens,
                                     int heads, int partitions, __half* __restrict__ out) {
  const int h = blockIdx.x, seq = blockIdx.y, d = threadIdx.x;
  const int used = (context_lens[seq] + kPartition - 1) / kPartition;
  const size_t base = (static_cast<size_t>(seq) * heads + h) * partitions;
  float mx = -INFINITY;
  for (int p = 0; p < used; ++p) mx = fmaxf(mx, max_logits[base + p]);
  float sum = 0.f, o = 0.f;
  for (int p = 0; p < used; ++p) {
    const float f = max_logits[base + p] == -INFINITY ? 0.f : __expf(max_logits[base + p] - mx);
    sum += exp_sums[base + p] * f;
    o += partial_out[(base + p) * kHeadDim + d] * f;
  }
  out[(static_cast<size_t>(seq) * heads + h) * kHeadDim + d] = __float2half(o / sum);
}

// Reference: grid (heads, batch), 128 threads (one per dimension), every score recomputed.
__global__ void decode_reference_kernel(const __half* q, const __half* k_cache, const __half* v_cache,
                                        const int* block_tables, const int* context_lens, int max_blocks, int heads,
                                        int kv_heads, float* out) {
  const int h = blockIdx.x, seq = blockIdx.y, d = threadIdx.x;
  const int kvh = h / (heads / kv_heads), len = context_lens[seq];
  const __half* qh = q + (static_cast<size_t>(seq) * heads + h) * kHeadDim;
  auto row = [&](int t) {
    const int page = block_tables[seq * max_blocks + t / kBlockSize];
    return ((static_cast<size_t>(page) * kv_heads + kvh) * kBlockSize + t % kBlockSize) * kHeadDim;
  };
  float mx = -INFINITY;
  for (int t = 0; t < len; ++t) {
    float s = 0;
    for (int j = 0; j < kHeadDim; ++j) s += __half2float(qh[j]) * __half2float(k_cache[row(t) + j]);
    mx = fmaxf(mx, s / sqrtf(static_cast<float>(kHeadDim)));
  }
  float sum = 0, o = 0;
  for (int t = 0; t < len; ++t) {
    float s = 0;
    for (int j = 0; j < kHeadDim; ++j) s += __half2float(qh[j]) * __half2float(k_cache[row(t) + j]);
    const float p = expf(s / sqrtf(static_cast<float>(kHeadDim)) - mx);
    sum += p;
    o += p * __half2float(v_cache[row(t) + d]);
  }
  out[(static_cast<size_t>(seq) * heads + h) * kHeadDim + d] = o / sum;
}

struct DecodeCase {
  int batch, context, heads, kv_heads;
  DeviceBuffer<__half> q, k, v, out;
  DeviceBuffer<int> tables, lens;
  DeviceBuffer<float> max_logits, exp_sums, partial;
  int max_blocks, partitions;
  DecodeCase(int b, int ctx, int h, int kvh, cudaStream_t s)
      : batch(b), context(ctx), heads(h), kv_heads(kvh),
        q(static_cast<size_t>(b) * h * kHeadDim),
        k(static_cast<size_t>(b) * ((ctx + kBlockSize - 1) / kBlockSize) * kvh * kBlockSize * kHeadDim),
        v(k.count), out(q.count),
        tables(static_cast<size_t>(b) * ((ctx + kBlockSize - 1) / kBlockSize)), lens(b),
        max_logits(static_cast<size_t>(b) * h * ((ctx + kPartition - 1) / kPartition)), exp_sums(max_logits.count),
        partial(max_logits.count * kHeadDim) {
    max_blocks = (ctx + kBlockSize - 1) / kBlockSize;
    partitions = (ctx + kPartition - 1) / kPartition;
    fill_random_half(q.ptr, q.count, 21, s);
    fill_random_half(k.ptr, k.count, 22, s);
    fill_random_half(v.ptr, v.count, 23, s);
    // Pages of the sequences interleaved (page i of sequence b is page i * batch + b), as an
    // allocator that hands out pages in arrival order scatters them.
    std::vector<int> t(tables.count), l(b, ctx);
    for (int sq = 0; sq < b; ++sq)
      for (int i = 0; i < max_blocks; ++i) t[sq * max_blocks + i] = i * b + sq;
    MB_CUDA(cudaMemcpyAsync(tables.ptr, t.data(), t.size() * sizeof(int), cudaMemcpyHostToDevice, s));
    MB_CUDA(cudaMemcpyAsync(lens.ptr, l.data(), l.size() * sizeof(int), cudaMemcpyHostToDevice, s));
    MB_CUDA(cudaStreamSynchronize(s));
  }
  void launch(cudaStream_t s) {
    const dim3 grid(kv_heads, batch, partitions);
    auto run = [&](auto kernel) {
      kernel<<<grid, 128, 0, s>>>(q.ptr, k.ptr, v.ptr, tables.ptr, lens.ptr, max_blocks, heads, kv_heads, partitions,
                                  max_logits.ptr, exp_sums.ptr, partial.ptr);
    };
    switch (heads / kv_heads) {
      case 1: run(decode_partial_kernel<1>); break;
      case 2: run(decode_partial_kernel<2>); break;
      case 4: run(decode_partial_kernel<4>); break;
      case 8: run(decode_partial_kernel<8>); break;
      default: throw Failure("decode attention: query heads per KV head must be 1, 2, 4 or 8");
    }
    decode_reduce_kernel<<<dim3(heads, batch), kHeadDim, 0, s>>>(max_logits.ptr, exp_sums.ptr, partial.ptr, lens.ptr,
                                                                heads, partitions, out.ptr);
  }
  double kv_bytes() const { return 2.0 * batch * static_cast<double>(context) * kv_heads * kHeadDim * 2; }
};

// ---- Prefill ------------------------------------------------------------------------------------

constexpr int kQTile = 64, kKTile = 32, kLd = kHeadDim + 8;  // padded rows against bank conflicts

// grid (ceil(seq / 64), heads, batch), 128 threads; Q [batch, seq, heads, 128], K and V
// [batch, seq, kv_heads, 128], out like Q.
__global__ void prefill_kernel(const __half* __restrict__ q, const __half* __restrict__ k, const __half* __restrict__ v,
                               __half* __restrict__ out, int seq, int heads, int kv_heads) {
  using namespace nvcuda;
  extern __shared__ __align__(128) unsigned char smem[];
  __half* qs = reinterpret_cast<__half*>(smem);                 // [64][kLd]
  __half* ks = qs + kQTile * kLd;                               // [32][kLd]
  __half* vs = ks + kKTile * kLd;                               // [32][kLd]
  float* ss = reinterpret_cast<float*>(vs + kKTile * kLd);      // [4][16][32]
  __half* ps = reinterpret_cast<__half*>(ss + 4 * 16 * kKTile); // [4][16][32]
  float* os = reinterpret_cast<float*>(ps + 4 * 16 * kKTile);   // [4][16][128]
  float* stat = os + 4 * 16 * kHeadDim;                         // [4][3][16]: m, l, corr

  const int q0 = blockIdx.x * kQTile, h = blockIdx.y, b = blockIdx.z;
  const int kvh = h / (heads / kv_heads);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const float scale = rsqrtf(static_cast<float>(kHeadDim));
  const size_t q_stride = static_cast<size_t>(heads) * kHeadDim, kv_stride = static_cast<size_t>(kv_heads) * kHeadDim;

  for (int i = threadIdx.x; i < kQTile * (kHeadDim / 8); i += blockDim.x) {
    const int r = i / (kHeadDim / 8), c = (i % (kHeadDim / 8)) * 8;
    uint4 val = make_uint4(0, 0, 0, 0);
    if (q0 + r < seq) val = *reinterpret_cast<const uint4*>(q + (static_cast<size_t>(b) * seq + q0 + r) * q_stride + h * kHeadDim + c);
    *reinterpret_cast<uint4*>(qs + r * kLd + c) = val;
  }
  float* my_s = ss + warp * 16 * kKTile;
  __half* my_p = ps + warp * 16 * kKTile;
  float* my_o = os + warp * 16 * kHeadDim;
  float* my_m = stat + warp * 48;
  float* my_l = my_m + 16;
  float* my_c = my_m + 32;
  for (int i = lane; i < 16 * kHeadDim; i += 32) my_o[i] = 0.f;
  if (lane < 16) {
    my_m[lane] = -INFINITY;
    my_l[lane] = 0.f;
  }
  const int last_key = min(seq, q0 + kQTile) - 1;
  for (int k0 = 0; k0 <= last_key; k0 += kKTile) {
    __syncthreads();  // everyone is done with the previous K and V tiles
    for (int i = threadIdx.x; i < kKTile * (kHeadDim / 8); i += blockDim.x) {
      const int r = i / (kHeadDim / 8), c = (i % (kHeadDim / 8)) * 8;
      uint4 kv = make_uint4(0, 0, 0, 0), vv = kv;
      if (k0 + r < seq) {
        const size_t off = (static_cast<size_t>(b) * seq + k0 + r) * kv_stride + kvh * kHeadDim + c;
        kv = *reinterpret_cast<const uint4*>(k + off);
        vv = *reinterpret_cast<const uint4*>(v + off);
      }
      *reinterpret_cast<uint4*>(ks + r * kLd + c) = kv;
      *reinterpret_cast<uint4*>(vs + r * kLd + c) = vv;
    }
    __syncthreads();
    // S = Q_w K^T (16 x 32).
    for (int n = 0; n < kKTile / 16; ++n) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::fill_fragment(acc, 0.f);
      for (int kk = 0; kk < kHeadDim / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> bk;
        wmma::load_matrix_sync(a, qs + warp * 16 * kLd + kk * 16, kLd);
        wmma::load_matrix_sync(bk, ks + n * 16 * kLd + kk * 16, kLd);
        wmma::mma_sync(acc, a, bk, acc);
      }
      wmma::store_matrix_sync(my_s + n * 16, acc, kKTile, wmma::mem_row_major);
    }
    __syncwarp();
    // Online softmax: two lanes per row, 16 columns each.
    {
      const int row = lane >> 1, half = lane & 1;
      const int qi = q0 + warp * 16 + row;
      float sv[16], mx = -INFINITY;
      for (int c = 0; c < 16; ++c) {
        const int key = k0 + half * 16 + c;
        const float s = (key > qi || key >= seq) ? -INFINITY : my_s[row * kKTile + half * 16 + c] * scale;
        sv[c] = s;
        mx = fmaxf(mx, s);
      }
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      const float m_old = my_m[row];
      const float m_new = fmaxf(m_old, mx);
      float sum = 0.f;
      for (int c = 0; c < 16; ++c) {
        const float p = sv[c] == -INFINITY ? 0.f : __expf(sv[c] - m_new);
        my_p[row * kKTile + half * 16 + c] = __float2half(p);
        sum += p;
      }
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      const float corr = m_old == -INFINITY ? (m_new == -INFINITY ? 1.f : 0.f) : __expf(m_old - m_new);
      __syncwarp();
      if (half == 0) {
        my_l[row] = my_l[row] * corr + sum;
        my_m[row] = m_new;
        my_c[row] = corr;
      }
    }
    __syncwarp();
    for (int i = lane; i < 16 * kHeadDim; i += 32) my_o[i] *= my_c[i / kHeadDim];
    __syncwarp();
    // O += P V (16 x 128).
    for (int d = 0; d < kHeadDim / 16; ++d) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::load_matrix_sync(acc, my_o + d * 16, kHeadDim, wmma::mem_row_major);
      for (int kk = 0; kk < kKTile / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> bv;
        wmma::load_matrix_sync(a, my_p + kk * 16, kKTile);
        wmma::load_matrix_sync(bv, vs + kk * 16 * kLd + d * 16, kLd);
        wmma::mma_sync(acc, a, bv, acc);
      }
      wmma::store_matrix_sync(my_o + d * 16, acc, kHeadDim, wmma::mem_row_major);
    }
    __syncwarp();
  }
  for (int i = lane; i < 16 * kHeadDim; i += 32) {
    const int row = i / kHeadDim, d = i % kHeadDim;
    const int qi = q0 + warp * 16 + row;
    if (qi < seq)
      out[(static_cast<size_t>(b) * seq + qi) * q_stride + h * kHeadDim + d] = __float2half(my_o[i] / my_l[row]);
  }
}

constexpr size_t kPrefillSmem = (kQTile + 2 * kKTile) * kLd * sizeof(__half) + 4 * 16 * kKTile * sizeof(float) +
                                4 * 16 * kKTile * sizeof(__half) + 4 * 16 * kHeadDim * sizeof(float) + 4 * 48 * sizeof(float);

// Reference: grid (seq, heads, batch), 128 threads (one per dimension).
__global__ void prefill_reference_kernel(const __half* q, const __half* k, const __half* v, int seq, int heads,
                                         int kv_heads, float* out) {
  const int qi = blockIdx.x, h = blockIdx.y, b = blockIdx.z, d = threadIdx.x;
  const int kvh = h / (heads / kv_heads);
  const __half* qh = q + (static_cast<size_t>(b) * seq + qi) * heads * kHeadDim + h * kHeadDim;
  auto krow = [&](int t) { return (static_cast<size_t>(b) * seq + t) * kv_heads * kHeadDim + kvh * kHeadDim; };
  float mx = -INFINITY;
  for (int t = 0; t <= qi; ++t) {
    float s = 0;
    for (int j = 0; j < kHeadDim; ++j) s += __half2float(qh[j]) * __half2float(k[krow(t) + j]);
    mx = fmaxf(mx, s / sqrtf(static_cast<float>(kHeadDim)));
  }
  float sum = 0, o = 0;
  for (int t = 0; t <= qi; ++t) {
    float s = 0;
    for (int j = 0; j < kHeadDim; ++j) s += __half2float(qh[j]) * __half2float(k[krow(t) + j]);
    const float p = expf(s / sqrtf(static_cast<float>(kHeadDim)) - mx);
    sum += p;
    o += p * __half2float(v[krow(t) + d]);
  }
  out[((static_cast<size_t>(b) * seq + qi) * heads + h) * kHeadDim + d] = o / sum;
}

}  // namespace

void run_attention(const Options& o, const cudaDeviceProp& prop, CsvOut& checks) {
  cudaStream_t s = nullptr;
  MB_CUDA(cudaStreamCreate(&s));
  MB_CUDA(cudaFuncSetAttribute(prefill_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(kPrefillSmem)));
  constexpr float kTolerance = 0.02f;  // fp16 outputs of values of order 0.5

  // Correctness first: a wrong kernel's timings are not written.
  bool decode_ok = false, prefill_ok = false;
  {
    DecodeCase c(3, 1100, 32, 8, s);  // three partitions, a partial last page
    DeviceBuffer<float> ref(c.q.count);
    c.launch(s);
    decode_reference_kernel<<<dim3(c.heads, c.batch), kHeadDim, 0, s>>>(c.q.ptr, c.k.ptr, c.v.ptr, c.tables.ptr,
                                                                        c.lens.ptr, c.max_blocks, c.heads, c.kv_heads,
                                                                        ref.ptr);
    MB_CUDA(cudaGetLastError());
    const float e = max_abs_error(c.out.ptr, ref.ptr, c.q.count, s);
    decode_ok = e < kTolerance;
    checks.row("attention_decode", e, decode_ok ? 1 : 0);
  }
  {
    constexpr int batch = 2, seq = 150, heads = 8, kv_heads = 2;
    DeviceBuffer<__half> q(static_cast<size_t>(batch) * seq * heads * kHeadDim),
        k(static_cast<size_t>(batch) * seq * kv_heads * kHeadDim), v(k.count), out(q.count);
    DeviceBuffer<float> ref(q.count);
    fill_random_half(q.ptr, q.count, 31, s);
    fill_random_half(k.ptr, k.count, 32, s);
    fill_random_half(v.ptr, v.count, 33, s);
    prefill_kernel<<<dim3((seq + kQTile - 1) / kQTile, heads, batch), 128, kPrefillSmem, s>>>(q.ptr, k.ptr, v.ptr,
                                                                                            out.ptr, seq, heads, kv_heads);
    prefill_reference_kernel<<<dim3(seq, heads, batch), kHeadDim, 0, s>>>(q.ptr, k.ptr, v.ptr, seq, heads, kv_heads,
                                                                         ref.ptr);
    MB_CUDA(cudaGetLastError());
    const float e = max_abs_error(out.ptr, ref.ptr, q.count, s);
    prefill_ok = e < kTolerance;
    checks.row("attention_prefill", e, prefill_ok ? 1 : 0);
  }

  // Decode: batch x context grid at Llama-3-8B's 32 heads in 8 groups, one layer.
  if (decode_ok) {
    CsvOut out(o.out_dir, servesim::calibration::raw::kDecodeAttentionFile,
               servesim::calibration::raw::kDecodeAttentionHeader);
    const std::vector<int> batches = o.quick ? std::vector<int>{1, 32} : std::vector<int>{1, 4, 16, 64, 256};
    const std::vector<int> contexts =
        o.quick ? std::vector<int>{256, 4096} : std::vector<int>{128, 512, 2048, 8192, 32768};
    const double budget = std::min(16.0 * (1 << 30), prop.totalGlobalMem / 4.0);
    for (int b : batches)
      for (int ctx : contexts) {
        if (2.0 * b * static_cast<double>(ctx) * 8 * kHeadDim * 2 > budget) continue;  // K and V of 8 KV heads
        DecodeCase c(b, ctx, 32, 8, s);
        const double probe = time_median(s, 3, [&] { c.launch(s); });
        const int reps = reps_for(o, probe);
        const double t = time_median(s, reps, [&] { c.launch(s); });
        out.row(b, ctx, c.heads, c.kv_heads, kHeadDim, kBlockSize, c.kv_bytes(), t, reps);
      }
  }
  // Prefill: sequence lengths at about 16k tokens per call, 32 heads in 8 groups.
  if (prefill_ok) {
    CsvOut out(o.out_dir, servesim::calibration::raw::kPrefillAttentionFile,
               servesim::calibration::raw::kPrefillAttentionHeader);
    const std::vector<int> seqs = o.quick ? std::vector<int>{256, 2048} : std::vector<int>{128, 256, 512, 1024, 2048, 4096, 8192, 16384};
    constexpr int heads = 32, kv_heads = 8;
    for (int seq : seqs) {
      const int batch = std::max(1, 16384 / seq);
      DeviceBuffer<__half> q(static_cast<size_t>(batch) * seq * heads * kHeadDim),
          k(static_cast<size_t>(batch) * seq * kv_heads * kHeadDim), v(k.count), outb(q.count);
      fill_random_half(q.ptr, q.count, 41, s);
      fill_random_half(k.ptr, k.count, 42, s);
      fill_random_half(v.ptr, v.count, 43, s);
      auto launch = [&] {
        prefill_kernel<<<dim3((seq + kQTile - 1) / kQTile, heads, batch), 128, kPrefillSmem, s>>>(
            q.ptr, k.ptr, v.ptr, outb.ptr, seq, heads, kv_heads);
      };
      const double probe = time_median(s, 3, launch);
      const int reps = reps_for(o, probe);
      const double t = time_median(s, reps, launch);
      const double flops = 4.0 * kHeadDim * heads * batch * (static_cast<double>(seq) * (seq + 1) / 2.0);
      out.row(batch, seq, heads, kv_heads, kHeadDim, flops, t, reps);
    }
  }
  MB_CUDA(cudaGetLastError());
  MB_CUDA(cudaStreamDestroy(s));
}

}  // namespace mb
