// The cluster's client side on hand-computable cases: client time-outs (the cluster's one timer and
// Replica::abort, from the waiting queue, mid-iteration, in the frontend and after the engine
// finished) and closed-loop workloads (the source hears when each request ends for its client).
// Linear cost model: every iteration lasts 10 ms; blocks of 4 tokens.
#include <gtest/gtest.h>

#include "sim/cluster/cluster.h"
#include "tests/sim/cluster/cluster_harness.h"
#include "tests/traces/trace_test_util.h"

namespace servesim::sim {
namespace {

using testing::ClusterSetup;
using testing::Harness;
using testing::spec;

constexpr int64_t kMs = 1000000;

ClusterSetup one_at_a_time(double timeout_s) {
  ClusterSetup s;
  s.scheduler = "kind = \"continuous\"\nwatermark = 0.0\nmax_num_seqs = 1\n";
  s.client_timeout = core::Duration::from_seconds(timeout_s);
  return s;
}

TEST(ClientTimeoutTest, RunningAndWaitingRequestsLeaveWhenTheirClientGivesUp) {
  // r0 prefills in [0, 10) ms and decodes in [10, 20), [20, 30), ...; r1 waits (max_num_seqs 1).
  // Both clients give up at 25 ms: r1 leaves the queue then; r0's iteration [20, 30) runs to its
  // end, and r0 leaves at 30 ms with the 3 tokens it had (10, 20, 30 ms), its blocks freed.
  Harness h({spec(0, 10, 5), spec(0, 10, 5)}, one_at_a_time(0.025));
  h.run();
  ASSERT_EQ(h.obs.done.size(), 2u);
  const auto& r1 = h.obs.done[0];
  EXPECT_EQ(r1.id, 1u);
  EXPECT_EQ(r1.outcome, core::RequestOutcome::kTimedOut);
  EXPECT_EQ(r1.finish.ns(), 25 * kMs);
  EXPECT_EQ(r1.client_finish.ns(), 25 * kMs);
  EXPECT_EQ(r1.generated_tokens, 0);
  EXPECT_EQ(r1.first_token, r1.finish);
  const auto& r0 = h.obs.done[1];
  EXPECT_EQ(r0.id, 0u);
  EXPECT_EQ(r0.outcome, core::RequestOutcome::kTimedOut);
  EXPECT_EQ(r0.finish.ns(), 30 * kMs);          // the engine let go when the iteration ended
  EXPECT_EQ(r0.client_finish.ns(), 25 * kMs);   // the client gave up at send + 25 ms
  EXPECT_EQ(r0.first_token.ns(), 10 * kMs);
  EXPECT_EQ(r0.client_first_token.ns(), 10 * kMs);
  EXPECT_EQ(r0.generated_tokens, 3);
  EXPECT_EQ(h.obs.gaps, (std::vector<int64_t>{10 * kMs, 10 * kMs}));  // tokens 2 and 3 of r0
  EXPECT_EQ(h.cost.shapes.size(), 3u);  // nothing ran after 30 ms
  EXPECT_EQ(h.cluster->counters().timed_out, 2u);
  EXPECT_EQ(h.cluster->counters().completed, 0u);
  EXPECT_EQ(h.sim.now().ns(), 30 * kMs);
  EXPECT_EQ(h.obs.states.back().kv_blocks_used, 0);
  EXPECT_EQ(h.checker.totals().timed_out, 2u);
}

TEST(ClientTimeoutTest, AnArrivalTheAsyncSchedulerHasNotSeenLeavesWhenItsClientGivesUp) {
  // Async scheduling, 12 ms time-out. r0 prefills in [0, 10) and decodes in [10, 20), planned when
  // [0, 10) started. r1, sent at 5 ms while [0, 10) ran, waits among the arrivals the scheduler has
  // not seen until the plan of [20, 30). r0's client gives up at 12 ms (r0 leaves when [10, 20)
  // ends); r1's at 17 ms, before any scheduler saw it: it leaves from there at 17 ms. (It used to
  // stop the run with "aborting a request that is not in the waiting queue".)
  ClusterSetup s;
  s.scheduler = "kind = \"continuous\"\nwatermark = 0.0\n";
  hwmodels::EngineModel e;
  e.async_scheduling = true;
  s.engine = e;
  s.client_timeout = core::Duration::from_seconds(0.012);
  Harness h({spec(0, 10, 5), spec(0.005, 10, 5)}, s);
  h.run();
  ASSERT_EQ(h.obs.done.size(), 2u);
  const auto& r1 = h.obs.done[0];
  EXPECT_EQ(r1.id, 1u);
  EXPECT_EQ(r1.outcome, core::RequestOutcome::kTimedOut);
  EXPECT_EQ(r1.finish.ns(), 17 * kMs);
  EXPECT_EQ(r1.generated_tokens, 0);
  const auto& r0 = h.obs.done[1];
  EXPECT_EQ(r0.id, 0u);
  EXPECT_EQ(r0.outcome, core::RequestOutcome::kTimedOut);
  EXPECT_EQ(r0.finish.ns(), 20 * kMs);
  EXPECT_EQ(r0.generated_tokens, 2);
  EXPECT_EQ(h.cost.shapes.size(), 2u);  // r1 never ran
  EXPECT_EQ(h.checker.totals().timed_out, 2u);
}

TEST(ClientPathTest, LoadAwareRoutersCountRequestsStillOnTheClientPath) {
  // 50 ms from the send to the engine's queue, two replicas, least_outstanding. Three requests sent
  // at 0, 1 and 2 ms are all on the client path when the next one is routed: a router that saw only
  // the engines' queues would send all three to replica 0 (every load 0, ties to the lowest index).
  // A load balancer counts what it has sent: 0 -> replica 0, 1 -> replica 1, 2 -> replica 0 (ties
  // on count, then fewer prompt tokens waiting: 10 against 20).
  ClusterSetup s;
  s.replicas = 2;
  s.router = "kind = \"least_outstanding\"\n";
  s.client.ingress_s = 0.050;
  Harness h({spec(0, 10, 2), spec(0.001, 20, 2), spec(0.002, 10, 2)}, s);
  h.run();
  ASSERT_EQ(h.obs.done.size(), 3u);
  EXPECT_EQ(h.obs.find(0)->replica, 0u);
  EXPECT_EQ(h.obs.find(1)->replica, 1u);
  EXPECT_EQ(h.obs.find(2)->replica, 0u);
  // The engines' queues (the sampled replica state) never counted a request on the client path.
  for (const auto& st : h.obs.states) EXPECT_LE(st.queued + st.running, 2) << st.time.ns();
}

TEST(ClientTimeoutTest, TheNextRequestRunsWhenAnAbortedOneLeaves) {
  // r0 (5 tokens) runs alone and leaves at 30 ms (its client gave up at 25 ms); r1 (1 token, sent
  // at 10 ms, deadline 35 ms) is admitted at 30 ms instead of 50 ms. Its prefill [30, 40) would
  // complete it, but its client gives up at 35 ms, during that iteration: it is timed out too.
  Harness h({spec(0, 10, 5), spec(0.010, 10, 1)}, one_at_a_time(0.025));
  h.run();
  ASSERT_EQ(h.obs.done.size(), 2u);
  EXPECT_EQ(h.obs.done[0].id, 0u);
  EXPECT_EQ(h.obs.done[0].finish.ns(), 30 * kMs);
  EXPECT_EQ(h.obs.done[0].generated_tokens, 3);
  EXPECT_EQ(h.obs.done[1].id, 1u);
  EXPECT_EQ(h.obs.done[1].outcome, core::RequestOutcome::kTimedOut);
  EXPECT_EQ(h.obs.done[1].first_token.ns(), 40 * kMs);
  EXPECT_EQ(h.obs.done[1].finish.ns(), 40 * kMs);
  EXPECT_EQ(h.obs.done[1].client_finish.ns(), 35 * kMs);
  EXPECT_EQ(h.obs.done[1].client_first_token.ns(), 35 * kMs);  // the token came after the client left
  EXPECT_EQ(h.obs.done[1].generated_tokens, 1);
  ASSERT_EQ(h.cost.shapes.size(), 4u);
  EXPECT_EQ(h.cost.shapes[3].prefill_tokens, 10);  // r1's prefill, right after r0 left
}

TEST(ClientTimeoutTest, ALateLastTokenIsATimeOutAndATimerNeverExtendsTheRun) {
  // 10 ms between the engine and the client, 25 ms time-out. r0 finishes at 20 ms in the engine
  // (prefill [0, 10), one decode [10, 20)) and would reach its client at 30 ms: timed out, though its
  // first token reached the client at 20 ms. r1, sent at 30 ms, finishes at 40 ms and reaches its
  // client at 50 ms, before its deadline at 55 ms.
  ClusterSetup s;
  s.client.egress_s = 0.010;
  s.client_timeout = core::Duration::from_seconds(0.025);
  Harness h({spec(0, 10, 2), spec(0.030, 3, 1)}, s);
  h.run();
  ASSERT_EQ(h.obs.done.size(), 2u);
  const auto& r0 = h.obs.done[0];
  EXPECT_EQ(r0.outcome, core::RequestOutcome::kTimedOut);
  EXPECT_EQ(r0.finish.ns(), 20 * kMs);
  EXPECT_EQ(r0.client_finish.ns(), 25 * kMs);
  EXPECT_EQ(r0.client_first_token.ns(), 20 * kMs);
  EXPECT_EQ(r0.generated_tokens, 2);
  const auto& r1 = h.obs.done[1];
  EXPECT_EQ(r1.outcome, core::RequestOutcome::kCompleted);
  EXPECT_EQ(r1.finish.ns(), 40 * kMs);
  EXPECT_EQ(r1.client_finish.ns(), 50 * kMs);
  // The run ends with the last iteration: r1's deadline (55 ms) is a weak timer.
  EXPECT_EQ(h.sim.now().ns(), 40 * kMs);
}

TEST(ClientTimeoutTest, ARequestStillInTheFrontendLeavesWithoutReachingAQueue) {
  ClusterSetup s;
  s.client.ingress_s = 0.050;
  s.client_timeout = core::Duration::from_seconds(0.030);
  Harness h({spec(0, 10, 2)}, s);
  h.run();
  ASSERT_EQ(h.obs.done.size(), 1u);
  EXPECT_EQ(h.obs.done[0].outcome, core::RequestOutcome::kTimedOut);
  EXPECT_EQ(h.obs.done[0].finish.ns(), 30 * kMs);
  EXPECT_TRUE(h.cost.shapes.empty());  // it never ran
  EXPECT_EQ(h.sim.now().ns(), 50 * kMs);  // its slot is freed when the frontend would have passed it on
  EXPECT_EQ(h.cluster->in_flight(), 0u);
}

TEST(ClientTimeoutTest, ASwappedOutRequestReturnsItsHostMemory) {
  // Three 10 + 10 requests on 10 blocks of 4 tokens, swap preemption: at 30 ms the three need 4
  // blocks each and the newest is swapped out. At 45 ms every client gives up: the two running
  // leave when their iteration ends, the swapped one at once; the checker and check_drained see
  // every block returned.
  ClusterSetup s;
  s.kv_blocks = 10;
  s.preemption = PreemptionMode::kSwap;
  s.client_timeout = core::Duration::from_seconds(0.045);
  Harness h({spec(0, 10, 10), spec(0, 10, 10), spec(0, 10, 10)}, s);
  h.run();
  EXPECT_FALSE(h.obs.preempted.empty());
  uint64_t timed_out = 0;
  for (const auto& r : h.obs.done) timed_out += r.outcome == core::RequestOutcome::kTimedOut;
  EXPECT_EQ(timed_out, 3u);
  EXPECT_EQ(h.obs.states.back().kv_blocks_used, 0);
}

// The disaggregated setup of DisaggregationTest: the prefill replica's iteration [0, 10) ms, then
// 100 MB over 10 GB/s in 10 ms + 6 us, then decode iterations of 10 ms on the decode replica.
ClusterSetup disaggregated(double timeout_s) {
  ClusterSetup s;
  s.replicas = 2;
  s.prefill_replicas = 1;
  s.kv_bytes_per_token = 1e6;
  s.topology.gpus_per_node = 1;
  s.topology.pcie_bytes_per_s = 10e9;
  s.topology.nic_bytes_per_s = 50e9;
  s.topology.pcie_latency_s = 1e-6;
  s.topology.nic_latency_s = 2e-6;
  s.client_timeout = core::Duration::from_seconds(timeout_s);
  return s;
}

TEST(ClientTimeoutTest, ARequestWhoseKvIsOnTheWireLeavesWhenTheTransferEnds) {
  // The client gives up at 15 ms, during the transfer: the transfer completes (its bytes are
  // counted), the prefill replica frees the blocks, and the request never reaches the decode replica.
  Harness h({spec(0, 100, 4)}, disaggregated(0.015));
  h.run();
  ASSERT_EQ(h.obs.done.size(), 1u);
  const auto& r = h.obs.done[0];
  EXPECT_EQ(r.outcome, core::RequestOutcome::kTimedOut);
  EXPECT_EQ(r.finish.ns(), 20 * kMs + 6000);
  EXPECT_EQ(r.client_finish.ns(), 15 * kMs);
  EXPECT_EQ(r.generated_tokens, 1);
  EXPECT_EQ(r.decode_replica, 0u);
  EXPECT_DOUBLE_EQ(r.kv_transfer_bytes, 100e6);
  ASSERT_EQ(h.obs.transfers.size(), 1u);
  for (const auto& it : h.obs.iterations) EXPECT_EQ(it.replica, 0u);  // nothing ran on the decode replica
}

TEST(ClientTimeoutTest, ADecodingRequestLeavesTheDecodeReplica) {
  // The client gives up at 25 ms, during the first decode iteration [20.006, 30.006) ms.
  Harness h({spec(0, 100, 4)}, disaggregated(0.025));
  h.run();
  ASSERT_EQ(h.obs.done.size(), 1u);
  const auto& r = h.obs.done[0];
  EXPECT_EQ(r.outcome, core::RequestOutcome::kTimedOut);
  EXPECT_EQ(r.finish.ns(), 30 * kMs + 6000);
  EXPECT_EQ(r.generated_tokens, 2);
  EXPECT_EQ(r.replica, 0u);
  EXPECT_EQ(r.decode_replica, 1u);
}

std::unique_ptr<traces::ArrivalSource> closed_loop(const std::string& arrival, int64_t output = 2,
                                                   const std::string& extra = "") {
  return traces::testing::make_workload("[workload]\nkind = \"synthetic\"\n" + extra +
                                        "[workload.prompt]\nkind = \"fixed\"\nvalue = 10\n"
                                        "[workload.output]\nkind = \"fixed\"\nvalue = " +
                                        std::to_string(output) + "\n[workload.arrival]\n" + arrival);
}

std::vector<int64_t> arrivals(const Harness& h) {
  std::vector<int64_t> out(h.obs.done.size());
  for (const auto& r : h.obs.done) out[r.id] = r.arrival.ns();
  return out;
}

TEST(ClosedLoopTest, EachClientSendsWhenItHasItsLastToken) {
  // Two clients send at time 0. The first send starts an iteration at once (r0's prefill [0, 10)),
  // r1 prefills [10, 20), both decode [20, 30): their last tokens reach the clients at 31 ms (1 ms
  // stream), which think 4 ms: r2 and r3 are sent at 35 ms. They run [35, 45), [45, 55), [55, 65):
  // r4 is sent at 70 ms and runs [70, 80), [80, 90).
  ClusterSetup s;
  s.client.egress_s = 0.001;
  Harness h(closed_loop("kind = \"closed_loop\"\nconcurrency = 2\nrequests = 5\nthink_time_s = 0.004\n"), s);
  h.run();
  EXPECT_EQ(arrivals(h), (std::vector<int64_t>{0, 0, 35 * kMs, 35 * kMs, 70 * kMs}));
  EXPECT_EQ(h.obs.done.back().finish.ns(), 90 * kMs);
  EXPECT_EQ(h.sim.now().ns(), 90 * kMs);
  EXPECT_EQ(h.cluster->counters().completed, 5u);
}

TEST(ClosedLoopTest, ATimedOutRequestFreesItsClientAtTheTimeOut) {
  // One client, 5 output tokens, 15 ms time-out. r0 prefills [0, 10) and decodes [10, 20); its
  // client gives up at 15 ms and sends r1 at once (r0 leaves the engine at 20 ms). r1 prefills
  // [20, 30); its client gives up at 30 ms and sends r2, which prefills [30, 40), decodes [40, 50)
  // and leaves at 50 ms (its client gave up at 45 ms).
  ClusterSetup s;
  Harness h(closed_loop("kind = \"closed_loop\"\nconcurrency = 1\nrequests = 3\n", 5, "client_timeout_s = 0.015\n"),
            s);
  h.run();
  EXPECT_EQ(arrivals(h), (std::vector<int64_t>{0, 15 * kMs, 30 * kMs}));
  ASSERT_EQ(h.obs.done.size(), 3u);
  const std::vector<int64_t> finish = {20 * kMs, 30 * kMs, 50 * kMs};
  const std::vector<int64_t> generated = {2, 1, 2};
  for (const auto& r : h.obs.done) {
    EXPECT_EQ(r.outcome, core::RequestOutcome::kTimedOut) << r.id;
    EXPECT_EQ(r.finish.ns(), finish[r.id]) << r.id;
    EXPECT_EQ(r.generated_tokens, generated[r.id]) << r.id;
    EXPECT_EQ((r.client_finish - r.arrival).ns(), 15 * kMs) << r.id;
  }
  EXPECT_EQ(h.sim.now().ns(), 50 * kMs);
}

TEST(ClosedLoopTest, ARejectedRequestFreesItsClientAtOnce) {
  // A prompt longer than the context is refused at its send; the client sends the next at once.
  ClusterSetup s;
  s.max_context = 8;
  Harness h(closed_loop("kind = \"closed_loop\"\nconcurrency = 1\nrequests = 3\n"), s);
  h.run();
  EXPECT_EQ(arrivals(h), (std::vector<int64_t>{0, 0, 0}));
  EXPECT_EQ(h.cluster->counters().rejected, 3u);
  EXPECT_EQ(h.sim.now().ns(), 0);
}

// With only a duration and no think time, clients whose every request is refused at its send would
// send forever at time 0: the run stops with an error that says why.
TEST(ClosedLoopTest, ClientsWhoseEveryRequestIsRefusedStopTheRunInsteadOfSpinning) {
  ClusterSetup s;
  s.max_context = 8;
  Harness h(closed_loop("kind = \"closed_loop\"\nconcurrency = 2\nduration_s = 1.0\n"), s);
  try {
    h.cluster->start();
    h.sim.run();
    ADD_FAILURE() << "no error";
  } catch (const core::Error& e) {
    EXPECT_NE(std::string(e.what()).find("without the clock moving"), std::string::npos) << e.what();
  }
  EXPECT_EQ(h.sim.now().ns(), 0);
}

TEST(ClosedLoopTest, DrainedStagesStartAfterTheLastRequestOfTheStageEnded) {
  // Stage 0: evenly spaced at 100 req/s for 20 ms (sends at 0 and 10 ms). r0 prefills [0, 10) and
  // decodes [10, 20) (r1 arrives just after the replica planned that iteration); r1 prefills
  // [20, 30) and decodes [30, 40). The stage's duration is over at 20 ms, its last request ends at
  // 40 ms; stage 1 starts 5 ms later, at 45 ms.
  ClusterSetup s;
  Harness h(closed_loop("kind = \"stages\"\ninterval_s = 0.005\n"
                        "[[workload.arrival.stages]]\nrate = 100.0\nduration_s = 0.02\ntype = \"constant\"\n"
                        "[[workload.arrival.stages]]\nrate = 100.0\nduration_s = 0.02\ntype = \"constant\"\n"),
            s);
  h.run();
  EXPECT_EQ(arrivals(h), (std::vector<int64_t>{0, 10 * kMs, 45 * kMs, 55 * kMs}));
  std::vector<uint32_t> stages(4);
  for (const auto& r : h.obs.done) stages[r.id] = r.stage;
  EXPECT_EQ(stages, (std::vector<uint32_t>{0, 0, 1, 1}));
}

}  // namespace
}  // namespace servesim::sim
