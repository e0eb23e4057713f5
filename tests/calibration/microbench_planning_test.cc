// The CUDA microbenchmarks' host-side plans (calibration/microbench/planning.h), which nvcc builds
// into the benchmarks: every point the sweeps time keeps its data out of L2, no rotated buffer
// overlaps another, and the memory budget is respected.
#include "calibration/microbench/planning.h"

#include <gtest/gtest.h>

#include <algorithm>

#include <set>
#include <string>
#include <vector>

#include "hwmodels/model_spec.h"
#include "hwmodels/roofline.h"
#include "hwmodels/roofline_cost_model.h"

namespace servesim::calibration::plan {
namespace {

constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kGiB = size_t{1} << 30;

// L2 sizes of the GPUs the microbenchmarks are meant for (cudaDevAttrL2CacheSize): A100 40 MiB,
// H100 and H200 50 MiB, L40S 96 MiB, B200 126 MiB.
const std::vector<size_t> kL2Sizes = {40 * kMiB, 50 * kMiB, 96 * kMiB, 126 * kMiB};
// Half of an 80 GB GPU's free memory: what rotation_budget() gives on the smallest of them.
constexpr size_t kBudget = 37 * kGiB;

// Walks calls 0 .. copies in order, independently of Rotation's own arithmetic: within one pass
// over the copies no two byte ranges of any buffer overlap and all lie in the arena; call `copies`
// comes back to call 0's addresses; what the pass touches is at least 4 x L2.
void expect_out_of_l2(const Rotation& r, size_t l2, const std::string& what) {
  SCOPED_TRACE(what + " with L2 " + std::to_string(l2 >> 20) + " MiB");
  ASSERT_TRUE(r.fits);
  EXPECT_LE(r.arena_bytes(), kBudget);
  size_t end_of_previous = 0, touched = 0;
  for (uint64_t call = 0; call < r.copies; ++call) {
    std::vector<std::pair<size_t, size_t>> ranges;
    for (size_t b = 0; b < r.bytes.size(); ++b) ranges.push_back({r.offset(b, call), r.bytes[b]});
    for (const auto& [begin, size] : ranges) {
      // Every range starts where the previous one (in call, then buffer order) ended or later, so
      // ranges met in this order are pairwise disjoint.
      ASSERT_GE(begin, end_of_previous) << "call " << call;
      ASSERT_EQ(begin % kAlignment, 0u) << "call " << call;
      end_of_previous = begin + size;
      touched += size;
    }
    ASSERT_LE(end_of_previous, r.arena_bytes());
  }
  EXPECT_GE(static_cast<double>(touched), kL2Multiple * static_cast<double>(l2));
  for (size_t b = 0; b < r.bytes.size(); ++b) EXPECT_EQ(r.offset(b, r.copies), r.offset(b, 0));
  // No more copies than that needs.
  if (r.copies > 1) {
    EXPECT_LT(static_cast<double>(touched - r.call_bytes()), kL2Multiple * static_cast<double>(l2));
  }
}

TEST(MicrobenchPlanningTest, EveryStreamingAndElementwisePointRotatesOutOfL2) {
  for (size_t l2 : kL2Sizes) {
    for (bool quick : {false, true}) {
      for (size_t bytes : stream_sizes(quick, 80 * kGiB / 4))
        for (const char* kernel : {"read", "copy"})
          expect_out_of_l2(plan_rotation(streaming_buffers(kernel, bytes), l2, kBudget), l2,
                           std::string(kernel) + " " + std::to_string(bytes));
      for (int width : elementwise_widths())
        for (int rows : elementwise_rows(quick))
          for (const std::string& kernel : elementwise_kernels())
            expect_out_of_l2(plan_rotation(elementwise_buffers(kernel, rows, width), l2, kBudget), l2,
                             kernel + " " + std::to_string(rows) + " x " + std::to_string(width));
    }
  }
}

TEST(MicrobenchPlanningTest, EveryGemmAndDecodePointRotatesOutOfL2) {
  for (size_t l2 : kL2Sizes) {
    for (bool quick : {false, true}) {
      for (const auto& [n, k] : gemm_weight_shapes(quick))
        for (size_t element : {size_t{2}, size_t{1}})  // bf16, fp8
          expect_out_of_l2(plan_rotation({static_cast<size_t>(n) * k * element}, l2, kBudget), l2,
                           "weights " + std::to_string(n) + " x " + std::to_string(k));
      for (const DecodeLayout& l : default_decode_layouts(quick))
        for (int batch : decode_batches(quick))
          for (int context : decode_contexts(quick)) {
            if (decode_kv_bytes(l, batch, context) > 16.0 * kGiB) continue;  // attention.cu's size cap
            expect_out_of_l2(decode_rotation(l, batch, context, l2, kBudget), l2,
                             "decode " + l.name() + " " + std::to_string(batch) + " x " + std::to_string(context));
          }
    }
  }
}

TEST(MicrobenchPlanningTest, RotationArithmetic) {
  // Hand-computed: 24 KiB calls against a 50 MiB L2 need ceil(200 MiB / 24 KiB) = 8534 copies.
  const Rotation small = plan_rotation({8192, 8192, 8192}, 50 * kMiB, kBudget);
  EXPECT_EQ(small.copies, 8534u);
  EXPECT_EQ(small.slot(), 24576u);
  EXPECT_EQ(small.offset(2, 8535), 24576u + 16384u);  // copy 1, third buffer
  // Buffers are aligned to 256 bytes: 100 + 10 bytes take two 256-byte strides.
  const Rotation odd = plan_rotation({100, 10}, 1000, kBudget);
  EXPECT_EQ(odd.slot(), 512u);
  EXPECT_EQ(odd.copies, 37u);  // ceil(4000 / 110)
  EXPECT_EQ(odd.offset(1, 1), 768u);
  // A call that alone touches 4 x L2 needs one copy.
  EXPECT_EQ(plan_rotation({4 * 50 * kMiB}, 50 * kMiB, kBudget).copies, 1u);
  EXPECT_EQ(plan_rotation({4 * 50 * kMiB - 1}, 50 * kMiB, kBudget).copies, 2u);
  EXPECT_THROW(plan_rotation({0}, 50 * kMiB, kBudget), std::invalid_argument);
}

TEST(MicrobenchPlanningTest, MemoryBudgetIsRespected) {
  const Rotation r = plan_rotation({kMiB}, 50 * kMiB, kBudget);
  EXPECT_EQ(r.copies, 200u);
  EXPECT_TRUE(plan_rotation({kMiB}, 50 * kMiB, 200 * kMiB).fits);
  // One byte short of the arena: the point is skipped, never run with fewer copies.
  const Rotation tight = plan_rotation({kMiB}, 50 * kMiB, 200 * kMiB - 1);
  EXPECT_FALSE(tight.fits);
  EXPECT_EQ(tight.copies, 200u);
  EXPECT_FALSE(plan_rotation({8 * kGiB}, 50 * kMiB, 4 * kGiB).fits);
}

TEST(MicrobenchPlanningTest, BytesChargedAndTouched) {
  // rms_norm of 2 rows of 4096: reads x (16 KiB) and the weight (8 KiB), writes 16 KiB.
  EXPECT_DOUBLE_EQ(elementwise_moved_bytes("rms_norm", 2, 4096), 40960);
  EXPECT_EQ(elementwise_buffers("rms_norm", 2, 4096), (std::vector<size_t>{16384, 8192, 16384}));
  // SiLU-and-multiply of 3 rows of 8192: reads 2 x 48 KiB, writes 48 KiB.
  EXPECT_DOUBLE_EQ(elementwise_moved_bytes("act", 3, 8192), 147456);
  EXPECT_EQ(elementwise_buffers("act", 3, 8192), (std::vector<size_t>{98304, 49152}));
  EXPECT_DOUBLE_EQ(elementwise_moved_bytes("add", 1, 4096), 3 * 8192);
  EXPECT_DOUBLE_EQ(elementwise_moved_bytes("rope", 1, 4096), 2 * 8192);
  EXPECT_DOUBLE_EQ(elementwise_moved_bytes("embedding", 5, 4096), 2 * 5 * 8192);
  EXPECT_EQ(elementwise_buffers("embedding", 5, 4096), (std::vector<size_t>{20, 40960, 40960}));
  EXPECT_EQ(index_buffer("embedding"), 0);
  EXPECT_EQ(index_buffer("rope"), 1);
  EXPECT_EQ(index_buffer("add"), -1);
  EXPECT_THROW(elementwise_buffers("softmax", 1, 4096), std::invalid_argument);
  // K and V of 2 sequences of 100 tokens, 8 KV heads of 128: 2 x 200 x 8 x 128 x 2 bytes.
  EXPECT_DOUBLE_EQ(decode_kv_bytes({32, 8, 128, 16}, 2, 100), 819200);
  EXPECT_EQ(pages_for(100, 16), 7);
  // Its rotation copies whole pages: 2 x 7 pages of 8 x 16 x 128 fp16 for K, as much for V, and a
  // 14-entry block table.
  const Rotation r = decode_rotation({32, 8, 128, 16}, 2, 100, 50 * kMiB, kBudget);
  EXPECT_EQ(r.bytes, (std::vector<size_t>{458752, 458752, 56}));
}

TEST(MicrobenchPlanningTest, IndicesStayInsideTheirCopy) {
  // Embedding ids are a permutation of the call's table chunk, for every swept row count.
  for (int rows : elementwise_rows(false)) {
    std::set<size_t> seen;
    for (int i = 0; i < rows; ++i) seen.insert(embedding_id(i, rows));
    EXPECT_EQ(seen.size(), static_cast<size_t>(rows)) << rows;
    EXPECT_LT(*seen.rbegin(), static_cast<size_t>(rows)) << rows;
  }
  // Decode pages are a permutation of the copy's batch x pages pool.
  for (int batch : decode_batches(false))
    for (int context : {1, 16, 17, 1100}) {
      const int pages = pages_for(context, 16);
      std::set<int> seen;
      for (int s = 0; s < batch; ++s)
        for (int i = 0; i < pages; ++i) seen.insert(decode_page(s, i, batch));
      EXPECT_EQ(seen.size(), static_cast<size_t>(batch) * pages);
      EXPECT_EQ(*seen.begin(), 0);
      EXPECT_EQ(*seen.rbegin(), batch * pages - 1);
    }
}

TEST(MicrobenchPlanningTest, LaunchTrialsStayUnderTheQueueAndEnd) {
  // 3 us per launch: queueing 512 launches takes 1.5 ms, the spin four times that.
  const LaunchTrial first = first_launch_trial(3000);
  EXPECT_EQ(first.launches, 512);
  EXPECT_DOUBLE_EQ(first.spin_ns, 4.0 * 512 * 3000);
  EXPECT_DOUBLE_EQ(first_launch_trial(10).spin_ns, kMinSpinNs);  // a fast host still gets 1 ms
  // Each failed trial halves the launches (down to 32) and doubles the spin (up to 2 s) ...
  LaunchTrial t = first;
  int retries = 0;
  for (LaunchTrial next = retry_launch_trial(t); next.launches != 0; next = retry_launch_trial(t)) {
    EXPECT_TRUE(next.launches == std::max(kMinLaunches, t.launches / 2)) << retries;
    EXPECT_DOUBLE_EQ(next.spin_ns, std::min(kMaxSpinNs, 2 * t.spin_ns)) << retries;
    EXPECT_LE(next.launches, kMaxLaunches);
    t = next;
    ++retries;
  }
  // ... and when neither can change, the benchmark gives up instead of measuring the queue: from a
  // 6.144 ms spin, 9 doublings reach the 2 s cap.
  EXPECT_EQ(t.launches, kMinLaunches);
  EXPECT_DOUBLE_EQ(t.spin_ns, kMaxSpinNs);
  EXPECT_EQ(retries, 9);
}

TEST(MicrobenchPlanningTest, DecodeSweepCoversTheModelsTheCostModelIsAppliedTo) {
  const std::vector<DecodeLayout> layouts = default_decode_layouts(false);
  auto swept = [&](const hwmodels::AttentionLayout& l) {
    return std::find(layouts.begin(), layouts.end(),
                     DecodeLayout{static_cast<int>(l.heads), static_cast<int>(l.kv_heads), static_cast<int>(l.head_dim),
                                  static_cast<int>(l.block_size)}) != layouts.end();
  };
  // The models the brief names at the degrees they are served at, through the cost model's own
  // per-GPU layout (hwmodels::decode_attention_layout), not this header's arithmetic.
  const std::vector<std::pair<const char*, std::vector<int64_t>>> served = {
      {"llama-2-7b", {1, 2}},   {"llama-3-8b", {1, 2, 4, 8}}, {"llama-3-70b", {1, 2, 4, 8}},
      {"mixtral-8x7b", {1, 2}}, {"qwen2-7b", {1, 2, 4}},       {"llama-2-70b", {2, 4, 8}}};
  for (const auto& [name, tps] : served) {
    const hwmodels::ModelSpec* m = hwmodels::find_model_preset(name);
    ASSERT_NE(m, nullptr) << name;
    for (int64_t tp : tps) {
      ASSERT_EQ(hwmodels::tp_problem(*m, tp), "") << name << " at " << tp;
      EXPECT_TRUE(swept(hwmodels::decode_attention_layout(*m, tp))) << name << " at TP " << tp;
    }
  }
  // The header's table of models agrees with the presets it names.
  for (const SweptModel& s : swept_models()) {
    const hwmodels::ModelSpec* m = hwmodels::find_model_preset(s.preset);
    ASSERT_NE(m, nullptr) << s.preset;
    EXPECT_EQ(m->num_heads, s.heads) << s.preset;
    EXPECT_EQ(m->num_kv_heads, s.kv_heads) << s.preset;
    EXPECT_EQ(m->head_dim, s.head_dim) << s.preset;
  }
  // Each layout once, in order, and each one the kernel is built for; 13 in all: 32/32, 16/16,
  // 32/8, 16/4, 8/2, 4/1, 64/8, 32/4, 16/2, 8/1, 28/4, 14/2, 7/1.
  EXPECT_EQ(layouts.size(), 13u);
  EXPECT_TRUE(std::is_sorted(layouts.begin(), layouts.end()));
  EXPECT_EQ(std::adjacent_find(layouts.begin(), layouts.end()), layouts.end());
  for (const DecodeLayout& l : layouts) EXPECT_EQ(decode_layout_problem(l), "") << l.name();
  for (const DecodeLayout& l : default_decode_layouts(true)) EXPECT_EQ(decode_layout_problem(l), "") << l.name();
}

TEST(MicrobenchPlanningTest, DecodeLayoutsFromTheCommandLine) {
  EXPECT_EQ(parse_decode_layout("28:4:128"), (DecodeLayout{28, 4, 128, 16}));
  EXPECT_EQ(parse_decode_layout("8:1:64:32"), (DecodeLayout{8, 1, 64, 32}));
  EXPECT_EQ(parse_decode_layout("8:1:64:32").name(), "8:1:64:32");
  for (const char* bad : {"", "32", "32:8", "32:8:128:16:1", "32:x:128", "32:-8:128", "32::128", "32:6:128",
                          "64:4:128", "32:8:96", "32:8:128:0", "32:8:128:512", "1234567:1:128"})
    EXPECT_THROW(parse_decode_layout(bad), std::invalid_argument) << bad;
}

}  // namespace
}  // namespace servesim::calibration::plan
