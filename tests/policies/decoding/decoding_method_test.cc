#include "policies/decoding/decoding_method.h"

#include <gtest/gtest.h>

#include <cmath>

#include "hwmodels/hf_config.h"
#include "hwmodels/roofline.h"
#include "sim/core/config.h"
#include "tests/test_paths.h"

namespace servesim::policies {
namespace {

std::unique_ptr<DecodingMethod> make(const std::string& body, const hwmodels::ModelSpec& target,
                                     std::optional<double> repetition = std::nullopt) {
  const std::vector<core::ParamSpec> schema = {core::ParamSpec::section("decoding", "decoding", "none", "d")};
  const core::Params p = core::parse_config("[decoding]\n" + body, "d.toml", schema);
  DecodingContext ctx;
  ctx.target = &target;
  ctx.workload_repetition = repetition;
  return decoding_registry().make(p.section("decoding"), ctx);
}

const hwmodels::ModelSpec& preset(const char* name) { return *hwmodels::find_model_preset(name); }

TEST(AcceptanceTest, ConstantAcceptanceHasTheClosedForm) {
  for (double a : {0.0, 0.3, 0.7, 0.9}) {
    const Acceptance acc = Acceptance::per_position({a});
    for (int64_t k = 1; k <= 6; ++k) {
      const double closed = a == 0 ? 1.0 : (1 - std::pow(a, k + 1)) / (1 - a);
      EXPECT_NEAR(acc.expected_tokens(k), closed, 1e-12) << a << " " << k;
    }
  }
  // The draws: 400,000 verifications of 4 drafts at a = 0.75, from one fixed stream.
  const Acceptance acc = Acceptance::per_position({0.75});
  core::Rng rng(1, "acceptance-test");
  double sum = 0;
  const int n = 400000;
  for (int i = 0; i < n; ++i) sum += 1.0 + static_cast<double>(acc.draw(4, rng));
  EXPECT_NEAR(sum / n / ((1 - std::pow(0.75, 5)) / 0.25), 1.0, 0.005);
}

TEST(AcceptanceTest, PerPositionVectorRepeatsItsLastValue) {
  const Acceptance acc = Acceptance::per_position({0.9, 0.8, 0.5});
  EXPECT_DOUBLE_EQ(acc.conditional(1), 0.9);
  EXPECT_DOUBLE_EQ(acc.conditional(3), 0.5);
  EXPECT_DOUBLE_EQ(acc.conditional(7), 0.5);
  // 1 + 0.9 + 0.9 x 0.8 + 0.9 x 0.8 x 0.5 + 0.9 x 0.8 x 0.5 x 0.5.
  EXPECT_NEAR(acc.expected_tokens(4), 1 + 0.9 + 0.72 + 0.36 + 0.18, 1e-12);
}

TEST(AcceptanceTest, AcceptedLengthDistributionIsReproduced) {
  // Of 3 drafts: 0 accepted 10%, 1 20%, 2 30%, 3 40%.
  const Acceptance acc = Acceptance::from_accepted_lengths({1, 2, 3, 4});
  // P(A >= 1) = 0.9, P(A >= 2) = 0.7, P(A >= 3) = 0.4: conditionals 0.9, 7/9, 4/7.
  EXPECT_DOUBLE_EQ(acc.conditional(1), 0.9);
  EXPECT_NEAR(acc.conditional(2), 7.0 / 9.0, 1e-15);
  EXPECT_NEAR(acc.conditional(3), 4.0 / 7.0, 1e-15);
  EXPECT_EQ(acc.conditional(4), 0.0);
  EXPECT_EQ(acc.max_drafts(), 3);
  core::Rng rng(2, "acceptance-test");
  std::vector<int> counts(4, 0);
  const int n = 200000;
  for (int i = 0; i < n; ++i) ++counts[static_cast<size_t>(acc.draw(3, rng))];
  for (size_t j = 0; j < 4; ++j) EXPECT_NEAR(counts[j] / double(n), (j + 1) / 10.0, 0.004) << j;
  // Fewer drafts: min(A, k). With 1 draft: accepted 90% of the time.
  EXPECT_NEAR(acc.expected_tokens(1), 1.9, 1e-12);
}

TEST(DraftScheduleTest, ByBatchSize) {
  const DraftSchedule s = DraftSchedule::by_batch({{4, 5}, {32, 3}, {128, 1}});
  EXPECT_EQ(s.at(1), 5);
  EXPECT_EQ(s.at(4), 5);
  EXPECT_EQ(s.at(5), 3);
  EXPECT_EQ(s.at(128), 1);
  EXPECT_EQ(s.at(129), 0);  // beyond the last threshold: no speculation
  EXPECT_EQ(s.max(), 5);
  EXPECT_EQ(DraftSchedule::fixed(3).at(1000), 3);
}

TEST(DecodingMethodTest, KindsAndTheirDrafters) {
  const hwmodels::ModelSpec& llama = preset("llama-3-8b");
  EXPECT_EQ(make("", llama), nullptr);
  EXPECT_EQ(make("kind = \"none\"\n", llama), nullptr);

  auto ngram = make("kind = \"ngram\"\nk = 4\nacceptance = [0.8]\nmatch_rate = 0.3\n", llama);
  EXPECT_FALSE(ngram->drafter());
  EXPECT_FALSE(ngram->drafter_runs());
  EXPECT_EQ(ngram->draft_tokens(1000), 4);

  auto head = make("kind = \"draft_head\"\nk = 3\nacceptance = [0.7]\n", llama);
  ASSERT_TRUE(head->drafter());
  EXPECT_TRUE(head->catches_up());
  const hwmodels::ModelSpec& h = head->drafter()->spec;
  EXPECT_EQ(h.num_layers, 1);
  EXPECT_TRUE(h.draft_head);
  EXPECT_EQ(h.hidden_size, llama.hidden_size);
  EXPECT_EQ(h.intermediate_size, llama.intermediate_size);
  // Its weights: one Llama-3-8B block and the 2h x h fusion, in 16 bits; not the embedding or head.
  const double d = 4096;
  const double block = d * (4096 + 2 * 1024) + 4096 * d + 3 * d * 14336;  // QKV, O, MLP
  const double expected = (block + 2 * d) * 2 + 2 * d * d * 2;               // + two norms, + fc
  EXPECT_NEAR(drafter_weight_bytes_per_gpu(*head->drafter(), 1), expected, 1.0);
  EXPECT_DOUBLE_EQ(drafter_kv_bytes_per_token_per_gpu(*head->drafter(), 1), 2 * 8 * 128 * 2);

  auto draft = make("kind = \"draft_model\"\nk = 5\nacceptance = [0.6]\n[decoding.model]\nkind = \"llama-3-8b\"\n"
                    "num_layers = 2\n",
                    llama);
  ASSERT_TRUE(draft->drafter());
  EXPECT_FALSE(draft->catches_up());
  EXPECT_EQ(draft->max_draft_tokens(), 5);
  EXPECT_DOUBLE_EQ(drafter_weight_bytes_per_gpu(*draft->drafter(), 1),
                   hwmodels::weight_bytes_per_gpu(draft->drafter()->spec, 1));
  EXPECT_DOUBLE_EQ(drafter_kv_bytes_per_token_per_gpu(*draft->drafter(), 1), 2 * 2 * 8 * 128 * 2);
}

TEST(DecodingMethodTest, MtpUsesTheModelsModules) {
  // DeepSeek-V3's config.json declares one MTP module (num_nextn_predict_layers = 1).
  const hwmodels::ModelSpec v3 =
      hwmodels::read_hf_config(servesim::testing::source_dir() + "/tests/hwmodels/testdata/hf/DeepSeek-V3/config.json");
  EXPECT_EQ(v3.mtp_layers, 1);
  EXPECT_EQ(preset("deepseek-v3").mtp_layers, 1);
  auto mtp = make("kind = \"mtp\"\nacceptance = [0.85]\n", v3);
  ASSERT_TRUE(mtp->drafter());
  EXPECT_EQ(mtp->max_draft_tokens(), 1);  // k defaults to the modules
  const hwmodels::ModelSpec& m = mtp->drafter()->spec;
  EXPECT_EQ(m.num_layers, 1);
  EXPECT_EQ(m.moe_layers(), 1);  // the module's block routes to the model's experts
  EXPECT_TRUE(m.draft_head);
  // Its KV: one MLA layer's latent, 512 + 64 values of 2 bytes, on every GPU.
  EXPECT_DOUBLE_EQ(drafter_kv_bytes_per_token_per_gpu(*mtp->drafter(), 8), 576 * 2);
  // Its weights at TP 8: one MoE block (the difference between a 2- and a 1-block model) and the
  // 2h x h fusion in bf16, nothing of the vocabulary.
  hwmodels::ModelSpec one = m, two = m;
  one.draft_head = two.draft_head = false;
  two.num_layers = 2;
  const double block = hwmodels::weight_bytes_per_gpu(two, 8) - hwmodels::weight_bytes_per_gpu(one, 8);
  EXPECT_NEAR(drafter_weight_bytes_per_gpu(*mtp->drafter(), 8), block + 7168.0 * 2 * 7168 * 2, 1.0);
  EXPECT_NEAR(block / 1e9, 1.5, 0.2);  // 257 experts of 3 x 7168 x 2048 fp8, split 8 ways: ~1.4 GB

  auto mtp3 = make("kind = \"mtp\"\nk = 3\nacceptance = [0.85, 0.7]\n", v3);
  EXPECT_EQ(mtp3->max_draft_tokens(), 3);  // one module reused for 3 drafts
}

TEST(DecodingMethodTest, ListsItsParameters) {
  const core::KindFamily* family = core::find_family("decoding");
  ASSERT_NE(family, nullptr);
  EXPECT_EQ(family->kind_names(), (std::vector<std::string>{"draft_head", "draft_model", "mtp", "ngram", "none"}));
  const core::KindInfo* head = family->find("draft_head");
  std::vector<std::string> names;
  for (const auto& p : head->params) names.push_back(p.name);
  EXPECT_EQ(names, (std::vector<std::string>{"layers", "intermediate_size", "k", "k_schedule", "k_schedule_batch",
                                             "acceptance", "accepted_length_weights"}));
}

}  // namespace
}  // namespace servesim::policies
