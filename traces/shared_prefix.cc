// Kind "shared_prefix": a fixed pool of prompts sent in a cycle, the shape of inference-perf's
// shared_prefix data (the serving-runs benchmark). `groups` x `prompts_per_group` prompts; each is a
// system prompt of system_prompt_len tokens shared by its group, then a question of question_len
// tokens plus extra_tokens of its own (drawn once per prompt: what templates and re-tokenisation add
// in a real run). The pool is shuffled once (seeded) and request n sends prompt n mod pool size.
//
// Prefix hashes cover each prompt in blocks of block_tokens, chained as vLLM hashes blocks (the KV
// cache chains them: a block's key is its id after its parent's key): a full block inside the system
// prompt has the group's id, every other block the prompt's own, and a partial last block an id of
// its own (vLLM never caches a partial block). A recurring prompt therefore hits every full block
// but the one holding its last token, which is recomputed, as in vLLM.

#include <memory>
#include <vector>

#include "sim/core/rng.h"
#include "traces/composed_source.h"
#include "traces/length_distribution.h"
#include "traces/workload_common.h"

namespace servesim::traces {
namespace {

using core::ParamSpec;

uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t s = a * 0x9e3779b97f4a7c15ULL ^ (b + 0x7f4a7c159e3779b9ULL);
  return core::splitmix64(s);
}

constexpr int64_t kMaxPool = 1'000'000;

class PromptPool final : public RequestContent {
 public:
  PromptPool(const core::Params& p, uint64_t seed)
      : system_(p.get_int("system_prompt_len")),
        block_tokens_(p.get_int("block_tokens")),
        seed_(seed),
        output_(distribution_registry().make(p.section("output"))),
        output_rng_(seed, "output") {
    const int64_t groups = p.get_int("groups");
    const int64_t per_group = p.get_int("prompts_per_group");
    if (groups * per_group > kMaxPool)
      p.fail("prompts_per_group", "groups x prompts_per_group = " + std::to_string(groups * per_group) +
                                      " prompts; at most " + std::to_string(kMaxPool));
    const int64_t question = p.get_int("question_len");
    std::unique_ptr<LengthDistribution> extra;
    if (p.has("extra_tokens")) extra = distribution_registry().make(p.section("extra_tokens"));
    core::Rng extra_rng(seed, "extra");
    for (int64_t g = 0; g < groups; ++g)
      for (int64_t i = 0; i < per_group; ++i)
        pool_.push_back({static_cast<uint64_t>(g), static_cast<uint64_t>(g * per_group + i),
                         system_ + question + (extra ? extra->sample(extra_rng) : 0)});
    // Shuffled once (Fisher-Yates on the pool's own stream).
    core::Rng order_rng(seed, "pool");
    for (size_t i = pool_.size() - 1; i > 0; --i)
      std::swap(pool_[i], pool_[static_cast<size_t>(order_rng.uniform_int(i + 1))]);
  }

  void fill(uint64_t n, RequestSpec& out) override {
    const Prompt& prompt = pool_[n % pool_.size()];
    out.prompt_tokens = prompt.tokens;
    out.output_tokens = output_->sample(output_rng_);
    out.hashed_tokens = prompt.tokens;
    out.session = 0;
    out.block_hashes.clear();
    const uint64_t group_key = mix(seed_, 0x5157'0000'0000ULL + prompt.group);
    const uint64_t prompt_key = mix(seed_ ^ 0x9407'0000'0000ULL, prompt.uid);
    for (int64_t b = 0; b * block_tokens_ < prompt.tokens; ++b) {
      const int64_t end = std::min((b + 1) * block_tokens_, prompt.tokens);
      const bool full = end - b * block_tokens_ == block_tokens_;
      uint64_t id = full && end <= system_ ? mix(group_key, static_cast<uint64_t>(b))
                                           : mix(prompt_key, static_cast<uint64_t>(b));
      if (!full) id = mix(id, static_cast<uint64_t>(end));
      out.block_hashes.push_back(id);
    }
  }
  int64_t hash_block_tokens() const override { return block_tokens_; }

 private:
  struct Prompt {
    uint64_t group;
    uint64_t uid;    // the prompt's place in the pool before shuffling
    int64_t tokens;  // system prompt + question + extra
  };
  int64_t system_;
  int64_t block_tokens_;
  uint64_t seed_;
  std::unique_ptr<LengthDistribution> output_;
  core::Rng output_rng_;
  std::vector<Prompt> pool_;  // in send order
};

const bool kRegistered = workload_registry().add(
    {"shared_prefix",
     "a fixed pool of groups x prompts_per_group prompts (a system prompt shared by its group + a question), "
     "shuffled once and sent in a cycle (request n sends prompt n mod pool size), with prefix block hashes: "
     "inference-perf's shared_prefix data; sent as [workload.arrival] says",
     composed_params({
         ParamSpec::integer("groups", 10, "groups", "groups of prompts, each with its own system prompt")
             .range(1, kMaxPool),
         ParamSpec::integer("prompts_per_group", 10, "prompts", "prompts (questions) per group").range(1, kMaxPool),
         ParamSpec::integer("system_prompt_len", 100, "tokens", "tokens of each group's system prompt")
             .range(0, 10'000'000),
         ParamSpec::integer("question_len", 50, "tokens", "tokens of each prompt's question").range(1, 10'000'000),
         ParamSpec::section("extra_tokens", "length_distributions", "",
                            "tokens added to each prompt's question, drawn once per prompt (what a chat template "
                            "and re-tokenising the random text add in a real run: the serving-runs general "
                            "prompts measure 559-592 tokens for 100 + 447); unset: none")
             .optional(),
         ParamSpec::section("output", "length_distributions", "",
                            "output tokens per request (fixed for ignore_eos benchmarks)"),
         ParamSpec::integer("block_tokens", 16, "tokens",
                            "tokens per prefix hash block (vLLM's KV block size; the prefix cache's unit)")
             .range(1, 1 << 20),
     })},
    [](const core::Params& p, uint64_t run_seed) -> std::unique_ptr<ArrivalSource> {
      const uint64_t seed = workload_seed(p, run_seed);
      return std::make_unique<ComposedSource>(p, seed, std::make_unique<PromptPool>(p, seed));
    });

}  // namespace
}  // namespace servesim::traces
