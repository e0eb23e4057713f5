// Fault injection ([faults], issue 17): a replica failure at a known time, its requests recomputed
// elsewhere (or failed) and counted; parking while no replica is up; stragglers; drawn failures.
// Every case runs through the invariant checker (Harness), and every expected time is computed by
// hand from the linear cost model (10 ms per iteration, whatever the batch).
#include <gtest/gtest.h>

#include "sim/core/rng.h"
#include "tests/sim/cluster/cluster_harness.h"

namespace servesim::testing {
namespace {

core::Time ms(double v) { return core::Time::from_ns(static_cast<int64_t>(v * 1e6 + 0.5)); }

sim::FaultEvent failure(uint32_t replica, double at_ms, std::optional<double> repair_ms = std::nullopt) {
  sim::FaultEvent e;
  e.replica = replica;
  e.at = ms(at_ms);
  if (repair_ms) e.repair = core::Duration::from_seconds(*repair_ms * 1e-3);
  return e;
}

// Two replicas (round robin), A -> replica 0 and B -> replica 1 at t = 0, 8-token prompts, 10 output
// tokens. Continuous batching: an iteration is all prefills or all decodes, prefills first.
// Without a failure each finishes at 100 ms (prefill [0, 10), then nine 10-ms decodes).
// Replica 0 fails at 35 ms: A has its tokens of 10, 20, 30 ms; the iteration [30, 40) is lost. The
// router's third pick is replica 0 (down), so A goes to replica 1, which is in B's decode [30, 40).
// At 40 ms replica 1 prefills A's 8 + 3 = 11 tokens ([40, 50): A's 4th token at 50 ms, B waits);
// from 50 ms both decode: tokens at 60 ... 110 ms, so both finish at 110 ms.
TEST(FaultsTest, FailedReplicasRequestsAreRecomputedElsewhereAndCounted) {
  ClusterSetup s;
  s.replicas = 2;
  Harness h({spec(0, 8, 10), spec(0, 8, 10)}, s);
  sim::FaultPlan plan;
  plan.events = {failure(0, 35)};
  h.cluster->set_faults(plan);
  h.run();

  const core::RequestRecord* a = h.obs.find(0);
  const core::RequestRecord* b = h.obs.find(1);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->outcome, core::RequestOutcome::kCompleted);
  EXPECT_EQ(a->replica, 0u);         // routed there first
  EXPECT_EQ(a->decode_replica, 1u);  // finished on the survivor
  EXPECT_EQ(a->first_token, ms(10));
  EXPECT_EQ(a->finish, ms(110));
  EXPECT_EQ(a->generated_tokens, 10);
  EXPECT_EQ(b->finish, ms(110));

  // The recompute prefill: prompt + the three tokens already produced.
  bool recompute_seen = false;
  for (const auto& it : h.obs.iterations)
    if (it.replica == 1 && it.start == ms(40)) {
      recompute_seen = true;
      EXPECT_EQ(it.prefill_tokens, 11);
      EXPECT_EQ(it.decode_tokens, 0);
    }
  EXPECT_TRUE(recompute_seen);
  // The client sees a 20 ms gap (30 -> 50 ms) between A's 3rd and 4th tokens.
  EXPECT_EQ(std::count(h.obs.gaps.begin(), h.obs.gaps.end(), int64_t{20'000'000}), 2);  // A's, and B's 40 -> 60

  ASSERT_EQ(h.obs.fleet.size(), 2u);
  EXPECT_EQ(h.obs.fleet[0].kind, core::FleetEventKind::kReplicaDown);
  EXPECT_EQ(h.obs.fleet[0].replica, 0u);
  EXPECT_EQ(h.obs.fleet[0].time, ms(35));
  EXPECT_EQ(h.obs.fleet[0].value, 1.0);  // it held one request
  EXPECT_EQ(h.obs.fleet[1].kind, core::FleetEventKind::kRequestRerouted);
  EXPECT_EQ(h.obs.fleet[1].request, 0u);
  EXPECT_EQ(h.cluster->counters().rerouted, 1u);
  EXPECT_EQ(h.cluster->counters().replica_failures, 1u);
  EXPECT_EQ(h.cluster->counters().completed, 2u);
  EXPECT_EQ(h.checker.totals().lost_decodes, 1);  // A's decode in [30, 40)
}

// A node failure: replicas 0 and 1 share a node and go down together at 35 ms; C runs on replica 2.
// Both lost requests go to replica 2, none to replica 1 (round robin's next pick for B, already
// down), and they are routed again in arrival order after both replicas are down.
TEST(FaultsTest, ANodeFailureTakesItsReplicasDownTogether) {
  ClusterSetup s;
  s.replicas = 3;
  Harness h({spec(0, 8, 10), spec(0, 8, 10), spec(0, 8, 10)}, s);
  sim::FaultPlan plan;
  sim::FaultEvent node = failure(0, 35);
  node.with = {1};
  plan.events = {node};
  h.cluster->set_faults(plan);
  h.run();
  for (uint64_t id : {0u, 1u}) {
    const core::RequestRecord* r = h.obs.find(id);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->outcome, core::RequestOutcome::kCompleted);
    EXPECT_EQ(r->replica, id);
    EXPECT_EQ(r->decode_replica, 2u) << id;
  }
  ASSERT_EQ(h.obs.fleet.size(), 4u);
  EXPECT_EQ(h.obs.fleet[0].kind, core::FleetEventKind::kReplicaDown);
  EXPECT_EQ(h.obs.fleet[0].replica, 0u);
  EXPECT_EQ(h.obs.fleet[1].kind, core::FleetEventKind::kReplicaDown);
  EXPECT_EQ(h.obs.fleet[1].replica, 1u);
  for (uint64_t k : {2u, 3u}) {
    EXPECT_EQ(h.obs.fleet[k].kind, core::FleetEventKind::kRequestRerouted);
    EXPECT_EQ(h.obs.fleet[k].request, k - 2);  // A then B
    EXPECT_EQ(h.obs.fleet[k].replica, k - 2);  // each from the replica it was lost with
    EXPECT_EQ(h.obs.fleet[k].time, ms(35));
  }
  EXPECT_EQ(h.cluster->counters().replica_failures, 2u);
  EXPECT_EQ(h.cluster->counters().rerouted, 2u);
}

// on_failure = fail: A leaves at the failure with the three tokens it had; B is untouched (100 ms).
TEST(FaultsTest, OnFailureFailEndsTheLostRequests) {
  ClusterSetup s;
  s.replicas = 2;
  Harness h({spec(0, 8, 10), spec(0, 8, 10)}, s);
  sim::FaultPlan plan;
  plan.events = {failure(0, 35)};
  plan.recompute = false;
  h.cluster->set_faults(plan);
  h.run();
  const core::RequestRecord* a = h.obs.find(0);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->outcome, core::RequestOutcome::kFailed);
  EXPECT_EQ(a->finish, ms(35));
  EXPECT_EQ(a->generated_tokens, 3);
  EXPECT_EQ(h.obs.find(1)->finish, ms(100));
  EXPECT_EQ(h.cluster->counters().failed, 1u);
  EXPECT_EQ(h.cluster->counters().rerouted, 0u);
  EXPECT_EQ(core::outcome_name(a->outcome), "failed");
}

// One replica, down from 35 ms for 50 ms: A (3 tokens by then) and C (sent at 60 ms, 2 output tokens)
// wait at the cluster and are routed, in arrival order, when it is back at 85 ms. A reaches the idle
// replica first and starts an iteration alone (as two requests sent at the same instant do):
// [85, 95) prefills A's 8 + 3 tokens (its 4th token at 95 ms); [95, 105) prefills C (its 1st token at
// 105 ms); from 105 ms both decode: C's 2nd token at 115 ms (done), A's 5th..10th at 115..165 ms.
TEST(FaultsTest, RequestsWaitForARepairWhenNoReplicaIsUp) {
  ClusterSetup s;
  s.replicas = 1;
  Harness h({spec(0, 8, 10), spec(0.060, 8, 2)}, s);
  sim::FaultPlan plan;
  plan.events = {failure(0, 35, 50)};
  h.cluster->set_faults(plan);
  h.run();
  EXPECT_EQ(h.obs.find(0)->finish, ms(165));
  EXPECT_EQ(h.obs.find(1)->first_token, ms(105));
  EXPECT_EQ(h.obs.find(1)->finish, ms(115));
  ASSERT_GE(h.obs.fleet.size(), 3u);
  EXPECT_EQ(h.obs.fleet.back().kind, core::FleetEventKind::kReplicaUp);
  EXPECT_EQ(h.obs.fleet.back().time, ms(85));
}

// With a 5 ms client path, A is routed to replica 0 at 0 and reaches it at 5 ms; replica 0 fails at
// 2 ms, so A is routed again on arrival (the router's next pick, replica 1): prefill [5, 15) (first
// token at 15 ms), decode [15, 25) (done). The load replica 0 showed for A while it was on the way is
// taken back (check_drained verifies the load accounting).
TEST(FaultsTest, RequestOnTheClientPathToAFailedReplicaIsRoutedAgain) {
  ClusterSetup s;
  s.replicas = 2;
  s.client.ingress_s = 0.005;
  Harness h({spec(0, 8, 2)}, s);
  sim::FaultPlan plan;
  plan.events = {failure(0, 2)};
  h.cluster->set_faults(plan);
  h.run();
  const core::RequestRecord* a = h.obs.find(0);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->replica, 1u);  // it never reached replica 0
  EXPECT_EQ(a->first_token, ms(15));
  EXPECT_EQ(a->finish, ms(25));
  EXPECT_EQ(h.cluster->counters().rerouted, 0u);  // it lost nothing
}

// A failure for good of the only replica: nothing can serve A any more, so it fails even with
// recompute; so does B, sent after the failure.
TEST(FaultsTest, RequestsFailWhenNoReplicaWillComeBack) {
  ClusterSetup s;
  s.replicas = 1;
  Harness h({spec(0, 8, 10), spec(0.050, 8, 2)}, s);
  sim::FaultPlan plan;
  plan.events = {failure(0, 35)};
  h.cluster->set_faults(plan);
  h.run();
  EXPECT_EQ(h.obs.find(0)->outcome, core::RequestOutcome::kFailed);
  EXPECT_EQ(h.obs.find(0)->finish, ms(35));
  EXPECT_EQ(h.obs.find(1)->outcome, core::RequestOutcome::kFailed);
  EXPECT_EQ(h.obs.find(1)->finish, ms(50));
  EXPECT_EQ(h.cluster->counters().failed, 2u);
}

// A straggler at half speed from t = 0: every iteration takes 20 ms; 3 output tokens -> 60 ms.
TEST(FaultsTest, StragglerRunsAtAFractionOfItsSpeed) {
  ClusterSetup s;
  s.replicas = 1;
  Harness h({spec(0.001, 8, 3)}, s);
  sim::FaultPlan plan;
  sim::FaultEvent slow;
  slow.kind = sim::FaultEvent::Kind::kSlow;
  slow.replica = 0;
  slow.at = ms(0);
  slow.speed = 0.5;
  plan.events = {slow};
  h.cluster->set_faults(plan);
  h.run();
  EXPECT_EQ(h.obs.find(0)->finish, ms(61));
  for (const auto& it : h.obs.iterations) EXPECT_EQ(it.duration.ns(), 20'000'000);
}

// Drawn failures: replica i's first failure comes after an exponential time of mean mtbf_s drawn
// from stream "faults/<i>" of the seed (checked against the generator itself, drawn here).
TEST(FaultsTest, DrawnFailuresFollowTheSeededStream) {
  ClusterSetup s;
  s.replicas = 2;
  std::vector<traces::RequestSpec> specs;
  for (int i = 0; i < 400; ++i) specs.push_back(spec(0.01 * i, 8, 10));
  Harness h(specs, s);
  sim::FaultPlan plan;
  plan.mtbf_s = 1.0;
  plan.mttr_s = 0.5;
  plan.seed = 99;
  h.cluster->set_faults(plan);
  h.run();
  std::vector<core::Time> first_down(2);
  std::vector<bool> seen(2, false);
  for (const auto& e : h.obs.fleet)
    if (e.kind == core::FleetEventKind::kReplicaDown && !seen[e.replica]) {
      seen[e.replica] = true;
      first_down[e.replica] = e.time;
    }
  for (uint32_t i = 0; i < 2; ++i) {
    core::Rng rng(99, "faults/" + std::to_string(i));
    const double t = rng.exponential(1.0);
    if (t < 3.9) {  // within the run (the last request is sent at 3.99 s)
      ASSERT_TRUE(seen[i]) << "replica " << i;
      EXPECT_EQ(first_down[i], core::Time() + core::Duration::from_seconds(t));
    }
  }
  // Every request is accounted for.
  EXPECT_EQ(h.cluster->counters().completed + h.cluster->counters().failed, 400u);
}

// Drawn node failures: node n's replicas go down together after an exponential time of mean
// node_mtbf_s drawn from stream "faults/node/<n>"; the repair is the stream's next draw (mean
// node_mttr_s), no earlier than the end of the iteration lost; the next failure an exponential after
// the drawn repair (the generator drawn here, in that order).
TEST(FaultsTest, DrawnNodeFailuresTakeTheNodesReplicasDownTogether) {
  ClusterSetup s;
  s.replicas = 3;
  std::vector<traces::RequestSpec> specs;
  for (int i = 0; i < 600; ++i) specs.push_back(spec(0.01 * i, 8, 10));
  Harness h(specs, s);
  sim::FaultPlan plan;
  plan.node_mtbf_s = 1.0;
  plan.node_mttr_s = 0.5;
  plan.node_replicas = {{0, 1}, {2}};
  plan.seed = 7;
  h.cluster->set_faults(plan);
  h.run();
  std::vector<std::vector<core::Time>> down(3), up(3);
  for (const auto& e : h.obs.fleet) {
    if (e.kind == core::FleetEventKind::kReplicaDown) down[e.replica].push_back(e.time);
    if (e.kind == core::FleetEventKind::kReplicaUp) up[e.replica].push_back(e.time);
  }
  EXPECT_EQ(down[0], down[1]);  // node 0: together, every time
  EXPECT_EQ(up[0], up[1]);
  const core::Time last_arrival = core::Time() + core::Duration::from_seconds(5.99);
  for (uint32_t n = 0; n < 2; ++n) {
    const uint32_t replica = n == 0 ? 0 : 2;
    core::Rng rng(7, "faults/node/" + std::to_string(n));
    const double first = rng.exponential(1.0);
    const double repair = rng.exponential(2.0);
    const double gap = rng.exponential(1.0);
    const core::Time fail_at = core::Time() + core::Duration::from_seconds(first);
    if (fail_at >= last_arrival) continue;
    ASSERT_FALSE(down[replica].empty()) << "node " << n;
    EXPECT_EQ(down[replica][0], fail_at) << "node " << n;
    const core::Time repaired = fail_at + core::Duration::from_seconds(repair);
    if (repaired + core::Duration::from_ns(10'000'000) < last_arrival) {
      ASSERT_FALSE(up[replica].empty()) << "node " << n;
      EXPECT_GE(up[replica][0], repaired);
      EXPECT_LE(up[replica][0], repaired + core::Duration::from_ns(10'000'000));  // one 10 ms iteration at most
      const core::Time again = repaired + core::Duration::from_seconds(gap);
      if (again < last_arrival && again > up[replica][0]) {
        ASSERT_GE(down[replica].size(), 2u) << "node " << n;
        EXPECT_EQ(down[replica][1], again) << "node " << n;
      }
    }
  }
  EXPECT_GT(down[0].size() + down[2].size(), 2u);  // six seconds at a mean of one failure per 1.5 s
  EXPECT_EQ(h.cluster->counters().completed + h.cluster->counters().failed, 600u);
}

}  // namespace
}  // namespace servesim::testing
