#include "policies/router/router.h"

#include <gtest/gtest.h>

#include "sim/core/config.h"
#include "tests/policies/router/make_router.h"

namespace servesim::policies {
namespace {

std::unique_ptr<sim::Router> make(const std::string& toml, uint64_t seed = 1) {
  return testing::make_router(toml, seed);
}

TEST(RouterTest, RoundRobinCycles) {
  auto r = make("kind = \"round_robin\"\n");
  std::vector<sim::ReplicaLoad> loads(3);
  sim::Request req;
  std::vector<uint32_t> picks;
  for (int i = 0; i < 7; ++i) picks.push_back(r->route(req, loads));
  EXPECT_EQ(picks, (std::vector<uint32_t>{0, 1, 2, 0, 1, 2, 0}));
}

TEST(RouterTest, LeastOutstandingRanksByWhatARouterObserves) {
  auto r = make("kind = \"least_outstanding\"\n");
  std::vector<sim::ReplicaLoad> loads(4);
  auto set = [&](size_t i, int64_t queued, int64_t running, int64_t prompt_waiting, int64_t remaining) {
    loads[i].queued = queued;
    loads[i].running = running;
    loads[i].prefill_tokens_waiting = prompt_waiting;
    loads[i].oracle_remaining_tokens = remaining;
  };
  // Replica 2 has the least remaining work, but only an oracle knows it (it is in the output
  // lengths); by outstanding requests 1 and 3 tie, and 3 has fewer prompt tokens waiting.
  set(0, 4, 10, 900, 5000);
  set(1, 0, 6, 300, 4000);
  set(2, 2, 8, 0, 100);
  set(3, 1, 5, 200, 7000);
  sim::Request req;
  EXPECT_EQ(r->route(req, loads), 3u);
  set(3, 1, 5, 300, 7000);  // all tied: the lowest index
  EXPECT_EQ(r->route(req, loads), 1u);
  // The oracle variant, named explicitly, ranks by exact remaining tokens.
  auto oracle = make("kind = \"least_outstanding\"\noracle = true\n");
  EXPECT_EQ(oracle->route(req, loads), 2u);
  // The router never reads the oracle field unless asked: changing only it changes nothing.
  for (auto& l : loads) l.oracle_remaining_tokens = 0;
  EXPECT_EQ(r->route(req, loads), 1u);
}

TEST(RouterTest, RandomIsSeededAndRoughlyUniform) {
  std::vector<sim::ReplicaLoad> loads(4);
  sim::Request req;
  auto a = make("kind = \"random\"\n", 5), b = make("kind = \"random\"\n", 5), c = make("kind = \"random\"\n", 6);
  std::vector<int> counts(4, 0);
  bool differs = false;
  for (int i = 0; i < 4000; ++i) {
    const uint32_t x = a->route(req, loads);
    EXPECT_EQ(x, b->route(req, loads));
    differs = differs || x != c->route(req, loads);
    ++counts[x];
  }
  EXPECT_TRUE(differs);
  for (int n : counts) EXPECT_NEAR(n, 1000, 150);
  // An explicit seed overrides the run seed.
  auto d = make("kind = \"random\"\nseed = 5\n", 999);
  auto e = make("kind = \"random\"\n", 5);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(d->route(req, loads), e->route(req, loads));
}

}  // namespace
}  // namespace servesim::policies
