#include <gtest/gtest.h>

#include <map>
#include <set>

#include "sim/core/config.h"
#include "traces/arrival_source.h"

namespace servesim::traces {
namespace {

std::unique_ptr<ArrivalSource> make(const std::string& extra = "") {
  const std::vector<core::ParamSpec> schema = {core::ParamSpec::section("workload", "workloads", "", "w")};
  const std::string text = R"(
[workload]
kind = "sessions"
rate = 2.0
think_time_s = 5.0
system_prompts = 3
block_tokens = 16
max_requests = 400
)" + extra + R"(
[workload.turns]
kind = "uniform"
min = 1
max = 6
[workload.system_tokens]
kind = "uniform"
min = 20
max = 300
[workload.user]
kind = "uniform"
min = 5
max = 100
[workload.output]
kind = "uniform"
min = 1
max = 200
)";
  core::Params p = core::parse_config(text, "s.toml", schema);
  return workload_registry().make(p.section("workload"), 11);
}

TEST(SessionsWorkloadTest, TurnsResendTheirHistoryAsAPrefix) {
  auto src = make();
  EXPECT_EQ(src->hash_block_tokens(), 16);
  RequestSpec r;
  std::map<uint64_t, RequestSpec> last;  // by session
  std::map<uint64_t, int> first_block_users;
  core::Time prev;
  int n = 0;
  while (src->next(r)) {
    ++n;
    EXPECT_GE(r.arrival, prev);
    prev = r.arrival;
    ASSERT_GT(r.session, 0u);
    EXPECT_EQ(r.hashed_tokens, r.prompt_tokens + r.output_tokens);
    EXPECT_EQ(static_cast<int64_t>(r.block_hashes.size()), (r.hashed_tokens + 15) / 16);
    auto it = last.find(r.session);
    if (it != last.end()) {
      const RequestSpec& p = it->second;
      // This turn's prompt is the previous turn's prompt + answer + a new user message.
      EXPECT_GT(r.prompt_tokens, p.prompt_tokens + p.output_tokens);
      // Every full block of the previous history is the same block now.
      const size_t full = static_cast<size_t>((p.prompt_tokens + p.output_tokens) / 16);
      for (size_t b = 0; b < full; ++b) ASSERT_EQ(r.block_hashes[b], p.block_hashes[b]) << "block " << b;
      EXPECT_GE(r.arrival, p.arrival);
    }
    last[r.session] = r;
    ++first_block_users[r.block_hashes.front()];
  }
  EXPECT_EQ(n, 400);
  // Sessions share system prompts: at most 3 distinct first blocks among full system blocks
  // (system prompts have >= 20 tokens, so the first block is always inside one).
  EXPECT_LE(first_block_users.size(), 3u);
  EXPECT_GT(last.size(), 50u);
}

TEST(SessionsWorkloadTest, SameSeedSameRequests) {
  auto a = make(), b = make();
  RequestSpec x, y;
  for (int i = 0; i < 400; ++i) {
    ASSERT_TRUE(a->next(x));
    ASSERT_TRUE(b->next(y));
    EXPECT_EQ(x.arrival, y.arrival);
    EXPECT_EQ(x.prompt_tokens, y.prompt_tokens);
    EXPECT_EQ(x.block_hashes, y.block_hashes);
  }
}

TEST(SessionsWorkloadTest, NeedsALimit) {
  const std::vector<core::ParamSpec> schema = {core::ParamSpec::section("workload", "workloads", "", "w")};
  core::Params p = core::parse_config(R"(
[workload]
kind = "sessions"
rate = 1.0
[workload.turns]
kind = "fixed"
value = 2
[workload.system_tokens]
kind = "fixed"
value = 10
[workload.user]
kind = "fixed"
value = 10
[workload.output]
kind = "fixed"
value = 10
)",
                                      "s.toml", schema);
  EXPECT_THROW(workload_registry().make(p.section("workload"), 1), core::ConfigError);
}

}  // namespace
}  // namespace servesim::traces
