// servesim estimate with expert parallelism: weights and KV per GPU, the placement and the
// all-to-alls of a DeepSeek-V3 replica spread over nine nodes.
#include <gtest/gtest.h>

#include "tests/cli_driver.h"
#include <nlohmann/json.hpp>

#include <algorithm>
#include <sstream>

#include "experiments/cli/cli.h"

namespace servesim::experiments {
namespace {

using servesim::testing::Cli;
using servesim::testing::cli;

TEST(EstimateEpTest, WideExpertParallelismFreesMemoryAndCostsAllToAlls) {
  const std::vector<std::string> base = {"estimate", "--model", "deepseek-v3", "--gpu", "h200", "--batch", "4608",
                                         "--prompt", "1", "--context", "2000", "--json"};
  std::vector<std::string> args = base;
  const Cli tp1 = cli(args);
  ASSERT_EQ(tp1.code, 0) << tp1.err;
  for (const char* a : {"--ep", "72", "--redundant-experts", "32"}) args.push_back(a);
  const Cli ep = cli(args);
  ASSERT_EQ(ep.code, 0) << ep.err;
  const auto one = nlohmann::json::parse(tp1.out);
  const auto j = nlohmann::json::parse(ep.out);
  // Every GPU keeps 4 of the 288 expert replicas instead of all 256 routed experts: 252 fewer of
  // 3 x 7168 x 2048 fp8 weights in each of the 58 MoE blocks (643.7 GB).
  EXPECT_NEAR(one["weight_gb_per_gpu"].get<double>() - j["weight_gb_per_gpu"].get<double>(),
              252.0 * 3 * 7168 * 2048 * 58 * 1e-9, 1e-6);
  EXPECT_EQ(j["expert_parallel"]["experts_per_gpu"], 4);
  EXPECT_EQ(j["expert_parallel"]["attention_ranks"], 72);
  // Uniform routing: the 32 redundant replicas halve 32 experts' loads, so 8 GPUs hold 4 full ones:
  // (4 / 256) / (1 / 72) = 1.125.
  EXPECT_NEAR(j["expert_parallel"]["imbalance"].get<double>(), 1.125, 1e-12);
  EXPECT_GT(j["expert_parallel"]["decode_scaleout_bytes_per_gpu"].get<double>(), 0.0);
  EXPECT_GT(j["kv_budget_gb"].get<double>(), 0.0);
  EXPECT_LT(one["kv_budget_gb"].get<double>(), 0.0 + 1e-9);  // 671B of weights do not fit one H200
  // Text: the section exists.
  args.erase(std::find(args.begin(), args.end(), "--json"));
  const Cli text = cli(args);
  EXPECT_NE(text.out.find("expert parallelism"), std::string::npos);
  EXPECT_NE(text.out.find("4 experts per GPU (32 redundant)"), std::string::npos) << text.out;
}

TEST(EstimateEpTest, ImpossibleLayoutsNameTheOption) {
  const Cli r = cli({"estimate", "--model", "deepseek-v3", "--gpu", "h200", "--prompt", "100", "--ep", "7"});
  EXPECT_NE(r.code, 0);
  EXPECT_NE((r.err + r.out).find("--redundant-experts"), std::string::npos) << r.err;
  const Cli dense = cli({"estimate", "--model", "llama-3-8b", "--gpu", "h200", "--prompt", "100", "--ep", "8"});
  EXPECT_NE(dense.code, 0);
  EXPECT_NE((dense.err + dense.out).find("--ep: "), std::string::npos) << dense.err;
}

}  // namespace
}  // namespace servesim::experiments
