// Prefill/decode backpressure (ClusterLayout::pd_pull = reserve_first): a decode replica pulls a
// request's KV only once it has reserved the blocks of its first decode step; until then the
// prefill replica holds the KV. Built cases whose numbers follow from the block arithmetic.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "sim/core/error.h"
#include "tests/sim/cluster/cluster_harness.h"

namespace servesim::sim {
namespace {

using testing::ClusterSetup;
using testing::Harness;
using testing::spec;

constexpr int64_t kMs = 1'000'000;

// One prefill replica (room for everything) and one decode replica of 20 blocks of 4 tokens; every
// iteration takes 10 ms. A request of 32 prompt tokens and 8 output tokens holds 8 blocks on the
// prefill replica (32 tokens), reserves 9 on the decode replica (33 tokens: its first decode step)
// and grows there to 10 (39 tokens, its last step): the decode replica holds two at once (2 x 9 = 18
// reserved leaves 2 < 9), never three, and never has to preempt.
ClusterSetup built_case() {
  ClusterSetup s;
  s.replicas = 2;
  s.prefill_replicas = 1;
  s.block_size = 4;
  s.kv_blocks_of = {1000, 20};
  return s;
}

std::vector<traces::RequestSpec> six_together() {
  std::vector<traces::RequestSpec> specs;
  for (int i = 0; i < 6; ++i) specs.push_back(spec(0, 32, 8));
  return specs;
}

const core::KvTransfer& transfer_of(const Harness& h, uint64_t id) {
  auto it = std::find_if(h.obs.transfers.begin(), h.obs.transfers.end(), [&](const auto& t) { return t.id == id; });
  if (it == h.obs.transfers.end()) throw core::Error("no transfer of request " + std::to_string(id));
  return *it;
}

// The prefill replica's KV blocks in use after every signal at or before `t`.
int64_t prefill_blocks_at(const Harness& h, int64_t t_ns) {
  int64_t used = -1;
  for (const auto& st : h.obs.states)
    if (st.replica == 0 && st.time.ns() <= t_ns) used = st.kv_blocks_used;
  return used;
}

TEST(PdPullTest, AFullDecodeReplicaLeavesTheKvOnThePrefillReplicaUntilItHasRoom) {
  Harness h(six_together(), built_case());
  h.cluster->start();
  // Request 0 reaches the idle prefill replica first and is prefilled alone (0 - 10 ms); its pull
  // starts at 10 ms. Requests 1 - 5 are prefilled together (10 - 20 ms): at 20 ms request 1's pull
  // takes the decode replica's last room (9 + 9 = 18 of 20 blocks), four wait.
  while (h.sim.now().ns() < 20 * kMs && h.sim.step()) {
  }
  ASSERT_EQ(h.sim.now().ns(), 20 * kMs);
  const ReplicaLoad& decode = h.cluster->loads()[1];
  EXPECT_EQ(decode.pulls_waiting, 4);
  EXPECT_EQ(decode.pull_blocks_reserved, 9);   // request 1's, its KV on the wire
  EXPECT_EQ(decode.kv_blocks_used, 18);        // and request 0's, decoding since its KV landed
  EXPECT_EQ(decode.queued, 5);                 // what a decode router sees: 4 waiting + 1 on the wire
  EXPECT_EQ(decode.running, 1);
  EXPECT_EQ(h.cluster->loads()[0].kv_blocks_used, 5 * 8);  // requests 1 - 5's prompts on the prefill replica
  h.sim.run();
  h.cluster->check_drained();
  h.checker.check_drained();

  ASSERT_EQ(h.obs.done.size(), 6u);  // none lost
  for (const auto& r : h.obs.done) {
    EXPECT_EQ(r.outcome, core::RequestOutcome::kCompleted);
    EXPECT_EQ(r.decode_replica, 1u);
    EXPECT_EQ(r.first_token.ns(), r.id == 0 ? 10 * kMs : 20 * kMs);
  }
  EXPECT_TRUE(h.obs.preempted.empty());
  ASSERT_EQ(h.obs.transfers.size(), 6u);
  for (uint64_t id : {0u, 1u}) {  // room for them at once
    EXPECT_EQ(transfer_of(h, id).ready, h.obs.find(id)->first_token);
    EXPECT_EQ(transfer_of(h, id).start, h.obs.find(id)->first_token);
  }
  // Each waiting pull starts when a decode request finishes and frees its 10 blocks (the other one
  // running holds at most 10): request k + 2 when request k does (FIFO).
  for (uint64_t k = 0; k < 4; ++k) {
    const core::KvTransfer& t = transfer_of(h, k + 2);
    EXPECT_EQ(t.ready.ns(), 20 * kMs);
    EXPECT_EQ(t.start, h.obs.find(k)->finish) << "request " << k + 2;
    EXPECT_GT(t.start.ns(), t.ready.ns());
  }
  // The prefill replica keeps the KV of every request not yet pulled, 8 blocks each, until the
  // transfer of each has ended.
  EXPECT_EQ(prefill_blocks_at(h, transfer_of(h, 1).end.ns()), 4 * 8);
  EXPECT_EQ(prefill_blocks_at(h, transfer_of(h, 2).end.ns() - 1), 4 * 8);
  EXPECT_EQ(prefill_blocks_at(h, transfer_of(h, 2).end.ns()), 3 * 8);
  EXPECT_EQ(prefill_blocks_at(h, transfer_of(h, 4).end.ns()), 1 * 8);
  EXPECT_EQ(prefill_blocks_at(h, transfer_of(h, 5).end.ns()), 0);
  for (const auto& st : h.obs.states)
    if (st.replica == 1) {
      EXPECT_LE(st.kv_blocks_used, 20);
    }
  // The cluster's pull figures: four waits, the longest request 5's, four waiting at most.
  const ClusterCounters& c = h.cluster->counters();
  EXPECT_EQ(c.pull_waits, 4u);
  EXPECT_EQ(c.pulls_waiting_peak, 4);
  EXPECT_DOUBLE_EQ(c.pull_wait_max_s, (transfer_of(h, 5).start - core::Time::from_ns(20 * kMs)).seconds());
}

// What the decode router sees: pulls waiting and under way count as queued at their decode replica.
// Two decode replicas of 20 blocks, least_outstanding; request 0 is prefilled alone (its pull goes to
// replica 1, the lower index of a tie), requests 1 - 9 together, handed off one after the other at
// 20 ms. With reserve_first each pull the router sends somewhere counts there at once (queued), so
// the picks alternate: 1 -> 2 (1 has request 0 running), 2 -> 1 (tie), 3 -> 2, ... With push a
// transfer on the wire counts nowhere until it lands, so every one of them goes to replica 2.
TEST(PdPullTest, DecodeRoutersCountPullsWaitingAndUnderWay) {
  std::vector<traces::RequestSpec> specs;
  for (int i = 0; i < 10; ++i) specs.push_back(spec(0, 32, 8));
  for (PdPull mode : {PdPull::kReserveFirst, PdPull::kPush}) {
    ClusterSetup s = built_case();
    s.replicas = 3;
    s.kv_blocks_of = {1000, 20, 20};
    s.decode_router = "kind = \"least_outstanding\"\n";
    s.pd_pull = mode;
    Harness h(specs, s);
    h.run();
    ASSERT_EQ(h.obs.done.size(), 10u);
    for (const auto& r : h.obs.done) {
      EXPECT_EQ(r.outcome, core::RequestOutcome::kCompleted);
      const uint32_t expected = mode == PdPull::kPush ? (r.id == 0 ? 1u : 2u) : (r.id % 2 == 0 ? 1u : 2u);
      EXPECT_EQ(r.decode_replica, expected) << "request " << r.id << (mode == PdPull::kPush ? " push" : "");
    }
  }
}

TEST(PdPullTest, PushStartsEveryTransferAtOnceAndTheDecodeReplicaQueuesThem) {
  ClusterSetup s = built_case();
  s.pd_pull = PdPull::kPush;
  Harness h(six_together(), s);
  h.run();
  ASSERT_EQ(h.obs.done.size(), 6u);
  int64_t last_end = 0;
  for (const auto& t : h.obs.transfers) {
    EXPECT_EQ(t.start, t.ready);
    EXPECT_EQ(t.start, h.obs.find(t.id)->first_token);
    last_end = std::max(last_end, t.end.ns());
  }
  EXPECT_EQ(prefill_blocks_at(h, last_end), 0);  // the prefill replica let go of everything
  EXPECT_EQ(h.cluster->counters().pull_waits, 0u);
}

TEST(PdPullTest, ARequestTooLargeForTheDecodeMemoryIsRejectedOrStopsTheRunClearly) {
  // 100 prompt + 8 output tokens peak at 107 tokens, 27 blocks: more than the decode replica's 20.
  // The arrival check sees it (the decode pool is uniform): rejected, the other one served.
  {
    Harness h({spec(0, 100, 8), spec(0, 32, 8)}, built_case());
    h.run();
    ASSERT_EQ(h.obs.done.size(), 2u);
    EXPECT_EQ(h.obs.find(0)->outcome, core::RequestOutcome::kRejectedKvCapacity);
    EXPECT_EQ(h.obs.find(1)->outcome, core::RequestOutcome::kCompleted);
  }
  // A decode replica smaller than the first (the arrival check asks the first): its pull could never
  // start, and the run says so instead of waiting forever. Round robin sends request 1 there.
  ClusterSetup s = built_case();
  s.replicas = 3;
  s.kv_blocks_of = {1000, 1000, 20};
  Harness h({spec(0, 100, 8), spec(0, 100, 8)}, s);
  try {
    h.run();
    FAIL() << "expected an error";
  } catch (const core::Error& e) {
    EXPECT_NE(std::string(e.what()).find("request 1 needs 26 KV blocks for its first decode step, more than decode "
                                         "replica 2 can ever reserve (20 blocks"),
              std::string::npos)
        << e.what();
  }
}

TEST(PdPullTest, AClientThatGivesUpWhileItsPullWaitsFreesThePrefillBlocks) {
  ClusterSetup s = built_case();
  s.client_timeout = core::Duration::from_ns(50 * kMs);  // before request 0's 7 decode steps end (> 80 ms)
  Harness h(six_together(), s);
  h.run();  // drained: every block back on both replicas
  ASSERT_EQ(h.obs.done.size(), 6u);
  for (const auto& r : h.obs.done) {
    EXPECT_EQ(r.outcome, core::RequestOutcome::kTimedOut);
    EXPECT_EQ(r.client_finish.ns(), 50 * kMs);
    // The waiting ones leave at once; 0 and 1, decoding, when the decode iteration under way ends.
    if (r.id >= 2) {
      EXPECT_EQ(r.finish.ns(), 50 * kMs);
    }
  }
  EXPECT_EQ(h.obs.transfers.size(), 2u);  // the four waiting pulls never started
  EXPECT_EQ(prefill_blocks_at(h, 50 * kMs - 1), 4 * 8);
  EXPECT_EQ(prefill_blocks_at(h, 50 * kMs), 0);
  EXPECT_EQ(h.cluster->counters().timed_out, 6u);
}

}  // namespace
}  // namespace servesim::sim
