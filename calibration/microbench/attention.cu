// Attention, the project's own kernels (no cuDNN/FlashAttention dependency, so they build from the
// CUDA toolkit alone):
// - decode: one query token per sequence against a paged KV cache (vLLM's layout), split into
//   512-token partitions (flash-decoding) and reduced; one warp per key token, one vector load per
//   lane. Memory-bound: its efficiency over (batch, context) is what the profile records, for each
//   head layout (query heads, KV heads, head_dim, page size on one GPU) of the models the cost
//   model is applied to (planning.h), because the parallelism a paged decode kernel finds is its
//   KV heads x sequences x partitions and its arithmetic per byte grows with the query heads per
//   KV head. The profile keys the tables by layout. MLA's absorbed decode (16-128 query heads on
//   one 576-wide latent, 30-240 FLOP/byte) needs tensor cores to be memory-bound, which this
//   CUDA-core kernel has not: it is not measured here.
// - prefill: causal FlashAttention-2-style tiles on tensor cores through WMMA (64 queries x 32 keys
//   per step, online softmax). Engines run FlashAttention-2/3, which use the newer asynchronous
//   tensor-core paths; this kernel is slower than those, so the prefill efficiency it measures is
//   a lower bound (docs/calibration.md).
// Both are checked against plain reference kernels before they are timed (checks.csv).
#include <cuda_fp16.h>
#include <mma.h>

#include <cmath>
#include <iostream>
#include <string>
#include <vector>

#include "common.cuh"

namespace mb {
namespace {

constexpr int kHeadDim = 128;         // the prefill kernel's head size
constexpr int kPartition = 512;      // tokens per decode partition
constexpr int kDecodeWarps = 4;      // warps per decode block, each on every fourth key

// ---- Decode -------------------------------------------------------------------------------------

// What the decode kernels read and write. The caches are pages of [kv_heads][block_size][head_dim]
// (vLLM's layout); tables[seq * max_blocks + i] is the page holding tokens i x block_size ... of
// sequence seq.
struct DecodeArgs {
  const __half* q;        // [batch, heads, head_dim]
  const __half* k_cache;
  const __half* v_cache;
  const int* tables;      // [batch, max_blocks]
  const int* lens;        // [batch]
  int max_blocks, block_size, heads, kv_heads, head_dim, partitions;
  float* max_logits;      // [batch, heads, partitions]
  float* exp_sums;        // [batch, heads, partitions]
  float* partial;         // [batch, heads, partitions, head_dim]
};

// kPer consecutive fp16 values as floats, in one vector load (4, 8 or 16 bytes).
template <int kPer>
__device__ inline void load_halves(const __half* p, float* out) {
  if constexpr (kPer == 2) {
    const float2 f = __half22float2(*reinterpret_cast<const __half2*>(p));
    out[0] = f.x;
    out[1] = f.y;
  } else if constexpr (kPer == 4) {
    const uint2 raw = *reinterpret_cast<const uint2*>(p);
    const __half2* h = reinterpret_cast<const __half2*>(&raw);
    for (int j = 0; j < 2; ++j) {
      const float2 f = __half22float2(h[j]);
      out[2 * j] = f.x;
      out[2 * j + 1] = f.y;
    }
  } else {
    static_assert(kPer == 8, "head_dim must be 64, 128 or 256");
    const uint4 raw = *reinterpret_cast<const uint4*>(p);
    const __half2* h = reinterpret_cast<const __half2*>(&raw);
    for (int j = 0; j < 4; ++j) {
      const float2 f = __half22float2(h[j]);
      out[2 * j] = f.x;
      out[2 * j + 1] = f.y;
    }
  }
}

// grid (kv_heads, batch, partitions), 128 threads. Writes per (sequence, query head, partition) the
// running max, the sum of exponentials and the unnormalised output. kGroup query heads share a KV
// head and kHeadDim is the head size, both template parameters so the per-head registers are not
// spilled; each lane holds kHeadDim / 32 elements of a key.
template <int kGroup, int kHeadDim>
__global__ void decode_partial_kernel(DecodeArgs a) {
  constexpr int kPer = kHeadDim / 32;
  const int kvh = blockIdx.x, seq = blockIdx.y, part = blockIdx.z;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int len = a.lens[seq];
  const int begin = part * kPartition, end = min(len, begin + kPartition);
  const float scale = rsqrtf(static_cast<float>(kHeadDim));

  float qr[kGroup][kPer], m[kGroup], l[kGroup], acc[kGroup][kPer];
#pragma unroll
  for (int g = 0; g < kGroup; ++g) {
    const __half* qh = a.q + (static_cast<size_t>(seq) * a.heads + kvh * kGroup + g) * kHeadDim + lane * kPer;
    load_halves<kPer>(qh, qr[g]);
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      qr[g][j] *= scale;
      acc[g][j] = 0.f;
    }
    m[g] = -INFINITY;
    l[g] = 0.f;
  }
  for (int t = begin + warp; t < end; t += kDecodeWarps) {
    const int page = a.tables[seq * a.max_blocks + t / a.block_size];
    const size_t row =
        ((static_cast<size_t>(page) * a.kv_heads + kvh) * a.block_size + t % a.block_size) * kHeadDim + lane * kPer;
    float kf[kPer], vf[kPer];
    load_halves<kPer>(a.k_cache + row, kf);
    load_halves<kPer>(a.v_cache + row, vf);
#pragma unroll
    for (int g = 0; g < kGroup; ++g) {
      float s = 0.f;
#pragma unroll
      for (int j = 0; j < kPer; ++j) s += qr[g][j] * kf[j];
      for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
      const float m_new = fmaxf(m[g], s);
      const float corr = __expf(m[g] - m_new), p = __expf(s - m_new);
      l[g] = l[g] * corr + p;
#pragma unroll
      for (int j = 0; j < kPer; ++j) acc[g][j] = acc[g][j] * corr + p * vf[j];
      m[g] = m_new;
    }
  }
  // Merge the warps.
  __shared__ float sm_m[kDecodeWarps][kGroup], sm_l[kDecodeWarps][kGroup], sm_acc[kDecodeWarps][kGroup][kHeadDim];
#pragma unroll
  for (int g = 0; g < kGroup; ++g) {
    if (lane == 0) {
      sm_m[warp][g] = m[g];
      sm_l[warp][g] = l[g];
    }
#pragma unroll
    for (int j = 0; j < kPer; ++j) sm_acc[warp][g][lane * kPer + j] = acc[g][j];
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < kGroup * kHeadDim; idx += blockDim.x) {
    const int g = idx / kHeadDim, d = idx % kHeadDim;
    float mx = -INFINITY;
    for (int w = 0; w < kDecodeWarps; ++w) mx = fmaxf(mx, sm_m[w][g]);
    float sum = 0.f, out = 0.f;
    for (int w = 0; w < kDecodeWarps; ++w) {
      const float f = sm_m[w][g] == -INFINITY ? 0.f : __expf(sm_m[w][g] - mx);
      sum += sm_l[w][g] * f;
      out += sm_acc[w][g][d] * f;
    }
    const size_t slot = (static_cast<size_t>(seq) * a.heads + kvh * kGroup + g) * a.partitions + part;
    a.partial[slot * kHeadDim + d] = out;
    if (d == 0) {
      a.max_logits[slot] = mx;
      a.exp_sums[slot] = sum;
    }
  }
}

// grid (heads, batch), head_dim threads: one output dimension each.
__global__ void decode_reduce_kernel(DecodeArgs a, __half* __restrict__ out) {
  const int h = blockIdx.x, seq = blockIdx.y, d = threadIdx.x;
  const int used = (a.lens[seq] + kPartition - 1) / kPartition;
  const size_t base = (static_cast<size_t>(seq) * a.heads + h) * a.partitions;
  float mx = -INFINITY;
  for (int p = 0; p < used; ++p) mx = fmaxf(mx, a.max_logits[base + p]);
  float sum = 0.f, o = 0.f;
  for (int p = 0; p < used; ++p) {
    const float f = a.max_logits[base + p] == -INFINITY ? 0.f : __expf(a.max_logits[base + p] - mx);
    sum += a.exp_sums[base + p] * f;
    o += a.partial[(base + p) * a.head_dim + d] * f;
  }
  out[(static_cast<size_t>(seq) * a.heads + h) * a.head_dim + d] = __float2half(o / sum);
}

// Reference: grid (heads, batch), head_dim threads (one per dimension), every score recomputed.
__global__ void decode_reference_kernel(DecodeArgs a, float* out) {
  const int h = blockIdx.x, seq = blockIdx.y, d = threadIdx.x;
  const int dim = a.head_dim;
  const int kvh = h / (a.heads / a.kv_heads), len = a.lens[seq];
  const __half* qh = a.q + (static_cast<size_t>(seq) * a.heads + h) * dim;
  auto row = [&](int t) {
    const int page = a.tables[seq * a.max_blocks + t / a.block_size];
    return ((static_cast<size_t>(page) * a.kv_heads + kvh) * a.block_size + t % a.block_size) * dim;
  };
  const float scale = 1.f / sqrtf(static_cast<float>(dim));
  float mx = -INFINITY;
  for (int t = 0; t < len; ++t) {
    float s = 0;
    for (int j = 0; j < dim; ++j) s += __half2float(qh[j]) * __half2float(a.k_cache[row(t) + j]);
    mx = fmaxf(mx, s * scale);
  }
  float sum = 0, o = 0;
  for (int t = 0; t < len; ++t) {
    float s = 0;
    for (int j = 0; j < dim; ++j) s += __half2float(qh[j]) * __half2float(a.k_cache[row(t) + j]);
    const float p = expf(s * scale - mx);
    sum += p;
    o += p * __half2float(a.v_cache[row(t) + d]);
  }
  out[(static_cast<size_t>(seq) * a.heads + h) * dim + d] = o / sum;
}

template <int kGroup, int kHeadDim>
void launch_partial(const DecodeArgs& a, int batch, cudaStream_t s) {
  decode_partial_kernel<kGroup, kHeadDim><<<dim3(a.kv_heads, batch, a.partitions), 32 * kDecodeWarps, 0, s>>>(a);
  MB_CHECK_LAUNCH();
}

template <int kHeadDim>
void launch_partial_for_group(int group, const DecodeArgs& a, int batch, cudaStream_t s) {
  switch (group) {
    case 1: launch_partial<1, kHeadDim>(a, batch, s); break;
    case 2: launch_partial<2, kHeadDim>(a, batch, s); break;
    case 3: launch_partial<3, kHeadDim>(a, batch, s); break;
    case 4: launch_partial<4, kHeadDim>(a, batch, s); break;
    case 5: launch_partial<5, kHeadDim>(a, batch, s); break;
    case 6: launch_partial<6, kHeadDim>(a, batch, s); break;
    case 7: launch_partial<7, kHeadDim>(a, batch, s); break;
    case 8: launch_partial<8, kHeadDim>(a, batch, s); break;
    default: throw Failure("decode attention: " + std::to_string(group) + " query heads per KV head (1..8 supported)");
  }
}

// One decode step's attention for one layer, `batch` sequences of `context` tokens, with the KV
// cache's pages rotating over copies (planning.h): serving reads each layer's cache once a step, so
// a small cache must not be timed from L2. Each copy is [K pages][V pages][block table]; its pages
// are numbered from 0 within the copy (plan::decode_page).
struct DecodeCase {
  plan::DecodeLayout layout;
  int batch, context, pages_per_seq, partitions;
  plan::Rotation rotation;
  RotatedBuffers cache;
  DeviceBuffer<__half> q, out;
  DeviceBuffer<int> lens;
  DeviceBuffer<float> max_logits, exp_sums, partial;
  uint64_t call = 0;

  DecodeCase(const plan::DecodeLayout& l, int b, int ctx, const plan::Rotation& r, cudaStream_t s)
      : layout(l), batch(b), context(ctx), pages_per_seq(plan::pages_for(ctx, l.block_size)),
        partitions((ctx + kPartition - 1) / kPartition), rotation(r), cache(r, 22, s),
        q(static_cast<size_t>(b) * l.heads * l.head_dim), out(q.count), lens(b),
        max_logits(static_cast<size_t>(b) * l.heads * partitions), exp_sums(max_logits.count),
        partial(max_logits.count * l.head_dim) {
    if (const std::string why = plan::decode_layout_problem(l); !why.empty())
      throw Failure("decode layout " + l.name() + ": " + why);
    fill_random_half(q.ptr, q.count, 21, s);
    std::vector<int> table(static_cast<size_t>(b) * pages_per_seq), len(b, ctx);
    for (int sq = 0; sq < b; ++sq)
      for (int i = 0; i < pages_per_seq; ++i) table[static_cast<size_t>(sq) * pages_per_seq + i] = plan::decode_page(sq, i, b);
    cache.set_indices(2, table, s);
    MB_CUDA(cudaMemcpyAsync(lens.ptr, len.data(), len.size() * sizeof(int), cudaMemcpyHostToDevice, s));
    MB_CUDA(cudaStreamSynchronize(s));
  }
  DecodeArgs args(uint64_t c) const {
    return {q.ptr, cache.ptr<__half>(0, c), cache.ptr<__half>(1, c), cache.ptr<int>(2, c), lens.ptr, pages_per_seq,
            layout.block_size, layout.heads, layout.kv_heads, layout.head_dim, partitions, max_logits.ptr,
            exp_sums.ptr, partial.ptr};
  }
  // The two kernels of one call, on the next copy of the cache.
  void launch(cudaStream_t s) {
    const DecodeArgs a = args(call++);
    const int group = layout.heads / layout.kv_heads;
    switch (layout.head_dim) {
      case 64: launch_partial_for_group<64>(group, a, batch, s); break;
      case 128: launch_partial_for_group<128>(group, a, batch, s); break;
      case 256: launch_partial_for_group<256>(group, a, batch, s); break;
      default: throw Failure("decode attention: head_dim " + std::to_string(layout.head_dim) + " (64, 128, 256 supported)");
    }
    decode_reduce_kernel<<<dim3(layout.heads, batch), layout.head_dim, 0, s>>>(a, out.ptr);
    MB_CHECK_LAUNCH();
  }
  double kv_bytes() const { return plan::decode_kv_bytes(layout, batch, context); }
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
  Stream s;
  MB_CUDA(cudaFuncSetAttribute(prefill_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(kPrefillSmem)));
  constexpr float kTolerance = 0.02f;  // fp16 outputs of values of order 0.5
  int device = 0;
  MB_CUDA(cudaGetDevice(&device));
  const size_t l2 = l2_bytes(device);
  // The head layouts of the models the cost model is applied to (planning.h), or --decode-layouts.
  const std::vector<plan::DecodeLayout> layouts =
      o.decode_layouts.empty() ? plan::default_decode_layouts(o.quick) : o.decode_layouts;

  // Correctness first: a wrong kernel's timings are not written. Each layout's kernel is checked
  // on three partitions and a partial last page.
  std::vector<plan::DecodeLayout> checked;
  for (const plan::DecodeLayout& l : layouts) {
    const plan::Rotation r = plan::decode_rotation(l, 3, 1100, l2, rotation_budget());
    DecodeCase c(l, 3, 1100, r, s);
    DeviceBuffer<float> ref(c.q.count);
    const DecodeArgs a = c.args(c.call);  // the copy launch() uses next
    c.launch(s);
    decode_reference_kernel<<<dim3(l.heads, c.batch), l.head_dim, 0, s>>>(a, ref.ptr);
    MB_CHECK_LAUNCH();
    const float e = max_abs_error(c.out.ptr, ref.ptr, c.q.count, s);
    checks.row("attention_decode:" + l.name(), e, e < kTolerance ? 1 : 0);
    if (e < kTolerance) checked.push_back(l);
  }
  bool prefill_ok = false;
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
    MB_CHECK_LAUNCH();
    prefill_reference_kernel<<<dim3(seq, heads, batch), kHeadDim, 0, s>>>(q.ptr, k.ptr, v.ptr, seq, heads, kv_heads,
                                                                         ref.ptr);
    MB_CHECK_LAUNCH();
    const float e = max_abs_error(out.ptr, ref.ptr, q.count, s);
    prefill_ok = e < kTolerance;
    checks.row("attention_prefill", e, prefill_ok ? 1 : 0);
  }

  // Decode: batch x context grid per layout, one layer, the cache rotated.
  if (!checked.empty()) {
    CsvOut out(o.out_dir, servesim::calibration::raw::kDecodeAttentionFile,
               servesim::calibration::raw::kDecodeAttentionHeader);
    const double cap = std::min(16.0 * (1 << 30), prop.totalGlobalMem / 4.0);
    for (const plan::DecodeLayout& l : checked)
      for (int b : plan::decode_batches(o.quick))
        for (int ctx : plan::decode_contexts(o.quick)) {
          if (plan::decode_kv_bytes(l, b, ctx) > cap) continue;
          const plan::Rotation r = plan::decode_rotation(l, b, ctx, l2, rotation_budget());
          if (!r.fits) {
            std::cerr << " (decode " << l.name() << " " << b << " x " << ctx << " skipped: its rotation needs "
                      << (r.arena_bytes() >> 20) << " MiB)";
            continue;
          }
          DecodeCase c(l, b, ctx, r, s);
          auto launch = [&] { c.launch(s); };
          const double probe = time_median(s, 3, launch, r.copies);
          const int reps = reps_for(o, probe);
          const double t = time_median(s, reps, launch, r.copies);
          out.row(b, ctx, l.heads, l.kv_heads, l.head_dim, l.block_size, c.kv_bytes(), t, reps);
        }
  }
  // Prefill: sequence lengths at about 16k tokens per call, 32 heads in 8 groups. Compute-bound
  // (hundreds of FLOPs per byte), so its buffers need no rotation.
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
        MB_CHECK_LAUNCH();
      };
      const double probe = time_median(s, 3, launch);
      const int reps = reps_for(o, probe);
      const double t = time_median(s, reps, launch);
      const double flops = 4.0 * kHeadDim * heads * batch * (static_cast<double>(seq) * (seq + 1) / 2.0);
      out.row(batch, seq, heads, kv_heads, kHeadDim, flops, t, reps);
    }
  }
}

}  // namespace mb
