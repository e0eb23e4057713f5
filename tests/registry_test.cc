// Every plugin registers itself from a static initialiser in a library linked whole; a kind the
// linker dropped would vanish silently, so the expected names are pinned here.
#include <gtest/gtest.h>

#include <set>

#include "sim/core/params.h"

namespace servesim {
namespace {

void expect_kinds(const std::string& family, const std::set<std::string>& expected) {
  const core::KindFamily* f = core::find_family(family);
  ASSERT_NE(f, nullptr) << "family '" << family << "' is not registered";
  const auto names = f->kind_names();
  const std::set<std::string> have(names.begin(), names.end());
  for (const auto& name : expected) EXPECT_TRUE(have.count(name)) << family << ": missing kind '" << name << "'";
  for (const auto* kind : f->kinds()) {
    EXPECT_FALSE(kind->description.empty()) << family << "/" << kind->name << " has no description";
    for (const auto& p : kind->params)
      EXPECT_FALSE(p.description.empty()) << family << "/" << kind->name << "." << p.name << " has no description";
  }
}

TEST(RegistryTest, EveryExpectedKindIsRegistered) {
  expect_kinds("admission", {"queue_length", "predicted_ttft"});
  expect_kinds("autoscalers", {"target_utilisation", "slo", "schedule"});
  expect_kinds("routers", {"round_robin", "random", "least_outstanding", "power_of_two", "consistent_hash",
                           "prefix_affinity", "tiered_prefix_affinity"});
  expect_kinds("schedulers", {"continuous", "chunked"});
  expect_kinds("workloads", {"azure_csv", "mooncake_jsonl", "poisson", "gamma", "sessions", "synthetic",
                             "shared_prefix"});
  expect_kinds("arrivals", {"poisson", "gamma", "constant", "poisson_fixed_count", "offline", "stages",
                            "closed_loop"});
  expect_kinds("length_distributions", {"fixed", "uniform", "lognormal", "empirical"});
  expect_kinds("models", {"llama-2-7b", "llama-2-70b", "llama-3-8b", "llama-3-70b", "teaching-7b", "mistral-7b",
                          "qwen2-7b", "qwen3-32b", "mixtral-8x7b", "deepseek-v3", "deepseek-v3.2", "gpt-oss-120b", "gpt-oss-20b",
                          "qwen3-next-80b-a3b", "hf_config"});
  expect_kinds("gpus", {"a100-80gb-sxm", "a100-40gb-sxm", "h100-sxm", "h100-pcie", "h200", "b200", "l40s",
                        "reference"});
  expect_kinds("cost_models", {"roofline"});
  expect_kinds("engines", {"vllm-v1", "none"});
  expect_kinds("decoding", {"none", "draft_model", "draft_head", "mtp", "ngram"});
  expect_kinds("kv_tier_writes", {"on_eviction", "write_through"});
  expect_kinds("kv_tier_evictions", {"lru", "fifo"});
  expect_kinds("kv_tier_loads", {"cost", "always", "never"});
  expect_kinds("kv_tier_prefetches", {"none", "best_effort", "wait_complete", "timeout"});
}

TEST(RegistryTest, LookupIgnoresCase) {
  const core::KindFamily* gpus = core::find_family("gpus");
  ASSERT_NE(gpus, nullptr);
  ASSERT_NE(gpus->find("H100-SXM"), nullptr);
  EXPECT_EQ(gpus->find("H100-SXM")->name, "h100-sxm");
  EXPECT_EQ(gpus->find("h100"), nullptr);
}

}  // namespace
}  // namespace servesim
