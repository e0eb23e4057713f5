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

TEST(RouterTest, LeastOutstandingPicksFewestTokensLowestIndexOnTies) {
  auto r = make("kind = \"least_outstanding\"\n");
  std::vector<sim::ReplicaLoad> loads(4);
  loads[0].outstanding_tokens = 500;
  loads[1].outstanding_tokens = 120;
  loads[2].outstanding_tokens = 90;
  loads[3].outstanding_tokens = 90;
  sim::Request req;
  EXPECT_EQ(r->route(req, loads), 2u);
  loads[2].outstanding_tokens = 1000;
  EXPECT_EQ(r->route(req, loads), 3u);
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
