// The replica's speculative-decoding mechanism (sim/cluster/replica.cc with a sim::Speculator):
// verification tokens in the plan, the budget and the KV; variable tokens per step; rejected drafts'
// KV freed; outputs never overrun; the same draws for the same seed.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "tests/sim/cluster/cluster_harness.h"

namespace servesim::testing {
namespace {

// Every request of every replica holds at most the blocks its current tokens and the drafts its
// next decode verifies need, and the cache's count is the sum of the requests'.
void expect_kv_tight(Harness& h, int64_t block_size) {
  for (const auto& replica : h.cluster->replicas()) {
    int64_t held = 0;
    for (sim::RequestId id : replica->running()) {
      const sim::Request& r = replica->request(id);
      const int64_t need = r.decoding ? r.kv_tokens + 1 + r.drafts : r.prefill_target();
      EXPECT_LE(r.kv_blocks, (need + block_size - 1) / block_size)
          << "request " << r.id << " holds " << r.kv_blocks << " blocks for " << r.kv_tokens << " tokens and "
          << r.drafts << " drafts";
      held += r.kv_blocks;
    }
    EXPECT_EQ(replica->kv().in_use(), held);
  }
}

TEST(SpeculationTest, RejectedDraftsFreeTheirKv) {
  ClusterSetup s;
  s.block_size = 2;
  s.kv_blocks = 400;
  // k shrinks as requests arrive (4 drafts alone, 2 with up to three others, none beyond), so a
  // request's drafts, and the KV they reserve, go up and down.
  s.decoding = "kind = \"ngram\"\nmatch_rate = 0.9\nacceptance = [0.5]\nk_schedule = [4, 2]\nk_schedule_batch = [1, 4]\n";
  std::vector<traces::RequestSpec> specs;
  for (int i = 0; i < 12; ++i) specs.push_back(spec(0.05 * i, 10 + 3 * i, 30 + 7 * i));
  Harness h(specs, s);
  h.cluster->start();
  int64_t steps = 0;
  while (h.sim.step()) {
    expect_kv_tight(h, s.block_size);
    if (::testing::Test::HasFailure()) return;
    ++steps;
  }
  h.cluster->check_drained();
  h.checker.check_drained();
  EXPECT_GT(steps, 50);
  int64_t drafted = 0, accepted = 0;
  for (const auto& it : h.obs.iterations) {
    drafted += it.draft_tokens;
    accepted += it.accepted_tokens;
  }
  EXPECT_GT(drafted, 100);
  EXPECT_GT(drafted - accepted, 50);  // rejections happened, and their KV went back
}

TEST(SpeculationTest, HybridCachesFreeRejectedDraftsToo) {
  // Sliding-window layers (window 16) and full + linear-attention layers: a decode's drafts take
  // pages of every per-token layer, and the rejected ones' go back.
  for (int layout = 0; layout < 2; ++layout) {
    SCOPED_TRACE(layout == 0 ? "window" : "full + linear");
    ClusterSetup s;
    s.kv_blocks = 400;
    if (layout == 0) {
      s.kv_layout.window_bytes_per_token = 1000;
      s.kv_layout.window = 16;
      s.attention_pattern = "S";
      s.sliding_window = 16;
    } else {
      s.kv_layout.full_bytes_per_token = 1000;
      s.kv_layout.state_bytes = 4000;
      s.attention_pattern = "LF";
    }
    s.decoding = "kind = \"ngram\"\nmatch_rate = 0.9\nacceptance = [0.5]\nk_schedule = [4, 2]\nk_schedule_batch = [1, 4]\n";
    std::vector<traces::RequestSpec> specs;
    for (int i = 0; i < 10; ++i) specs.push_back(spec(0.05 * i, 30 + 3 * i, 40 + 7 * i));
    Harness h(specs, s);
    h.cluster->start();
    while (h.sim.step()) {
      for (const auto& replica : h.cluster->replicas()) {
        int64_t held = 0;
        for (sim::RequestId id : replica->running()) {
          const sim::Request& r = replica->request(id);
          // Window pages that fell out of the window go back at the request's next reservation (as
          // without speculation): measured from its tokens before its last step (at most 1 + 4).
          if (r.decoding) {
            EXPECT_LE(r.kv_blocks, replica->kv().request_blocks(r.shared_tokens, std::max<int64_t>(0, r.kv_tokens - 5),
                                                                r.kv_tokens + 1 + r.drafts))
                << "request " << r.id;
          }
          held += r.kv_blocks;
        }
        EXPECT_EQ(replica->kv().in_use(), held);
      }
      if (::testing::Test::HasFailure()) return;
    }
    h.cluster->check_drained();
    h.checker.check_drained();
    int64_t drafted = 0;
    for (const auto& it : h.obs.iterations) drafted += it.draft_tokens;
    EXPECT_GT(drafted, 100);
  }
}

TEST(SpeculationTest, BudgetCountsVerificationTokens) {
  // Chunked prefill with a 10-token budget: three decoding requests verifying 3 drafts each would
  // need 12 tokens; the last one's drafts are cut to fit. A prompt gets what the decodes and their
  // drafts leave (2 tokens of the third prompt beside two decodes verifying 3 drafts each).
  ClusterSetup s;
  s.scheduler = "kind = \"chunked\"\nmax_num_batched_tokens = 10\nwatermark = 0.0\n";
  s.decoding = "kind = \"ngram\"\nmatch_rate = 1.0\nacceptance = [0.0]\nk = 3\n";
  Harness h({spec(0, 4, 40), spec(0, 4, 40), spec(0, 20, 40), spec(0.5, 30, 5)}, s);
  h.run();
  bool cut = false, mixed = false;
  for (const auto& shape : h.cost.shapes) {
    EXPECT_LE(shape.tokens(), 10) << "prefill " << shape.prefill_tokens << ", decodes " << shape.decode_seqs
                                  << ", draft tokens " << shape.decode_extra_tokens;
    cut = cut || (shape.decode_seqs == 3 && shape.decode_extra_tokens == 7);
    mixed = mixed || (shape.decode_extra_tokens > 0 && shape.prefill_tokens > 0);
  }
  EXPECT_TRUE(cut);
  EXPECT_TRUE(mixed);
}

TEST(SpeculationTest, TokensPerStepFollowAcceptanceAndStopAtTheOutput) {
  // Every draft accepted: the prefill emits the first token, then each decode verifies 4 drafts and
  // emits 5 tokens in one chunk, and the last one only what the 13-token output has left.
  ClusterSetup s;
  s.decoding = "kind = \"ngram\"\nmatch_rate = 1.0\nacceptance = [1.0]\nk = 4\n";
  Harness h({spec(0, 8, 13)}, s);
  h.run();
  ASSERT_EQ(h.obs.done.size(), 1u);
  EXPECT_EQ(h.obs.done[0].output_tokens, 13);
  // Drafts are proposed at the end of the prefill's iteration, so the first decode verifies 4
  // already: 1 + 4 = 5 tokens, 5, then the 2 the output has left.
  EXPECT_EQ(h.obs.gap_tokens, (std::vector<int64_t>{5, 5, 2}));
  ASSERT_EQ(h.obs.iterations.size(), 4u);
  EXPECT_EQ(h.obs.iterations[1].draft_tokens, 4);
  EXPECT_EQ(h.obs.iterations[1].extra_decode_tokens, 4);
  EXPECT_EQ(h.obs.iterations[3].accepted_tokens, 4);
  EXPECT_EQ(h.obs.iterations[3].extra_decode_tokens, 1);  // 2 emitted of the 5 accepted + bonus
  // Each decode's step processes its input token and its 4 drafts.
  EXPECT_EQ(h.cost.shapes[1].tokens(), 5);
  EXPECT_EQ(h.cost.shapes[1].decode_extra_pairs, 4 * 9 + 10);  // context 9: 4 x 9 + 4 x 5 / 2
}

TEST(SpeculationTest, NoMatchMeansAPlainDecode) {
  ClusterSetup s;
  s.decoding = "kind = \"ngram\"\nmatch_rate = 0.0\nacceptance = [1.0]\nk = 4\n";
  Harness h({spec(0, 8, 20)}, s);
  h.run();
  for (const auto& it : h.obs.iterations) EXPECT_EQ(it.draft_tokens, 0);
  for (int64_t t : h.obs.gap_tokens) EXPECT_EQ(t, 1);
  for (const auto& shape : h.cost.shapes) EXPECT_EQ(shape.draft_passes, 0);  // n-gram: no drafter
}

TEST(SpeculationTest, DrafterPassesAreInTheShape) {
  // A draft head (the test model is a 1-layer stand-in): pass 1 re-reads the accepted tokens, then
  // k - 1 more passes for every sequence.
  ClusterSetup s;
  s.decoding = "kind = \"draft_head\"\nacceptance = [1.0]\nk = 3\n";
  Harness h({spec(0, 8, 30), spec(0.001, 6, 30)}, s);
  h.run();
  ASSERT_GE(h.cost.shapes.size(), 3u);
  // The first prompt's iteration: it completes and gets 3 drafts; the drafter's first pass runs
  // over the prompt, and two more passes follow, the second from context 8 + 1.
  EXPECT_EQ(h.cost.shapes[0].prefill_tokens, 8);
  EXPECT_EQ(h.cost.shapes[0].draft_passes, 3);
  EXPECT_EQ(h.cost.shapes[0].draft_seqs, 1);
  EXPECT_EQ(h.cost.shapes[0].draft_context_tokens, 8 + 1);
  // The second prompt (continuous batching prefills it alone); then both decode, verifying 3 drafts
  // each, all accepted, so the drafter catches up on 3 tokens of each, from contexts 9 + 4 and 7.
  EXPECT_EQ(h.cost.shapes[1].prefill_tokens, 6);
  EXPECT_EQ(h.cost.shapes[1].draft_passes, 3);
  const hwmodels::BatchShape& d = h.cost.shapes[2];
  EXPECT_EQ(d.decode_seqs, 2);
  EXPECT_EQ(d.decode_extra_tokens, 6);
  EXPECT_EQ(d.draft_catchup_tokens, 6);
  EXPECT_EQ(d.draft_catchup_pairs, (3 * 9 + 6) + (3 * 7 + 6));
  EXPECT_EQ(d.draft_context_tokens, (8 + 4 + 1) + (6 + 4 + 1));
}

TEST(SpeculationTest, SameSeedSameDrawsOtherSeedOtherDraws) {
  auto run = [](uint64_t seed) {
    ClusterSetup s;
    s.seed = seed;
    s.decoding = "kind = \"ngram\"\nmatch_rate = 0.7\nacceptance = [0.6, 0.5]\nk = 3\n";
    std::vector<traces::RequestSpec> specs;
    for (int i = 0; i < 20; ++i) specs.push_back(spec(0.01 * i, 20, 50));
    Harness h(specs, s);
    h.run();
    std::vector<int64_t> out;
    for (const auto& it : h.obs.iterations) {
      out.push_back(it.draft_tokens);
      out.push_back(it.accepted_tokens);
      out.push_back(it.duration.ns());
    }
    return out;
  };
  EXPECT_EQ(run(5), run(5));
  EXPECT_NE(run(5), run(6));
}

TEST(SpeculationTest, KvCapacityRejectionCountsTheDrafts) {
  // 10 blocks of 4 tokens: a 30 + 8 token request fits without speculation (37 tokens at its
  // peak), not with 4 drafts that the engine may reserve at its last step.
  ClusterSetup s;
  s.kv_blocks = 10;
  s.block_size = 4;
  Harness plain({spec(0, 30, 8)}, s);
  plain.run();
  EXPECT_EQ(plain.obs.done[0].outcome, core::RequestOutcome::kCompleted);
  s.decoding = "kind = \"ngram\"\nmatch_rate = 1.0\nacceptance = [0.5]\nk = 4\n";
  Harness spec_run({spec(0, 30, 8)}, s);
  spec_run.run();
  EXPECT_EQ(spec_run.obs.done[0].outcome, core::RequestOutcome::kRejectedKvCapacity);
}

TEST(SpeculationTest, WorkloadRepetitionDrivesNgramMatches) {
  auto drafted_share = [](double repetition) {
    ClusterSetup s;
    s.workload_repetition = repetition;
    s.decoding = "kind = \"ngram\"\nacceptance = [0.0]\nk = 2\n";
    std::vector<traces::RequestSpec> specs;
    for (int i = 0; i < 10; ++i) {
      specs.push_back(spec(0.01 * i, 20, 400));
      specs.back().repetition = repetition;
    }
    Harness h(specs, s);
    h.run();
    int64_t decodes = 0, verifying = 0;
    for (const auto& it : h.obs.iterations) {
      decodes += it.decode_tokens;
      verifying += it.verify_seqs;
    }
    return static_cast<double>(verifying) / static_cast<double>(decodes);
  };
  // Each step after the first of a request proposes with probability `repetition`.
  EXPECT_NEAR(drafted_share(0.2), 0.2, 0.03);
  EXPECT_NEAR(drafted_share(0.8), 0.8, 0.03);
}

}  // namespace
}  // namespace servesim::testing
