// Fair sharing across tenants (scheduler policy = "fair", virtual token counters;
// policies/scheduler/fair.h), on built cases whose order of service is computed by hand: one replica
// that runs one request at a time (max_num_seqs = 1), 10 ms per iteration, 4-token prompts and 2
// outputs, so each request takes a prefill iteration and one decode (20 ms) and costs its tenant
// 4 x 1 + 1 x 2 = 6 (prompt weight 1, output weight 2). Each case runs through the invariant checker.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "tests/sim/cluster/cluster_harness.h"

namespace servesim::testing {
namespace {

core::RequestClasses two_tenants() {
  core::RequestClass a, b;
  a.name = "a";
  a.tenant = "tenant-a";
  b.name = "b";
  b.tenant = "tenant-b";
  return {a, b};
}

traces::RequestSpec of(int32_t cls, double arrival_s) {
  traces::RequestSpec s = spec(arrival_s, 4, 2);
  s.request_class = cls;
  return s;
}

// The request ids in the order their first tokens came.
std::vector<uint64_t> served_order(const std::string& policy, const std::vector<traces::RequestSpec>& requests,
                                   double weight_a = 1, double weight_b = 1) {
  ClusterSetup s;
  s.replicas = 1;
  s.scheduler = "kind = \"continuous\"\nwatermark = 0.0\nmax_num_seqs = 1\npolicy = \"" + policy + "\"\n";
  auto src = std::make_unique<VectorSource>(requests);
  src->request_classes = two_tenants();
  src->request_classes[0].weight = weight_a;
  src->request_classes[1].weight = weight_b;
  Harness h(std::move(src), s);
  h.run();
  std::vector<uint64_t> ids;
  for (uint64_t i = 0; i < requests.size(); ++i) ids.push_back(i);
  std::stable_sort(ids.begin(), ids.end(),
                   [&](uint64_t x, uint64_t y) { return h.obs.find(x)->first_token < h.obs.find(y)->first_token; });
  return ids;
}

// Tenant a sends 6 requests at once (ids 0-5), tenant b 6 just after (6-11). FCFS serves all of a
// first. Fair: #0 is alone at 0 ms (a = 4 after its prefill). At the 10 ms plan b is newly active and
// is lifted to a's counter, 4 (the decode of #0 is charged after that plan: a = 6). At 20 ms b (4) is
// lower: #6 (b = 8, 10 after its decode); at 40 ms a (6): #1 (a = 12); at 60 ms b (10): #7 (16); at
// 80 ms a (12): #2; and so on: strict alternation, each tenant a request of 6 at a time.
TEST(FairSchedulingTest, TwoBackloggedTenantsAlternate) {
  std::vector<traces::RequestSpec> r;
  for (int i = 0; i < 6; ++i) r.push_back(of(0, 1e-6 * i));
  for (int i = 0; i < 6; ++i) r.push_back(of(1, 1e-6 * (6 + i)));
  EXPECT_EQ(served_order("fcfs", r), (std::vector<uint64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(served_order("fair", r), (std::vector<uint64_t>{0, 6, 1, 7, 2, 8, 3, 9, 4, 10, 5, 11}));
}

// A tenant that sent nothing for a while cannot take the replica for itself: a serves #0-#5 alone
// (counter 34 after #5's prefill at 100 ms); b's four requests arrive just after that plan, and at
// the 110 ms plan b is lifted to 34 (without the lift it would be 0 and b's four requests would all
// go before a's last two). From 120 ms: b (34) #8 -> 40; a (36) #6 -> 42; b (40) #9 -> 46;
// a (42) #7 -> 48; then b's last two.
TEST(FairSchedulingTest, ANewlyActiveTenantIsLiftedToTheOthers) {
  std::vector<traces::RequestSpec> r;
  for (int i = 0; i < 8; ++i) r.push_back(of(0, 1e-6 * i));
  for (int i = 0; i < 4; ++i) r.push_back(of(1, 0.100 + 1e-6 * (1 + i)));
  EXPECT_EQ(served_order("fair", r), (std::vector<uint64_t>{0, 1, 2, 3, 4, 5, 8, 6, 9, 7, 10, 11}));
}

// One tenant (no classes at all, or every class of one tenant): fair is FCFS.
TEST(FairSchedulingTest, OneTenantIsFcfs) {
  std::vector<traces::RequestSpec> r;
  for (int i = 0; i < 8; ++i) r.push_back(of(i % 2, 1e-6 * i));
  ClusterSetup s;
  s.replicas = 1;
  s.scheduler = "kind = \"continuous\"\nwatermark = 0.0\nmax_num_seqs = 1\npolicy = \"fair\"\n";
  auto src = std::make_unique<VectorSource>(r);
  core::RequestClasses same = two_tenants();
  same[1].tenant = same[0].tenant;
  src->request_classes = same;
  Harness h(std::move(src), s);
  h.run();
  for (uint64_t i = 1; i < r.size(); ++i) EXPECT_LT(h.obs.find(i - 1)->first_token, h.obs.find(i)->first_token);
}

// ---- tenant weights (weighted VTC) -------------------------------------------------------------------

// Tenant a of weight 2, b of weight 1: a request charges its tenant 6 / weight (a: prefill 2, decode
// 1; b: prefill 4, decode 2). a sends #0-#5 at once, b #6-#11 just after. 0 ms: #0 (a = 2). 10 ms: b
// is lifted to a's 2, then #0's decode (a = 3). 20 ms: b (2) < a (3): #6 (b = 6, 8 after its decode).
// 40 ms: a (3): #1 (5, 6). 60 ms: a (6) < b (8): #2 (8, 9). 80 ms: b (8) < a (9): #7 (12, 14).
// 100 ms: a (9): #3 (11, 12). 120 ms: a (12) < 14: #4 (14, 15). 140 ms: b (14) < 15: #8 (18, 20).
// 160 ms: a (15): #5, a's last; then b's #9-#11. Two of a per one of b, where weights of 1 alternate.
TEST(FairSchedulingTest, TenantWeightsTwoToOneServeTwoPerOne) {
  std::vector<traces::RequestSpec> r;
  for (int i = 0; i < 6; ++i) r.push_back(of(0, 1e-6 * i));
  for (int i = 0; i < 6; ++i) r.push_back(of(1, 1e-6 * (6 + i)));
  EXPECT_EQ(served_order("fair", r, 2, 1), (std::vector<uint64_t>{0, 6, 1, 2, 7, 3, 4, 8, 5, 9, 10, 11}));
  // The same weights on both tenants are the unweighted order (a weight scales every charge alike).
  EXPECT_EQ(served_order("fair", r, 3, 3), (std::vector<uint64_t>{0, 6, 1, 7, 2, 8, 3, 9, 4, 10, 5, 11}));
}

// The bound over a longer run: 60 requests each, a (weight 2) first. While both are backlogged a
// request is admitted only from the tenant of the lower counter, so after each admission the
// counters differ by at most one charge, 6 (b's request; a's is 3), plus the decode charged after
// the order (2 / weight): with n_a and n_b requests admitted, a's counter is about 3 n_a and b's
// 6 n_b + 2 (its lift), so |3 n_a - 6 n_b| <= 6 + 2 + 3 and |n_a - 2 n_b| <= 3. Checked on every
// prefix of the order of service while a still has requests waiting (a runs out at n_a = 60, about
// the 90th request served).
TEST(FairSchedulingTest, TenantWeightsHoldTheServiceRatioWithinTheBound) {
  std::vector<traces::RequestSpec> r;
  for (int i = 0; i < 60; ++i) r.push_back(of(0, 1e-6 * i));
  for (int i = 0; i < 60; ++i) r.push_back(of(1, 1e-6 * (60 + i)));
  const std::vector<uint64_t> order = served_order("fair", r, 2, 1);
  int64_t a = 0, b = 0;
  for (size_t k = 0; k < 83; ++k) {
    (order[k] < 60 ? a : b) += 1;
    EXPECT_LE(std::abs(a - 2 * b), 3) << "after " << k + 1 << " requests: " << a << " of a, " << b << " of b";
  }
  // The order is #0, #60, then (a, a, b) over and over: after 2 + 3 x 27 = 83 requests, 1 + 54 of a
  // and 1 + 27 of b.
  EXPECT_EQ(a, 55);
  EXPECT_EQ(b, 28);
}

// ---- one set of counters for the cluster (fair_scope = "cluster") ------------------------------------

// Two replicas, round robin (request i goes to replica i mod 2), one request at a time each. Tenant
// b's #1 (a 40-token prompt: charge 40 + 2 = 42) runs on replica 1 while a's #0 (charge 6) runs on
// replica 0. At 100 ms a burst: replica 0 gets a's #2, #6, #10 and b's #4, #8, #12; replica 1 gets
// tenant c's #3, #5, ... (a third tenant: it never touches a's or b's counters).
// Replica 0 admits #2 alone at 100 ms (a = 6 + 4 = 10). At 110 ms b is newly active there and is
// lifted to a's 10 (then #2's decode: a = 12).
// - fair_scope = "replica": b's counter at replica 0 is 0 -> lifted to 10 < 12: b goes first, and
//   the two alternate: #4, #6, #8, #10, #12, first tokens at 130, 150, ..., 210 ms.
// - fair_scope = "cluster": b's counter holds its 42 from replica 1 (lifting it to 10 changes
//   nothing): a (12, 18 after #6, 24 after #10) goes first until its requests are done: #6, #10,
//   then #4, #8, #12.
std::vector<core::Time> burst_first_tokens(const std::string& scope, bool run_ahead, bool* ran_ahead) {
  ClusterSetup s;
  s.replicas = 2;
  s.run_ahead = run_ahead;
  s.scheduler = "kind = \"continuous\"\nwatermark = 0.0\nmax_num_seqs = 1\npolicy = \"fair\"\n" + scope;
  std::vector<traces::RequestSpec> r = {of(0, 0.0), spec(1e-6, 40, 2)};
  r[1].request_class = 1;
  for (int i = 0; i < 12; ++i) r.push_back(of(i % 2 == 1 ? 2 : (i % 4 == 0 ? 0 : 1), 0.100 + 1e-6 * i));
  auto src = std::make_unique<VectorSource>(r);
  core::RequestClasses classes = two_tenants();
  core::RequestClass c;
  c.name = "c";
  c.tenant = "tenant-c";
  classes.push_back(c);
  src->request_classes = classes;
  Harness h(std::move(src), s);
  h.run();
  if (ran_ahead) *ran_ahead = h.cluster->runs_ahead();
  std::vector<core::Time> out;
  for (uint64_t id : {4, 6, 8, 10, 12}) out.push_back(h.obs.find(id)->first_token);
  return out;
}

TEST(FairSchedulingTest, ClusterWideCountersChangeTheOrder) {
  const auto ms = [](int64_t v) { return core::Time::from_ns(v * 1'000'000); };
  // first tokens of #4, #6, #8, #10, #12
  EXPECT_EQ(burst_first_tokens("", false, nullptr),
            (std::vector<core::Time>{ms(130), ms(150), ms(170), ms(190), ms(210)}));
  EXPECT_EQ(burst_first_tokens("fair_scope = \"replica\"\n", false, nullptr),
            (std::vector<core::Time>{ms(130), ms(150), ms(170), ms(190), ms(210)}));
  EXPECT_EQ(burst_first_tokens("fair_scope = \"cluster\"\n", false, nullptr),
            (std::vector<core::Time>{ms(170), ms(130), ms(190), ms(150), ms(210)}));
}

// Shared counters keep every replica on the event queue's clock: a cluster that lets replicas run
// ahead does so with per-replica counters and not with cluster-wide ones (whose results are those
// of the clocked run above).
TEST(FairSchedulingTest, ClusterWideCountersKeepReplicasOnTheClock) {
  const auto ms = [](int64_t v) { return core::Time::from_ns(v * 1'000'000); };
  bool ahead = false;
  burst_first_tokens("fair_scope = \"replica\"\n", true, &ahead);
  EXPECT_TRUE(ahead);
  EXPECT_EQ(burst_first_tokens("fair_scope = \"cluster\"\n", true, &ahead),
            (std::vector<core::Time>{ms(170), ms(130), ms(190), ms(150), ms(210)}));
  EXPECT_FALSE(ahead);
}

// fair_scope and the weights' agreement are checked: the scope without policy = "fair" is an error
// at the key.
TEST(FairSchedulingTest, ScopeNeedsTheFairPolicy) {
  ClusterSetup s;
  s.scheduler = "kind = \"continuous\"\nfair_scope = \"cluster\"\n";
  EXPECT_THROW(Harness({spec(0, 4, 2)}, s), core::Error);
}

}  // namespace
}  // namespace servesim::testing
