// The block bootstrap of an arrival stream (traces/block_bootstrap.h): each output block is a
// copy of the source block the plan names, moved to its place, the last block wrapping around.
#include "traces/block_bootstrap.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <tuple>
#include <vector>

namespace servesim::traces {
namespace {

class VectorSource final : public ArrivalSource {
 public:
  explicit VectorSource(std::vector<RequestSpec> requests) : requests_(std::move(requests)) {}
  bool next(RequestSpec& out) override {
    if (i_ == requests_.size()) return false;
    out = requests_[i_++];
    return true;
  }
  int64_t hash_block_tokens() const override { return 512; }

 private:
  std::vector<RequestSpec> requests_;
  size_t i_ = 0;
};

constexpr int64_t kS = 1'000'000'000;

// Requests at 0.5, 1.5, ..., 9.5 s (one mean gap of 1 s: period 10.5 s), request i with prompt
// 100 + i, output i + 1, its own session and two prefix hashes.
std::vector<RequestSpec> ten_requests() {
  std::vector<RequestSpec> v;
  for (int i = 0; i < 10; ++i) {
    RequestSpec r;
    r.arrival = core::Time::from_ns(i * kS + kS / 2);
    r.prompt_tokens = 100 + i;
    r.output_tokens = i + 1;
    r.session = static_cast<uint64_t>(i);
    r.block_hashes = {static_cast<uint64_t>(i), static_cast<uint64_t>(1000 + i)};
    r.hashed_tokens = 700;
    v.push_back(r);
  }
  return v;
}

std::vector<RequestSpec> drain(ArrivalSource& s) {
  std::vector<RequestSpec> out;
  RequestSpec r;
  while (s.next(r)) out.push_back(r);
  return out;
}

TEST(BlockBootstrapTest, EachBlockIsASourceBlockMovedToItsPlace) {
  const auto source = ten_requests();
  const int64_t block = 3 * kS;  // period 10.5 s: K = 4 blocks, [0,3) [3,6) [6,9) [9,12) on the circle
  BlockBootstrapSource b(std::make_unique<VectorSource>(source), block, 7);
  const auto out = drain(b);
  const auto& plan = b.plan();
  ASSERT_EQ(plan.size(), 4u);
  EXPECT_EQ(b.hash_block_tokens(), 512);
  // The expected output, built from the plan by hand: source block k holds the requests with
  // arrival in [3k, 3k + 3) s; the last (k = 3) holds 9.5 s and, wrapped one period (10.5 s) on,
  // the requests before 4 x 3 - 10.5 = 1.5 s (0.5 s, at 11 s). Output block j places them at
  // 3j + (arrival - 3k); everything at or after 10.5 s is cut.
  std::vector<std::tuple<int64_t, int64_t>> expected;  // (arrival ns, prompt)
  for (size_t j = 0; j < plan.size(); ++j) {
    const int64_t k = plan[j];
    std::vector<std::tuple<int64_t, int64_t>> members;
    for (const auto& r : source)
      if (r.arrival.ns() >= 3 * k * kS && r.arrival.ns() < (3 * k + 3) * kS) members.emplace_back(r.arrival.ns(), r.prompt_tokens);
    if (k == 3)
      for (const auto& r : source)
        if (r.arrival.ns() < 3 * kS / 2) members.emplace_back(r.arrival.ns() + 21 * kS / 2, r.prompt_tokens);
    for (const auto& [a, p] : members) {
      const int64_t at = static_cast<int64_t>(j) * block + a - 3 * k * kS;
      if (at < 21 * kS / 2) expected.emplace_back(at, p);
    }
  }
  ASSERT_EQ(out.size(), expected.size());
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_EQ(out[i].arrival.ns(), std::get<0>(expected[i])) << i;
    EXPECT_EQ(out[i].prompt_tokens, std::get<1>(expected[i])) << i;
    // Lengths, session and hashes travel with the request.
    const auto& src = source[static_cast<size_t>(out[i].prompt_tokens - 100)];
    EXPECT_EQ(out[i].output_tokens, src.output_tokens);
    EXPECT_EQ(out[i].session, src.session);
    EXPECT_EQ(out[i].block_hashes, src.block_hashes);
    EXPECT_EQ(out[i].hashed_tokens, 700);
    if (i > 0) {
      EXPECT_GE(out[i].arrival, out[i - 1].arrival);
    }
  }
}

TEST(BlockBootstrapTest, SeedsDrawDifferentResamplesAndTheSameSeedTheSame) {
  auto run = [](uint64_t seed) {
    BlockBootstrapSource b(std::make_unique<VectorSource>(ten_requests()), kS, seed);
    std::vector<int64_t> arrivals;
    for (const auto& r : drain(b)) arrivals.push_back(r.arrival.ns() * 1000 + r.prompt_tokens);
    return std::make_pair(arrivals, b.plan());
  };
  EXPECT_EQ(run(3), run(3));
  int differ = 0;
  for (uint64_t seed = 1; seed <= 10; ++seed) differ += run(seed).second != run(seed + 100).second;
  EXPECT_GE(differ, 9);  // 11 blocks of 1 s: two plans agree with probability 11^-11
  // Blocks are drawn uniformly: over many seeds every source block is used about equally.
  std::vector<int> uses(11, 0);
  for (uint64_t seed = 0; seed < 2000; ++seed)
    for (uint32_t k : run(seed).second) ++uses[k];
  for (int u : uses) EXPECT_NEAR(u, 2000, 200);
}

TEST(BlockBootstrapTest, AnEmptyStreamStaysEmpty) {
  BlockBootstrapSource b(std::make_unique<VectorSource>(std::vector<RequestSpec>{}), kS, 1);
  RequestSpec r;
  EXPECT_FALSE(b.next(r));
  EXPECT_TRUE(b.plan().empty());
}

}  // namespace
}  // namespace servesim::traces
