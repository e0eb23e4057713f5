#pragma once
// Host-side planning of the CUDA microbenchmarks: how many copies of a kernel's buffers a sweep
// point rotates through so that no timed call finds its data in L2, which sizes and head layouts
// the sweeps cover, and how the launch benchmark retries until the host's launch queue cannot
// have limited it. Plain C++17 with no CUDA and no servesim dependency (like raw_format.h), so the
// microbenchmarks (built by nvcc alone) and the GoogleTest suite use the same definitions, and the
// tests check the plans the benchmarks actually run.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace servesim::calibration::plan {

// ---- Buffer rotation ----------------------------------------------------------------------------

// A serving step never finds the next layer's weights, activations or KV cache in L2: between two
// executions of one layer's kernel the whole rest of the model streams through. A timed call must
// see the same: between two uses of any byte, at least this many times the L2 size of other data
// must have been touched (a margin over 1x because L2 replacement is not exact LRU and H100/H200
// split L2 into two partitions).
inline constexpr double kL2Multiple = 4.0;
// Every buffer of every copy starts on this boundary (cudaMalloc's, and 16-byte vector loads').
inline constexpr size_t kAlignment = 256;

inline size_t align_up(size_t bytes, size_t alignment = kAlignment) {
  return (bytes + alignment - 1) / alignment * alignment;
}

// The buffers one call touches, `copies` times over, laid out copy after copy in one arena:
// copy c of buffer b starts at c x slot + prefix(b). A call with number k uses copy k mod copies, so
// a byte is reused only after every other copy was touched: the reuse distance is
// copies x call_bytes(). Filling the arena in address order, or running `copies` untimed calls
// first, leaves copy 0 the longest untouched.
struct Rotation {
  std::vector<size_t> bytes;  // each buffer one call touches
  size_t copies = 1;
  bool fits = true;           // the arena fits the memory budget; a point that does not is skipped

  size_t stride(size_t buffer) const { return align_up(bytes.at(buffer)); }
  size_t slot() const {
    size_t s = 0;
    for (size_t b = 0; b < bytes.size(); ++b) s += stride(b);
    return s;
  }
  size_t prefix(size_t buffer) const {
    size_t s = 0;
    for (size_t b = 0; b < buffer; ++b) s += stride(b);
    return s;
  }
  size_t call_bytes() const {
    size_t s = 0;
    for (size_t v : bytes) s += v;
    return s;
  }
  size_t arena_bytes() const { return copies * slot(); }
  // Bytes touched between two uses of one byte (the call's own bytes included).
  size_t reuse_distance() const { return copies * call_bytes(); }
  // Byte offset of `buffer` in the arena for call number `call`.
  size_t offset(size_t buffer, uint64_t call) const {
    return static_cast<size_t>(call % copies) * slot() + prefix(buffer);
  }
};

// The fewest copies whose reuse distance reaches l2_multiple x l2_bytes (one when a call alone
// touches that much). `fits` says whether copies x slot fit `budget_bytes`; the caller skips a
// point that does not rather than measure it from L2 (on the datacenter GPUs the sweeps target,
// 4 x L2 is under 1% of memory, so every point fits).
inline Rotation plan_rotation(const std::vector<size_t>& buffer_bytes, size_t l2_bytes, size_t budget_bytes,
                              double l2_multiple = kL2Multiple) {
  Rotation r;
  r.bytes = buffer_bytes;
  const size_t call = r.call_bytes();
  if (call == 0) throw std::invalid_argument("plan_rotation: a call that touches no bytes");
  const size_t want = static_cast<size_t>(l2_multiple * static_cast<double>(l2_bytes) + 0.5);
  r.copies = std::max<size_t>(1, (want + call - 1) / call);
  r.fits = static_cast<double>(r.copies) * static_cast<double>(r.slot()) <= static_cast<double>(budget_bytes);
  return r;
}

// ---- The memory-bound sweep ---------------------------------------------------------------------

// HBM streaming sizes: 256 KiB, 1 MiB, ... up to max_bytes (quick: from 1 MiB to 256 MiB).
inline std::vector<size_t> stream_sizes(bool quick, size_t max_bytes) {
  const size_t cap = std::min(max_bytes, quick ? size_t{256} << 20 : size_t{4} << 30);
  std::vector<size_t> out;
  for (size_t b = quick ? size_t{1} << 20 : size_t{256} << 10; b <= cap; b *= 4) out.push_back(b);
  return out;
}

// Elementwise kernels: rows (tokens) of `width` fp16 elements.
inline std::vector<int> elementwise_rows(bool quick) {
  if (quick) return {1, 64, 4096};
  std::vector<int> r;
  for (int v = 1; v <= 32768; v *= 2) r.push_back(v);
  return r;
}
inline std::vector<int> elementwise_widths() { return {4096, 8192}; }
inline const std::vector<std::string>& elementwise_kernels() {
  static const std::vector<std::string> k = {"rms_norm", "rope", "act", "add", "embedding"};
  return k;
}

inline constexpr size_t kHalfBytes = 2;
inline constexpr size_t kIndexBytes = 4;  // int32 positions and token ids

// HBM streaming kernels over `bytes`: read (in), copy (in, out).
inline std::vector<size_t> streaming_buffers(const std::string& kernel, size_t bytes) {
  if (kernel == "read") return {bytes};
  if (kernel == "copy") return {bytes, bytes};
  throw std::invalid_argument("streaming_buffers: unknown kernel " + kernel);
}

// The buffers one call of `kernel` touches, in the order the kernel takes them:
//   rms_norm:  x [rows, width], weight [width], out [rows, width]
//   rope:      qk [rows, width] (in place), positions [rows]
//   act:       gate_up [rows, 2 width], out [rows, width]
//   add:       x [rows, width] (in place), residual [rows, width]
//   embedding: ids [rows], a table chunk [rows, width] the ids gather from, out [rows, width]
// The int32 buffers (positions, ids) live in the same arena; the benchmark writes their values
// after filling the rest with random fp16 values.
inline std::vector<size_t> elementwise_buffers(const std::string& kernel, size_t rows, size_t width) {
  const size_t m = rows * width * kHalfBytes;
  if (kernel == "rms_norm") return {m, width * kHalfBytes, m};
  if (kernel == "rope") return {m, rows * kIndexBytes};
  if (kernel == "act") return {2 * m, m};
  if (kernel == "add") return {m, m};
  if (kernel == "embedding") return {rows * kIndexBytes, m, m};
  throw std::invalid_argument("elementwise_buffers: unknown kernel " + kernel);
}

// Which of elementwise_buffers() holds int32 indices (rope's positions, embedding's ids); -1: none.
inline int index_buffer(const std::string& kernel) {
  if (kernel == "rope") return 1;
  if (kernel == "embedding") return 0;
  return -1;
}

// The bytes the profile charges a kernel with (stream.csv's bytes column): what it must read and
// write, as the roofline cost model counts the same operator (hwmodels/roofline_cost_model.cc).
inline double elementwise_moved_bytes(const std::string& kernel, size_t rows, size_t width) {
  const double m = static_cast<double>(rows) * static_cast<double>(width) * kHalfBytes;
  if (kernel == "rms_norm") return 2 * m + static_cast<double>(width) * kHalfBytes;  // read x and weight, write
  if (kernel == "rope") return 2 * m;       // read and write in place
  if (kernel == "act") return 3 * m;        // read both halves, write one
  if (kernel == "add") return 3 * m;        // read two, write one
  if (kernel == "embedding") return 2 * m;  // gather a row, write it
  throw std::invalid_argument("elementwise_moved_bytes: unknown kernel " + kernel);
}

// The row of its table chunk token i of an embedding call gathers: a permutation of the chunk
// (7919 is prime, so this is one for every row count that is not a multiple of it), so the rows
// are read in a scattered order as token ids read a vocabulary table.
inline constexpr size_t kRowPermutationPrime = 7919;
inline size_t embedding_id(size_t i, size_t rows) { return (i * kRowPermutationPrime) % rows; }

// ---- GEMMs --------------------------------------------------------------------------------------

// The (N, K) pairs of the linear layers of three dense architectures at tensor parallelism 1..8:
// fused QKV, output projection, fused gate/up, down. Model-free in the sense that they are shapes,
// not weights; the fit interpolates between them by weight size.
inline std::vector<std::pair<int, int>> gemm_weight_shapes(bool quick) {
  struct Arch {
    int hidden, heads, kv_heads, head_dim, inter;
  };
  const Arch archs[] = {
      {4096, 32, 8, 128, 14336},   // Llama-3-8B / Mistral-7B / Mixtral experts
      {5120, 40, 40, 128, 13824},  // a 13B MHA model
      {8192, 64, 8, 128, 28672},   // Llama-2/3-70B
  };
  std::vector<std::pair<int, int>> nk;
  for (const Arch& a : archs) {
    for (int tp : {1, 2, 4, 8}) {
      if (quick && tp != 1 && tp != 8) continue;
      const int q = a.heads * a.head_dim / tp;
      const int kv = (a.kv_heads >= tp ? a.kv_heads / tp : 1) * a.head_dim;
      nk.push_back({q + 2 * kv, a.hidden});        // QKV
      nk.push_back({a.hidden, q});                 // O
      nk.push_back({2 * a.inter / tp, a.hidden});  // gate+up
      nk.push_back({a.hidden, a.inter / tp});      // down
    }
    if (quick) break;
  }
  return nk;
}

// GEMM rows (tokens): 1, 2, 4, ... 16384.
inline std::vector<int> gemm_rows(bool quick) {
  if (quick) return {1, 16, 256, 4096};
  std::vector<int> m;
  for (int v = 1; v <= 16384; v *= 2) m.push_back(v);
  return m;
}

// ---- Decode attention head layouts --------------------------------------------------------------

// One GPU's share of a model's attention, as the decode kernel sees it.
struct DecodeLayout {
  int heads = 0;       // query heads on this GPU
  int kv_heads = 0;    // KV heads on this GPU (replicated ones count once)
  int head_dim = 0;
  int block_size = 16; // tokens per KV-cache page (vLLM's default)
  bool operator==(const DecodeLayout& o) const {
    return heads == o.heads && kv_heads == o.kv_heads && head_dim == o.head_dim && block_size == o.block_size;
  }
  bool operator<(const DecodeLayout& o) const {
    if (heads != o.heads) return heads < o.heads;
    if (kv_heads != o.kv_heads) return kv_heads < o.kv_heads;
    if (head_dim != o.head_dim) return head_dim < o.head_dim;
    return block_size < o.block_size;
  }
  std::string name() const {
    return std::to_string(heads) + ":" + std::to_string(kv_heads) + ":" + std::to_string(head_dim) + ":" +
           std::to_string(block_size);
  }
};

// What the decode kernel is instantiated for: head_dim 64, 128 or 256, 1 to 8 query heads per KV
// head, pages of 1 to 256 tokens. "" when supported, else why not.
inline std::string decode_layout_problem(const DecodeLayout& l) {
  if (l.heads < 1 || l.kv_heads < 1) return "needs at least one query and one KV head";
  if (l.heads % l.kv_heads != 0) return "query heads must be a multiple of KV heads";
  const int group = l.heads / l.kv_heads;
  if (group > 8) return "at most 8 query heads per KV head (the kernel keeps a group's queries in registers)";
  if (l.head_dim != 64 && l.head_dim != 128 && l.head_dim != 256) return "head_dim must be 64, 128 or 256";
  if (l.block_size < 1 || l.block_size > 256) return "block_size must be 1..256 tokens";
  return "";
}

// "HEADS:KV_HEADS:HEAD_DIM[:BLOCK_SIZE]" (--decode-layouts); std::invalid_argument naming the entry.
inline DecodeLayout parse_decode_layout(const std::string& text) {
  std::vector<int> v;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t colon = std::min(text.find(':', at), text.size());
    const std::string part = text.substr(at, colon - at);
    if (part.empty() || part.size() > 6 || part.find_first_not_of("0123456789") != std::string::npos)
      throw std::invalid_argument("decode layout '" + text + "': expected HEADS:KV_HEADS:HEAD_DIM[:BLOCK_SIZE]");
    v.push_back(std::stoi(part));
    at = colon + 1;
  }
  if (v.size() != 3 && v.size() != 4)
    throw std::invalid_argument("decode layout '" + text + "': expected HEADS:KV_HEADS:HEAD_DIM[:BLOCK_SIZE]");
  DecodeLayout l{v[0], v[1], v[2], v.size() == 4 ? v[3] : 16};
  if (const std::string p = decode_layout_problem(l); !p.empty())
    throw std::invalid_argument("decode layout '" + text + "': " + p);
  return l;
}

// The models the cost model is applied to, by the shape of their attention, and the tensor
// parallel degrees they are served at: the default decode sweep measures each one's per-GPU layout.
struct SweptModel {
  const char* preset;  // the [model] preset (hwmodels/model_spec.cc)
  int heads, kv_heads, head_dim;
  std::vector<int> tensor_parallel;
};
inline const std::vector<SweptModel>& swept_models() {
  static const std::vector<SweptModel> m = {
      {"llama-2-7b", 32, 32, 128, {1, 2}},
      {"llama-3-8b", 32, 8, 128, {1, 2, 4, 8}},
      {"llama-3-70b", 64, 8, 128, {1, 2, 4, 8}},
      {"mixtral-8x7b", 32, 8, 128, {1, 2}},
      {"qwen2-7b", 28, 4, 128, {1, 2, 4}},
  };
  return m;
}

// A model's layout on one GPU of `tp`: heads split evenly, KV heads split or replicated whole
// (one per GPU when tp exceeds them), as hwmodels::kv_heads_per_gpu splits them.
inline DecodeLayout layout_on_gpu(int heads, int kv_heads, int head_dim, int tp, int block_size = 16) {
  return {heads / tp, kv_heads >= tp ? kv_heads / tp : 1, head_dim, block_size};
}

// The default sweep: every swept model's layout at every degree, each once, in layout order
// (quick: Llama-3-8B at TP 1 and Llama-2-7B at TP 1).
inline std::vector<DecodeLayout> default_decode_layouts(bool quick) {
  std::vector<DecodeLayout> out;
  if (quick) return {layout_on_gpu(32, 8, 128, 1), layout_on_gpu(32, 32, 128, 1)};
  for (const SweptModel& m : swept_models())
    for (int tp : m.tensor_parallel) out.push_back(layout_on_gpu(m.heads, m.kv_heads, m.head_dim, tp));
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// The decode grid: decoding sequences x context tokens.
inline std::vector<int> decode_batches(bool quick) {
  return quick ? std::vector<int>{1, 32} : std::vector<int>{1, 4, 16, 64, 256};
}
inline std::vector<int> decode_contexts(bool quick) {
  return quick ? std::vector<int>{256, 4096} : std::vector<int>{128, 512, 2048, 8192, 32768};
}
// K and V of one layer: batch x context tokens x kv_heads x head_dim, fp16, twice.
inline double decode_kv_bytes(const DecodeLayout& l, int batch, int context) {
  return 2.0 * batch * static_cast<double>(context) * l.kv_heads * l.head_dim * kHalfBytes;
}
// KV-cache pages one sequence of `context` tokens occupies.
inline int pages_for(int context, int block_size) { return (context + block_size - 1) / block_size; }
// The rotation of one decode case: each copy holds the K pages, the V pages (whole pages of
// [kv_heads][block_size][head_dim] fp16) and the block table of `batch` sequences of `context`.
inline Rotation decode_rotation(const DecodeLayout& l, int batch, int context, size_t l2_bytes, size_t budget_bytes) {
  const size_t pages = static_cast<size_t>(batch) * static_cast<size_t>(pages_for(context, l.block_size));
  const size_t cache = pages * static_cast<size_t>(l.kv_heads) * static_cast<size_t>(l.block_size) *
                       static_cast<size_t>(l.head_dim) * kHalfBytes;
  return plan_rotation({cache, cache, pages * kIndexBytes}, l2_bytes, budget_bytes);
}

// The page (numbered within one rotation copy's pool) holding page i of sequence `seq`: the
// sequences' pages interleave, page i of sequence s being i x batch + s, as an allocator handing
// out pages in arrival order scatters them.
inline int decode_page(int seq, int i, int batch) { return i * batch + seq; }

// ---- Launch costs -------------------------------------------------------------------------------

// The launch benchmark queues `launches` empty kernels behind a spin kernel that holds the GPU for
// `spin_ns`. A trial counts only when the spin was still running after the host had queued them
// all: then no launch waited for a free slot in the launch queue (the host time is the launch
// call's own), and the GPU found every kernel already queued (the GPU time is kernels back to
// back, not the host's pace). A failed trial is retried with half the launches (the queue may be
// shallower) and twice the spin (the host may be slower), within these bounds.
struct LaunchTrial {
  int launches = 0;
  double spin_ns = 0;
};
inline constexpr int kMaxLaunches = 512;   // well under the launch queue's depth on current drivers
inline constexpr int kMinLaunches = 32;    // fewer would leave the event overhead visible
inline constexpr double kMinSpinNs = 1e6;
inline constexpr double kMaxSpinNs = 2e9;  // a host that needs longer than this is not a serving host

// The first trial from an untimed estimate of the host's time per launch: a spin four times what
// queueing the launches should take.
inline LaunchTrial first_launch_trial(double host_ns_per_launch) {
  return {kMaxLaunches, std::clamp(4.0 * kMaxLaunches * host_ns_per_launch, kMinSpinNs, kMaxSpinNs)};
}
// The next trial after `failed`, or one with launches == 0 when none is left to try.
inline LaunchTrial retry_launch_trial(const LaunchTrial& failed) {
  const LaunchTrial next{std::max(kMinLaunches, failed.launches / 2), std::min(kMaxSpinNs, 2.0 * failed.spin_ns)};
  if (next.launches == failed.launches && next.spin_ns == failed.spin_ns) return {0, 0};
  return next;
}

}  // namespace servesim::calibration::plan
