// Kind "shared_prefix" (traces/shared_prefix.cc): the pool's lengths, its cycle and shuffle, the
// prefix hashes' structure, and the prefix-cache hits they give a replica, exact on a small pool.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "tests/sim/cluster/cluster_harness.h"
#include "tests/traces/trace_test_util.h"

namespace servesim::traces {
namespace {

using namespace servesim::traces::testing;

// 2 groups x 2 prompts of 20 system + 10 question tokens, hashed in blocks of 8: blocks [0, 8) and
// [8, 16) lie inside the system prompt (the group's), [16, 24) straddles it (the prompt's own) and
// [24, 30) is partial (the prompt's own, with an id of its own).
std::string pool(const std::string& arrival, const std::string& extra = "") {
  return "[workload]\nkind = \"shared_prefix\"\ngroups = 2\nprompts_per_group = 2\nsystem_prompt_len = 20\n"
         "question_len = 10\nblock_tokens = 8\nseed = 5\n" +
         extra + "[workload.output]\nkind = \"fixed\"\nvalue = 3\n[workload.arrival]\n" + arrival;
}

TEST(SharedPrefixTest, APoolOfPromptsSentInACycleWithGroupSharedBlocks) {
  auto source = make_workload(pool("kind = \"constant\"\nrate = 1.0\nrequests = 12\n"));
  EXPECT_EQ(source->hash_block_tokens(), 8);
  const auto rows = drain(*source);
  ASSERT_EQ(rows.size(), 12u);
  for (size_t n = 0; n < rows.size(); ++n) {
    EXPECT_EQ(rows[n].arrival.ns(), static_cast<int64_t>(n) * 1'000'000'000) << n;
    EXPECT_EQ(rows[n].prompt_tokens, 30) << n;
    EXPECT_EQ(rows[n].output_tokens, 3) << n;
    EXPECT_EQ(rows[n].hashed_tokens, 30) << n;
    ASSERT_EQ(rows[n].block_hashes.size(), 4u) << n;  // ceil(30 / 8)
    // Request n sends prompt n mod 4: the same hashes every 4 requests.
    if (n >= 4) {
      EXPECT_EQ(rows[n].block_hashes, rows[n - 4].block_hashes) << n;
    }
  }
  // The first 4 are the 4 prompts, each once: 2 groups of 2 sharing exactly the blocks inside the
  // system prompt.
  std::set<std::vector<uint64_t>> prompts;
  std::map<std::pair<uint64_t, uint64_t>, int> groups;  // the two group blocks -> prompts
  std::set<uint64_t> own;
  for (size_t n = 0; n < 4; ++n) {
    prompts.insert(rows[n].block_hashes);
    ++groups[{rows[n].block_hashes[0], rows[n].block_hashes[1]}];
    own.insert(rows[n].block_hashes[2]);
    own.insert(rows[n].block_hashes[3]);
  }
  EXPECT_EQ(prompts.size(), 4u);
  ASSERT_EQ(groups.size(), 2u);
  for (const auto& [blocks, count] : groups) {
    EXPECT_EQ(count, 2);
    EXPECT_NE(blocks.first, blocks.second);
  }
  EXPECT_EQ(own.size(), 8u);  // blocks 2 and 3 belong to each prompt alone
}

TEST(SharedPrefixTest, ExtraTokensAreDrawnOncePerPrompt) {
  const auto rows = drain(*make_workload(pool("kind = \"offline\"\nrequests = 8\n",
                                              "[workload.extra_tokens]\nkind = \"uniform\"\nmin = 1\nmax = 9\n")));
  std::set<int64_t> lengths;
  for (size_t n = 0; n < 8; ++n) {
    EXPECT_GE(rows[n].prompt_tokens, 31);
    EXPECT_LE(rows[n].prompt_tokens, 39);
    EXPECT_EQ(rows[n].block_hashes.size(), static_cast<size_t>((rows[n].prompt_tokens + 7) / 8));
    if (n >= 4) {
      EXPECT_EQ(rows[n].prompt_tokens, rows[n - 4].prompt_tokens);
    }
    lengths.insert(rows[n].prompt_tokens);
  }
  EXPECT_GT(lengths.size(), 1u);
  // The shuffle and the extra tokens follow the workload's seed.
  const auto again = drain(*make_workload(pool("kind = \"offline\"\nrequests = 8\n",
                                               "[workload.extra_tokens]\nkind = \"uniform\"\nmin = 1\nmax = 9\n")));
  for (size_t n = 0; n < 8; ++n) EXPECT_EQ(again[n].block_hashes, rows[n].block_hashes);
}

TEST(SharedPrefixTest, PrefixCachingHitsAsVllmWould) {
  // One request at a time (1 s apart). A prompt's first send hits its group's system prompt (16
  // tokens) when another prompt of the group came before, else nothing; every later send hits every
  // full block before the one holding its last token: blocks [0, 24) of the 30 tokens, 24 tokens
  // (vLLM recomputes the partial last block).
  const auto rows = drain(*make_workload(pool("kind = \"constant\"\nrate = 1.0\nrequests = 8\n")));
  servesim::testing::ClusterSetup s;
  s.prefix_unit_tokens = 8;
  servesim::testing::Harness h(rows, s);
  h.run();
  ASSERT_EQ(h.obs.done.size(), 8u);
  std::set<uint64_t> groups_seen;
  for (const auto& r : h.obs.done) {
    int64_t want = 24;
    if (r.id < 4) want = groups_seen.insert(rows[r.id].block_hashes[0]).second ? 0 : 16;
    EXPECT_EQ(r.cached_tokens, want) << "request " << r.id;
  }
  EXPECT_EQ(groups_seen.size(), 2u);
}

}  // namespace
}  // namespace servesim::traces
