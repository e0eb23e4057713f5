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
std::vector<uint64_t> served_order(const std::string& policy, const std::vector<traces::RequestSpec>& requests) {
  ClusterSetup s;
  s.replicas = 1;
  s.scheduler = "kind = \"continuous\"\nwatermark = 0.0\nmax_num_seqs = 1\npolicy = \"" + policy + "\"\n";
  auto src = std::make_unique<VectorSource>(requests);
  src->request_classes = two_tenants();
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

}  // namespace
}  // namespace servesim::testing
