// The cost model's memoised decode step (RooflineCostModel::step for decode-only batches) against
// the general evaluation, bit for bit. The oracle is breakdown(): evaluate() operator by operator,
// with no memo; adding its terms in order from zero forms evaluate()'s totals with the same
// operations (evaluate() adds each term to its running totals as it emits it).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "hwmodels/calibration_profile.h"
#include "hwmodels/roofline.h"
#include "hwmodels/roofline_cost_model.h"
#include "hwmodels/uncertainty.h"
#include "tests/test_paths.h"

namespace servesim::hwmodels {
namespace {

// The four totals of a step as bytes, so that memcmp compares the bits (-0 against +0, NaNs too).
struct Bits {
  double v[4];
};
Bits bits(const StepCost& c) { return {{c.seconds, c.flops, c.bytes, c.peak_flop_seconds}}; }

StepCost general(const RooflineCostModel& cost, const BatchShape& s) {
  StepCost total;
  for (const OperatorCost& op : cost.breakdown(s)) {
    total.seconds += op.seconds;
    total.flops += op.flops;
    total.bytes += op.bytes;
    total.peak_flop_seconds += op.peak_flop_seconds;
  }
  return total;
}

::testing::AssertionResult same_bits(const RooflineCostModel& cost, const BatchShape& s) {
  const Bits fast = bits(cost.step(s)), slow = bits(general(cost, s));
  if (std::memcmp(&fast, &slow, sizeof(Bits)) == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "decode " << s.decode_seqs << " seqs, context " << s.decode_context_tokens << ", launch "
         << static_cast<int>(s.launch) << ": step " << fast.v[0] << " s " << fast.v[1] << " flops " << fast.v[2]
         << " bytes " << fast.v[3] << ", general " << slow.v[0] << " s " << slow.v[1] << " flops " << slow.v[2]
         << " bytes " << slow.v[3] << " (difference " << fast.v[0] - slow.v[0] << " s)";
}

enum class Profile { kNone, kShipped, kDecodeTable };

// The GPU's shipped profile, or that profile with a decode-attention table for every layout (so the
// table's path, Table2D::at_x, is exercised: no shipped profile has one yet).
std::optional<CalibrationProfile> profile_for(const std::string& gpu, Profile kind) {
  if (kind == Profile::kNone) return std::nullopt;
  CalibrationProfile p =
      read_calibration_profile(servesim::testing::source_dir() + "/calibration/profiles/" + gpu + ".toml");
  if (kind == Profile::kDecodeTable)
    p.attention_decode = Table2D({1, 8, 64, 256}, {128, 1024, 8192, 65536},
                                 {{0.11, 0.23, 0.41, 0.52}, {0.19, 0.37, 0.58, 0.66},
                                  {0.27, 0.49, 0.71, 0.79}, {0.31, 0.53, 0.77, 0.83}});
  return p;
}

std::unique_ptr<RooflineCostModel> make(const std::string& model, const std::string& gpu, int64_t tp,
                                        const CalibrationProfile* profile) {
  const ModelSpec& m = *find_model_preset(model);
  if (!tp_problem(m, tp).empty()) return nullptr;
  RooflineParams params;
  if (!profile) return std::make_unique<RooflineCostModel>(m, *find_gpu_preset(gpu), tp, params);
  const ProfileUse use = apply_profile_scalars(*profile, params, [](std::string_view) { return false; });
  auto cost = std::make_unique<RooflineCostModel>(m, *find_gpu_preset(gpu), tp, params, profile, use);
  cost->precompute();  // as the registry's factory does for a run
  return cost;
}

// Dense (Llama 2 and 3: MHA and GQA), latent attention (DeepSeek-V3, absorbed MLA decode), sliding
// window layers among full ones (gpt-oss), linear-attention layers (Qwen3-Next), sparse layers with
// their indexer (DeepSeek-V3.2, which keeps the general attention terms on the memo path).
const std::vector<std::string> kModels = {"llama-2-7b", "llama-3-8b", "deepseek-v3", "gpt-oss-120b",
                                          "qwen3-next-80b-a3b", "deepseek-v3.2"};
const std::vector<std::string> kGpus = {"a100-80gb-sxm", "h100-sxm"};

BatchShape decodes(const ModelSpec& m, int64_t seqs, int64_t context, LaunchMode launch) {
  BatchShape s;
  add_decodes(s, m.attention_limits(), seqs, context);
  s.launch = launch;
  s.graph_tokens = launch == LaunchMode::kEager ? 0 : ((seqs + 7) / 8) * 8;  // a captured size >= seqs
  return s;
}

// Batches of 1..300 sequences at contexts spread log-uniformly over 1..128k, under each launch mode
// (the memo keeps one launch per batch size and re-primes on a change), for every model, GPU, TP 1
// and 2, without a profile, with the shipped one and with a decode-attention table. Every step
// after a batch size's first comes from its memo.
TEST(DecodeStepTest, MemoisedStepEqualsTheGeneralEvaluationBitForBit) {
  std::mt19937_64 rng(18);
  std::uniform_real_distribution<double> log_context(0.0, std::log(131072.0));
  int64_t checked = 0;
  for (const std::string& gpu : kGpus)
    for (Profile kind : {Profile::kNone, Profile::kShipped, Profile::kDecodeTable}) {
      const std::optional<CalibrationProfile> profile = profile_for(gpu, kind);
      for (const std::string& model : kModels)
        for (int64_t tp : {1, 2}) {
          const auto cost = make(model, gpu, tp, profile ? &*profile : nullptr);
          if (!cost) continue;
          for (int64_t seqs = 1; seqs <= 300; ++seqs)
            for (int i = 0; i < 3; ++i) {
              const LaunchMode launch = static_cast<LaunchMode>((seqs + i) % 3);
              const int64_t context = std::max<int64_t>(1, std::llround(std::exp(log_context(rng))));
              const BatchShape s = decodes(cost->model(), seqs, context, launch);
              ASSERT_TRUE(same_bits(*cost, s)) << model << " on " << gpu << " TP " << tp << " profile "
                                               << static_cast<int>(kind);
              ++checked;
            }
        }
    }
  EXPECT_EQ(checked, 2 * 3 * 6 * 2 * 300 * 3);  // GPUs x profiles x models x TP x batch sizes x contexts
}

// A replica's order of calls: a batch decodes step after step, every context growing by one token
// (the summed context by the batch size), sequences joining and finishing now and then, so the
// memo of each size is reused over contexts it was not primed at.
TEST(DecodeStepTest, ReplicaOrderOfStepsEqualsTheGeneralEvaluation) {
  for (const std::string& gpu : kGpus)
    for (Profile kind : {Profile::kNone, Profile::kShipped, Profile::kDecodeTable}) {
      const std::optional<CalibrationProfile> profile = profile_for(gpu, kind);
      for (const std::string& model : kModels) {
        const auto cost = make(model, gpu, 1, profile ? &*profile : nullptr);
        ASSERT_TRUE(cost);
        const AttentionLimits limits = cost->model().attention_limits();
        std::mt19937_64 rng(7);
        std::vector<int64_t> contexts;  // each running sequence's context, the new token included
        for (int step = 0; step < 3000; ++step) {
          if (contexts.empty() || rng() % 16 == 0) contexts.push_back(1 + static_cast<int64_t>(rng() % 20000));
          if (contexts.size() > 1 && rng() % 20 == 0) contexts.erase(contexts.begin() + static_cast<long>(rng() % contexts.size()));
          BatchShape s;
          for (int64_t c : contexts) add_decodes(s, limits, 1, c);
          s.launch = LaunchMode::kFullGraph;
          s.graph_tokens = ((s.decode_seqs + 7) / 8) * 8;
          ASSERT_TRUE(same_bits(*cost, s)) << model << " on " << gpu << " step " << step;
          for (int64_t& c : contexts) ++c;
        }
      }
    }
}

// decode_steps(), with which a replica's run of decode iterations asks for a few steps at once
// (Replica::decode_window): out[j] is the general evaluation at the context + j x stride, bit for
// bit, for every count a run asks (1 .. kMaxDecodeSteps), with the memo primed or not, sparse
// layers (the per-step path) included; and through the uncertainty decorator, the inner model's
// steps with their times scaled as its step() scales them.
TEST(DecodeStepTest, DecodeStepsEqualTheGeneralEvaluationOfEachStep) {
  std::mt19937_64 rng(19);
  std::uniform_real_distribution<double> log_context(0.0, std::log(131072.0));
  int64_t checked = 0;
  for (const std::string& gpu : kGpus)
    for (Profile kind : {Profile::kNone, Profile::kShipped, Profile::kDecodeTable}) {
      const std::optional<CalibrationProfile> profile = profile_for(gpu, kind);
      for (const std::string& model : kModels) {
        const auto cost = make(model, gpu, 1, profile ? &*profile : nullptr);
        ASSERT_TRUE(cost);
        for (int64_t seqs = 1; seqs <= 300; seqs += 7)
          for (int count = 1; count <= StepCostModel::kMaxDecodeSteps; ++count) {
            const LaunchMode launch = static_cast<LaunchMode>((seqs + count) % 3);
            const int64_t context = std::max<int64_t>(1, std::llround(std::exp(log_context(rng))));
            const BatchShape s = decodes(cost->model(), seqs, context, launch);
            StepCost out[StepCostModel::kMaxDecodeSteps];
            cost->decode_steps(s, seqs, count, out);
            for (int j = 0; j < count; ++j) {
              BatchShape at = s;
              at.decode_context_tokens += j * seqs;
              const Bits fast = bits(out[j]), slow = bits(general(*cost, at));
              ASSERT_EQ(std::memcmp(&fast, &slow, sizeof(Bits)), 0)
                  << model << " on " << gpu << " profile " << static_cast<int>(kind) << ": " << seqs << " seqs, step "
                  << j << " of " << count << ", " << fast.v[0] << " s against " << slow.v[0];
              ++checked;
            }
          }
      }
    }
  EXPECT_EQ(checked, 2 * 3 * 6 * 43 * 36);  // GPUs x profiles x models x batch sizes x (1 + 2 + ... + 8)

  const ScaledCostModel scaled(make("llama-3-8b", "h100-sxm", 1, nullptr), 1.25);
  const BatchShape s = decodes(scaled.model(), 40, 40 * 900, LaunchMode::kFullGraph);
  StepCost out[StepCostModel::kMaxDecodeSteps];
  scaled.decode_steps(s, 40, 5, out);
  for (int j = 0; j < 5; ++j) {
    BatchShape at = s;
    at.decode_context_tokens += j * 40;
    StepCost inner = general(static_cast<const RooflineCostModel&>(scaled.inner()), at);
    inner.seconds *= 1.25;
    const Bits fast = bits(out[j]), slow = bits(inner);
    EXPECT_EQ(std::memcmp(&fast, &slow, sizeof(Bits)), 0) << j;
  }
}

// step()'s memo of steps without decodes (RooflineCostModel::prefill_memo_, keyed by the whole
// shape in a direct-mapped table): a replica's prefill-only steps, prompts drawn from a small pool
// so that most repeat (hits), some after cached context (prefix hits, chunks), one to three chunks,
// completing the prompt or not, under each launch mode, each equal to the general evaluation bit
// for bit. Shapes that share a slot's tokens, context and chunk count but differ in their launch or
// logits come one after another: a memo keyed by less than the shape would return the other's cost.
TEST(DecodeStepTest, PrefillOnlyStepsEqualTheGeneralEvaluation) {
  std::mt19937_64 rng(20);
  int64_t checked = 0;
  for (const std::string& gpu : kGpus)
    for (Profile kind : {Profile::kNone, Profile::kShipped}) {
      const std::optional<CalibrationProfile> profile = profile_for(gpu, kind);
      for (const std::string& model : kModels) {
        const auto cost = make(model, gpu, 1, profile ? &*profile : nullptr);
        ASSERT_TRUE(cost);
        const AttentionLimits limits = cost->model().attention_limits();
        const std::vector<int64_t> pool = {1, 7, 128, 129, 512, 1000, 2048, 3333, 8192, 20000};
        for (int step = 0; step < 400; ++step) {
          BatchShape s;
          const int chunks = 1 + static_cast<int>(rng() % 3 == 0 ? rng() % 3 : 0);
          for (int c = 0; c < chunks; ++c) {
            const int64_t prior = rng() % 4 == 0 ? pool[rng() % pool.size()] : 0;
            add_prefill_chunk(s, limits, prior, pool[rng() % pool.size()], rng() % 5 != 0);
          }
          const auto launch = static_cast<LaunchMode>(rng() % 3);
          for (int variant = 0; variant < 3; ++variant) {
            BatchShape v = s;
            v.launch = variant == 0 ? launch : static_cast<LaunchMode>((static_cast<int>(launch) + variant) % 3);
            v.graph_tokens = v.launch == LaunchMode::kEager ? 0 : ((v.tokens() + 7) / 8) * 8;
            if (variant == 2) v.prefill_logits = v.prefill_logits > 0 ? v.prefill_logits - 1 : 1;
            const Bits fast = bits(cost->step(v)), slow = bits(general(*cost, v));
            ASSERT_EQ(std::memcmp(&fast, &slow, sizeof(Bits)), 0)
                << model << " on " << gpu << " profile " << static_cast<int>(kind) << ", step " << step << " variant "
                << variant << ": " << v.prefill_seqs << " chunks, " << v.prefill_tokens << " tokens after "
                << v.prefill_context_tokens << ", " << fast.v[0] << " s against " << slow.v[0];
            ++checked;
          }
        }
      }
    }
  EXPECT_EQ(checked, 2 * 2 * 6 * 400 * 3);  // GPUs x profiles x models x steps x variants
}

// Table2D::at_x, which the memo slices the decode table with: the column's curve gives the table's
// value at every y, bit for bit, on nodes, between them and beyond both ends.
TEST(DecodeStepTest, TableColumnEqualsTheTable) {
  const Table2D table({1, 8, 64, 256}, {128, 1024, 8192, 65536},
                      {{0.11, 0.23, 0.41, 0.52}, {0.19, 0.37, 0.58, 0.66}, {0.27, 0.49, 0.71, 0.79},
                       {0.31, 0.53, 0.77, 0.83}});
  for (double x : {0.5, 1.0, 3.0, 8.0, 100.0, 256.0, 1000.0}) {
    const Curve column = table.at_x(x);
    for (double y : {1.0, 128.0, 300.0, 1024.0, 5000.0, 8192.0, 30000.0, 65536.0, 1e6}) {
      const double a = column(y), b = table(x, y);
      EXPECT_EQ(std::memcmp(&a, &b, sizeof(double)), 0) << x << " " << y << ": " << a << " vs " << b;
    }
  }
  // By hand: at x = 8 (the second x node) the column is {0.23, 0.37, 0.49, 0.53}; y = 2^11.5 is
  // halfway in log2 between 1024 and 8192, so halfway between 0.37 and 0.49.
  EXPECT_DOUBLE_EQ(table.at_x(8)(std::exp2(11.5)), 0.43);
}

}  // namespace
}  // namespace servesim::hwmodels
