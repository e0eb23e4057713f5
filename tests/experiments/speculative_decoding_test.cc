// Speculative decoding end to end (experiments/run.cc with [decoding]): configurations through the
// simulator under the invariant checker, the acceptance oracle, the memory the drafter takes,
// configuration errors.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "experiments/run.h"
#include "sim/core/config.h"
#include "sim/core/error.h"

namespace servesim::experiments {
namespace {

// 64 requests of 2,000 output tokens on one Llama-3-8B replica: about 50,000 verify steps, enough
// to pin a mean to a fraction of a percent.
std::string config(const std::string& decoding) {
  return R"(
seed = 7
[workload]
kind = "poisson"
rate = 50.0
max_requests = 64
[workload.prompt]
kind = "uniform"
min = 100
max = 400
[workload.output]
kind = "fixed"
value = 2000
[model]
kind = "llama-3-8b"
[gpu]
kind = "h100-sxm"
[cluster]
replicas = 1
[scheduler]
kind = "chunked"
[output]
sample_interval_ms = 0
[decoding]
)" + decoding;
}

RunResult run(const std::string& text, const std::vector<std::string>& sets = {}) {
  const core::Params p = core::parse_config(text, "spec.toml", run_schema(), sets);
  RunOutputs out;
  out.check = true;
  return run_simulation(p, out);
}

TEST(SpeculativeDecodingRunTest, MeanAcceptedLengthMatchesTheClosedForm) {
  // Constant per-position acceptance a, k drafts: E[tokens per verify step] = (1 - a^(k+1)) / (1 - a).
  for (const auto& [k, a] : std::vector<std::pair<int, double>>{{1, 0.85}, {3, 0.7}, {5, 0.6}}) {
    SCOPED_TRACE("k = " + std::to_string(k) + ", a = " + std::to_string(a));
    const RunResult r = run(config("kind = \"draft_head\"\nk = " + std::to_string(k) + "\nacceptance = [" +
                                   std::to_string(a) + "]\n"));
    const metrics::RunSummary& s = r.summary;
    const double expected = (1 - std::pow(a, k + 1)) / (1 - a);
    EXPECT_GT(s.spec_verify_steps, 25000u);
    EXPECT_NEAR(s.spec_mean_accepted_length / expected, 1.0, 0.01) << s.spec_mean_accepted_length;
    EXPECT_NEAR(s.spec_acceptance_rate, (expected - 1) / k, 0.01);
    // What the client sees: tokens per streamed chunk, the same but for each request's truncated last.
    EXPECT_NEAR(s.tokens_per_gap / expected, 1.0, 0.01) << s.tokens_per_gap;
    EXPECT_EQ(s.output_tokens, 64 * 2000);
    EXPECT_EQ(r.decoding_kind, "draft_head");
  }
}

TEST(SpeculativeDecodingRunTest, AcceptedLengthDistributionIsReproduced) {
  // Accepted drafts of 3 measured as 0: 20%, 1: 10%, 2: 30%, 3: 40%: mean accepted 1.9 drafts.
  const RunResult r = run(config("kind = \"draft_head\"\nk = 3\naccepted_length_weights = [2, 1, 3, 4]\n"));
  EXPECT_NEAR(r.summary.spec_mean_accepted_length / 2.9, 1.0, 0.01) << r.summary.spec_mean_accepted_length;
}

TEST(SpeculativeDecodingRunTest, SpeculationShortensDecodeWhenMemoryBound) {
  // Eight requests on an H100: decode streams the weights, so verifying 3 extra tokens costs little
  // and each step yields 2.5 tokens on average: TPOT drops, far from 2.5x because the head's passes
  // and verification are not free.
  const RunResult off = run(config(""), {"workload.max_requests=8"});
  const RunResult on = run(config("kind = \"draft_head\"\nk = 3\nacceptance = [0.7]\n"), {"workload.max_requests=8"});
  EXPECT_EQ(off.summary.spec_draft_tokens, 0);
  EXPECT_DOUBLE_EQ(off.summary.tokens_per_gap, 1.0);
  EXPECT_LT(on.summary.tpot_ms.mean, 0.75 * off.summary.tpot_ms.mean);
  EXPECT_GT(on.summary.tpot_ms.mean, off.summary.tpot_ms.mean / 2.53);
  // Chunks: fewer, longer gaps.
  EXPECT_GT(on.summary.itl_ms.mean, off.summary.itl_ms.mean);
}

TEST(SpeculativeDecodingRunTest, DrafterWeightsAndKvComeOutOfTheCache) {
  const RunResult off = run(config(""), {"workload.max_requests=2"});
  // MTP on DeepSeek-V3 is checked in the hwmodels and policies tests; here a draft model: a
  // 16-layer Llama-3-8B cut-down with the same vocabulary adds its weights and its KV per token.
  const RunResult draft = run(config("kind = \"draft_model\"\nk = 4\nacceptance = [0.6]\n[decoding.model]\n"
                                     "kind = \"llama-3-8b\"\nnum_layers = 16\n"),
                              {"workload.max_requests=2"});
  const RunResult head = run(config("kind = \"draft_head\"\nk = 4\nacceptance = [0.6]\n"), {"workload.max_requests=2"});
  // Half the target's layers: about half its weights less (~7.5 GB of 80) and 1.5x the KV per token.
  EXPECT_LT(draft.kv_blocks_per_replica, off.kv_blocks_per_replica * 2 / 3);
  EXPECT_GT(draft.kv_blocks_per_replica, off.kv_blocks_per_replica / 2);
  // A one-layer head: 1/32 more KV per token and a layer's weights.
  EXPECT_LT(head.kv_blocks_per_replica, off.kv_blocks_per_replica * 32 / 33);
  EXPECT_GT(head.kv_blocks_per_replica, off.kv_blocks_per_replica * 0.9);
}

TEST(SpeculativeDecodingRunTest, ExplicitNoneIsTheDefault) {
  const RunResult absent = run(config(""), {"workload.max_requests=16"});
  const RunResult none = run(config("kind = \"none\"\n"), {"workload.max_requests=16"});
  EXPECT_EQ(absent.summary.e2e_ms.mean, none.summary.e2e_ms.mean);
  EXPECT_EQ(absent.summary.iterations, none.summary.iterations);
}

void expect_config_error(const std::string& decoding, const std::string& key, const std::string& needle,
                         const std::vector<std::string>& sets = {}) {
  try {
    run(config(decoding), sets);
    ADD_FAILURE() << "no error for: " << decoding;
  } catch (const core::ConfigError& e) {
    EXPECT_EQ(e.key(), key) << e.what();
    EXPECT_EQ(e.where().file, "spec.toml") << e.what();
    EXPECT_GT(e.where().line, 20) << e.what();  // in the [decoding] section, not the file as a whole
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(SpeculativeDecodingRunTest, BadConfigurationsNameTheKey) {
  expect_config_error("kind = \"draft_head\"\nacceptance = [0.7]\n", "decoding.k", "missing: set k");
  expect_config_error("kind = \"draft_head\"\nk = 3\n", "decoding.acceptance", "missing");
  expect_config_error("kind = \"draft_head\"\nk = 3\nacceptance = [1.2]\n", "decoding.acceptance[0]", "out of range");
  expect_config_error("kind = \"draft_head\"\nk = 3\nacceptance = [0.5, \"x\"]\n", "decoding.acceptance[1]",
                      "expected a number");
  expect_config_error("kind = \"draft_head\"\nk = 3\nk_schedule = [2]\nk_schedule_batch = [4]\nacceptance = [0.5]\n",
                      "decoding.k_schedule", "not both");
  expect_config_error("kind = \"draft_head\"\nk_schedule = [3, 1]\nk_schedule_batch = [8]\nacceptance = [0.5]\n",
                      "decoding.k_schedule_batch", "must pair up");
  expect_config_error("kind = \"draft_head\"\nk_schedule = [3, 1]\nk_schedule_batch = [8, 8]\nacceptance = [0.5]\n",
                      "decoding.k_schedule_batch", "must increase");
  expect_config_error("kind = \"draft_head\"\nk = 4\naccepted_length_weights = [1, 1, 1]\n",
                      "decoding.accepted_length_weights", "at most 2 accepted drafts");
  expect_config_error("kind = \"mtp\"\nacceptance = [0.8]\n", "decoding.kind", "no multi-token-prediction modules");
  expect_config_error("kind = \"ngram\"\nk = 3\nacceptance = [0.8]\n", "decoding.match_rate", "workload.repetition");
  expect_config_error("kind = \"draft_model\"\nk = 3\nacceptance = [0.8]\n[decoding.model]\nkind = \"llama-2-7b\"\n",
                      "decoding.model.vocab_size", "shares its tokenizer");
  expect_config_error("kind = \"eagle\"\n", "decoding.kind", "unknown decoding kind 'eagle'");
}

TEST(SpeculativeDecodingRunTest, NgramTakesItsMatchesFromTheWorkload) {
  const RunResult r = run(config("kind = \"ngram\"\nk = 4\nacceptance = [0.8]\n"),
                          {"workload.repetition=0.5", "workload.max_requests=16"});
  // Half the steps find a match and verify 4 drafts: 0.5 x 1 + 0.5 x (1 - 0.8^5) / 0.2 tokens a step.
  EXPECT_NEAR(r.summary.tokens_per_gap / (0.5 + 0.5 * (1 - std::pow(0.8, 5)) / 0.2), 1.0, 0.02)
      << r.summary.tokens_per_gap;
  EXPECT_NEAR(r.summary.spec_mean_accepted_length / ((1 - std::pow(0.8, 5)) / 0.2), 1.0, 0.02);
}

// Expert parallelism (issue 15): n-gram drafting, which runs no model, verifies its drafts in an
// expert-parallel replica (the verify tokens go to the attention ranks with their decodes) and keeps
// the closed-form accepted length; a drafter there is refused at decoding.kind.
std::string ep_config(const std::string& decoding) {
  return R"(
seed = 7
[workload]
kind = "poisson"
rate = 50.0
max_requests = 24
repetition = 1.0
[workload.prompt]
kind = "uniform"
min = 100
max = 400
[workload.output]
kind = "fixed"
value = 500
[model]
kind = "mixtral-8x7b"
[gpu]
kind = "h100-sxm"
[cluster]
replicas = 1
expert_parallel = 4
[scheduler]
kind = "chunked"
[output]
sample_interval_ms = 0
[decoding]
)" + decoding;
}

TEST(SpeculativeDecodingRunTest, NgramDraftsRunInAnExpertParallelReplicaAndDraftersAreRefused) {
  const RunResult r = run(ep_config("kind = \"ngram\"\nk = 3\nacceptance = [0.7]\n"));
  EXPECT_EQ(r.pools[0].expert_parallel, 4);
  EXPECT_EQ(r.summary.requests_completed, 24u);
  EXPECT_NEAR(r.summary.spec_mean_accepted_length / ((1 - std::pow(0.7, 4)) / 0.3), 1.0, 0.03)
      << r.summary.spec_mean_accepted_length;
  for (const char* kind : {"draft_head", "draft_model"}) {
    SCOPED_TRACE(kind);
    std::string text = std::string("kind = \"") + kind + "\"\nk = 3\nacceptance = [0.7]\n";
    if (std::string(kind) == "draft_model") text += "[decoding.model]\nkind = \"mixtral-8x7b\"\nnum_layers = 1\n";
    try {
      run(ep_config(text));
      ADD_FAILURE() << "no error";
    } catch (const core::ConfigError& e) {
      EXPECT_EQ(e.key(), "decoding.kind") << e.what();
      EXPECT_NE(std::string(e.what()).find("expert-parallel replica"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace servesim::experiments
