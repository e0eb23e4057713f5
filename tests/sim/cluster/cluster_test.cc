// The replica mechanism and the continuous (vLLM v0) scheduler, on hand-computable cases.
#include "sim/cluster/cluster.h"

#include <gtest/gtest.h>

#include "policies/router/router.h"
#include "policies/scheduler/batch_scheduler.h"
#include "sim/core/config.h"
#include "sim/core/rng.h"
#include "tests/sim/cluster/cluster_harness.h"

namespace servesim::sim {
namespace {

using testing::spec;
using testing::ClusterSetup;
using testing::Harness;

constexpr int64_t kMs = 1000000;

TEST(ContinuousSchedulerTest, SingleRequestTimeline) {
  Harness h({spec(0, 10, 3)});
  h.run();
  ASSERT_EQ(h.obs.done.size(), 1u);
  const auto& r = h.obs.done[0];
  EXPECT_EQ(r.outcome, core::RequestOutcome::kCompleted);
  EXPECT_EQ(r.first_token.ns(), 10 * kMs);  // prefill emits the first token
  EXPECT_EQ(r.finish.ns(), 30 * kMs);       // two decode iterations
  EXPECT_EQ(h.obs.gaps, (std::vector<int64_t>{10 * kMs, 10 * kMs}));
  ASSERT_EQ(h.cost.shapes.size(), 3u);
  EXPECT_EQ(h.cost.shapes[0].prefill_tokens, 10);
  EXPECT_EQ(h.cost.shapes[0].prefill_logits, 1);
  EXPECT_EQ(h.cost.shapes[0].prefill_attention_pairs, 55);  // 10 * 11 / 2
  EXPECT_EQ(h.cost.shapes[1].decode_seqs, 1);
  EXPECT_EQ(h.cost.shapes[1].decode_context_tokens, 11);  // 10 prompt + the first output token
  EXPECT_EQ(h.cost.shapes[2].decode_context_tokens, 12);
  // KV grows with the sequence: 10 tokens -> 3 blocks of 4, 11 -> 3, 12 -> 3.
  int64_t peak = 0;
  for (const auto& s : h.obs.states) peak = std::max(peak, s.kv_blocks_used);
  EXPECT_EQ(peak, 3);
}

// vLLM V1's async scheduling: iteration k+1 is planned when iteration k starts, so a request that
// reaches the replica while k runs joins k+2. A decodes in 10 ms iterations from t = 0; B arrives at
// 15 ms, during [10, 20): synchronously its prefill joins [20, 30) (first token at 30 ms); with async
// scheduling [20, 30) was planned at 10 ms, so B joins [30, 40) (first token at 40 ms).
TEST(ContinuousSchedulerTest, AsyncSchedulingAdmitsArrivalsOneIterationLater) {
  for (const bool async : {false, true}) {
    ClusterSetup s;
    s.scheduler = "kind = \"chunked\"\nwatermark = 0.0\n";
    hwmodels::EngineModel e;
    e.async_scheduling = async;
    s.engine = e;
    Harness h({spec(0, 10, 10), spec(0.015, 10, 2)}, s);
    h.run();
    const auto* b = h.obs.find(1);
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(b->first_token.ns(), (async ? 40 : 30) * kMs) << (async ? "async" : "sync");
    // An idle replica sees a request at once, async or not: A's prefill starts at 0.
    EXPECT_EQ(h.obs.find(0)->first_token.ns(), 10 * kMs);
  }
}

TEST(ContinuousSchedulerTest, SingleOutputTokenFinishesAtPrefill) {
  Harness h({spec(0, 7, 1)});
  h.run();
  ASSERT_EQ(h.obs.done.size(), 1u);
  EXPECT_EQ(h.obs.done[0].first_token.ns(), 10 * kMs);
  EXPECT_EQ(h.obs.done[0].finish.ns(), 10 * kMs);
  EXPECT_TRUE(h.obs.gaps.empty());
}

TEST(ContinuousSchedulerTest, PrefillsPreemptDecodeIterations) {
  // A decodes; B arrives at 15 ms; at 20 ms the iteration is B's prefill alone, so A waits 20 ms.
  Harness h({spec(0, 10, 5), spec(0.015, 10, 2)});
  h.run();
  ASSERT_EQ(h.cost.shapes.size(), 6u);
  EXPECT_EQ(h.cost.shapes[2].prefill_tokens, 10);
  EXPECT_EQ(h.cost.shapes[2].decode_seqs, 0);  // vLLM v0: an iteration is all prefill or all decode
  EXPECT_EQ(h.cost.shapes[3].decode_seqs, 2);
  const auto* a = h.obs.find(0);
  const auto* b = h.obs.find(1);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(b->first_token.ns(), 30 * kMs);
  EXPECT_EQ(b->finish.ns(), 40 * kMs);
  EXPECT_EQ(a->finish.ns(), 60 * kMs);  // tokens at 10, 20, 40, 50, 60
}

TEST(ContinuousSchedulerTest, MaxNumSeqsQueuesTheRest) {
  ClusterSetup s;
  s.scheduler = "kind = \"continuous\"\nmax_num_seqs = 1\n";
  Harness h({spec(0, 10, 3), spec(0, 10, 3)}, s);
  h.run();
  EXPECT_EQ(h.obs.find(0)->finish.ns(), 30 * kMs);
  EXPECT_EQ(h.obs.find(1)->first_token.ns(), 40 * kMs);
  EXPECT_EQ(h.obs.find(1)->finish.ns(), 60 * kMs);
}

TEST(ContinuousSchedulerTest, TokenBudgetSplitsPrefills) {
  ClusterSetup s;
  s.max_context = 16;
  s.scheduler = "kind = \"continuous\"\nmax_num_batched_tokens = 20\n";
  Harness h({spec(0, 8, 2), spec(0, 8, 2), spec(0, 8, 2)}, s);
  h.run();
  // The first request's arrival starts an iteration at once; the next two fit one 16-token prefill.
  EXPECT_EQ(h.cost.shapes[0].prefill_tokens, 8);
  EXPECT_EQ(h.cost.shapes[1].prefill_tokens, 16);
  EXPECT_EQ(h.cost.shapes[1].prefill_seqs, 2);
  EXPECT_EQ(h.obs.done.size(), 3u);
}

TEST(ContinuousSchedulerTest, BudgetBelowContextIsAConfigError) {
  const std::vector<core::ParamSpec> schema = {core::ParamSpec::section("scheduler", "schedulers", "continuous", "s")};
  core::Params cfg = core::parse_config("[scheduler]\nmax_num_batched_tokens = 1000\n", "t.toml", schema);
  policies::SchedulerContext ctx;
  ctx.max_context = 4096;
  try {
    policies::scheduler_registry().make(cfg.section("scheduler"), ctx);
    FAIL() << "expected a ConfigError";
  } catch (const core::ConfigError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("t.toml:2:"), std::string::npos) << m;
    EXPECT_NE(m.find("scheduler.max_num_batched_tokens"), std::string::npos) << m;
    EXPECT_NE(m.find("4096"), std::string::npos) << m;
  }
}

TEST(ContinuousSchedulerTest, PreemptsTheNewestByRecompute) {
  // 6 blocks of 4 tokens. A and B each start with 8 prompt tokens (2 blocks) and grow; when A needs
  // its 4th block nothing is free, so B (newer) is preempted, later re-prefilled with its prompt
  // plus what it had generated, and both finish.
  ClusterSetup s;
  s.kv_blocks = 6;
  Harness h({spec(0, 8, 10), spec(0.005, 8, 10)}, s);
  h.run();
  ASSERT_EQ(h.obs.done.size(), 2u);
  EXPECT_EQ(h.obs.preempted, (std::vector<uint64_t>{1}));
  EXPECT_EQ(h.obs.find(0)->preemptions, 0u);
  EXPECT_EQ(h.obs.find(1)->preemptions, 1u);
  // B's recompute prefill covers prompt + generated tokens (more than its 8-token prompt).
  bool saw_recompute = false;
  for (const auto& sh : h.cost.shapes) saw_recompute = saw_recompute || sh.prefill_tokens > 8;
  EXPECT_TRUE(saw_recompute);
  // A never waited for B once preempted: its tokens came every iteration after B's first prefill.
  for (const auto& st : h.obs.states) EXPECT_LE(st.kv_blocks_used, 6);
  EXPECT_EQ(h.obs.states.back().kv_blocks_used, 0);
}

TEST(ContinuousSchedulerTest, RejectsRequestsThatCanNeverRun) {
  ClusterSetup s;
  s.kv_blocks = 4;  // 16 tokens
  s.max_context = 100;
  Harness h({spec(0, 90, 20),    // 110 tokens > context 100
             spec(0, 10, 10),    // peak 19 tokens -> 5 blocks > 4
             spec(0, 10, 7)},    // peak 16 tokens -> 4 blocks: fits exactly
            s);
  h.run();
  ASSERT_EQ(h.obs.done.size(), 3u);
  EXPECT_EQ(h.obs.find(0)->outcome, core::RequestOutcome::kRejectedContext);
  EXPECT_EQ(h.obs.find(1)->outcome, core::RequestOutcome::kRejectedKvCapacity);
  EXPECT_EQ(h.obs.find(2)->outcome, core::RequestOutcome::kCompleted);
  EXPECT_EQ(h.cluster->counters().rejected, 2u);
  EXPECT_EQ(h.cluster->counters().completed, 1u);
}

TEST(ContinuousSchedulerTest, WatermarkShrinksWhatCanBeAdmitted) {
  ClusterSetup s;
  s.kv_blocks = 4;
  s.scheduler = "kind = \"continuous\"\nwatermark = 0.25\n";  // 1 block reserved
  Harness h({spec(0, 10, 3),    // peak 12 -> 3 blocks: fits
             spec(0, 12, 2)},   // peak 13 -> 4 blocks: more than 4 - 1
            s);
  h.run();
  EXPECT_EQ(h.obs.find(0)->outcome, core::RequestOutcome::kCompleted);
  EXPECT_EQ(h.obs.find(1)->outcome, core::RequestOutcome::kRejectedKvCapacity);
}

// Random workloads on tiny KV caches: every request completes or is rejected, token counts add up,
// KV use stays within [0, capacity], and the clock never goes back.
TEST(ContinuousSchedulerTest, RandomWorkloadsConserveRequestsAndBlocks) {
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    core::Rng rng(seed, "cluster-property");
    ClusterSetup s;
    s.replicas = 1 + static_cast<int>(rng.uniform_int(3));
    s.kv_blocks = 3 + static_cast<int64_t>(rng.uniform_int(40));
    s.block_size = 1 + static_cast<int64_t>(rng.uniform_int(16));
    s.max_context = 64 + static_cast<int64_t>(rng.uniform_int(512));
    s.per_token_s = 1e-4;
    const char* routers[] = {"round_robin", "random", "least_outstanding"};
    s.router = std::string("kind = \"") + routers[rng.uniform_int(3)] + "\"\n";
    s.scheduler = "kind = \"continuous\"\nmax_num_seqs = " + std::to_string(1 + rng.uniform_int(8)) +
                  "\nwatermark = " + std::to_string(rng.uniform() * 0.2) + "\n";
    std::vector<traces::RequestSpec> specs;
    double t = 0;
    const int n = 1 + static_cast<int>(rng.uniform_int(60));
    for (int i = 0; i < n; ++i) {
      t += rng.exponential(50.0);
      specs.push_back(spec(t, 1 + static_cast<int64_t>(rng.uniform_int(200)),
                           1 + static_cast<int64_t>(rng.uniform_int(100))));
    }
    Harness h(specs, s);
    ASSERT_NO_THROW(h.run()) << "seed " << seed;
    ASSERT_EQ(h.obs.done.size(), specs.size()) << "seed " << seed;
    for (const auto& r : h.obs.done) {
      const auto& sp = specs[r.id];
      EXPECT_EQ(r.prompt_tokens, sp.prompt_tokens);
      EXPECT_EQ(r.output_tokens, sp.output_tokens);
      if (r.outcome == core::RequestOutcome::kCompleted) {
        EXPECT_GE(r.first_token, r.arrival);
        EXPECT_GE(r.finish, r.first_token);
      }
    }
    for (size_t i = 1; i < h.obs.states.size(); ++i) ASSERT_GE(h.obs.states[i].time, h.obs.states[i - 1].time);
    // Tokens add up: every completed request emitted output_tokens - 1 inter-token gaps.
    size_t expected_gaps = 0;
    for (const auto& r : h.obs.done)
      if (r.outcome == core::RequestOutcome::kCompleted) expected_gaps += static_cast<size_t>(r.output_tokens - 1);
    EXPECT_EQ(h.obs.gaps.size(), expected_gaps) << "seed " << seed;
  }
}

}  // namespace
}  // namespace servesim::sim
