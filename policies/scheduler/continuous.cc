// continuous: vLLM's v0 default scheduler (continuous batching that prioritises prefills).
//
// An iteration is either all prefills or all decodes. Waiting requests are admitted in FCFS order
// while the running set stays within max_num_seqs, the summed prompt tokens within
// max_num_batched_tokens and the free KV blocks above the watermark; the first request that does
// not fit stops admission (head-of-line, as vLLM). If none is admitted, every running sequence
// decodes one token, oldest first, each taking a new block when it crosses a block boundary; when
// no block is free the newest running sequence is preempted (recompute, or swap when the cluster
// says so: its blocks freed, back to the front of the waiting queue), and a sequence that is itself
// the newest preempts itself. When nothing was preempted, waiting requests whose KV is already
// computed (swapped out, or transferred from a prefill replica) rejoin the decodes, as vLLM v0
// swaps in. With prefix caching, a prompt's cached prefix is not computed again.
#include <algorithm>
#include <optional>
#include <cmath>
#include <limits>
#include <vector>

#include "policies/scheduler/batch_scheduler.h"
#include "policies/scheduler/fair.h"
#include "policies/scheduler/steps.h"

namespace servesim::policies {
namespace {

class ContinuousScheduler final : public sim::BatchScheduler {
 public:
  ContinuousScheduler(int64_t max_num_seqs, int64_t max_num_batched_tokens, double watermark, bool priority,
                      bool preempt_to_admit, std::optional<FairShare> fair)
      : max_num_seqs_(max_num_seqs),
        max_num_batched_tokens_(max_num_batched_tokens),
        watermark_(watermark),
        priority_(priority),
        preempt_to_admit_(preempt_to_admit),
        fair_(std::move(fair)) {}

  int64_t reserved_blocks(const sim::KvCache& kv) const override {
    return static_cast<int64_t>(watermark_ * static_cast<double>(kv.total()));
  }

  // With nothing waiting, plan_batch admits nothing and plans decode_running alone (no token
  // budget); priority orders the decodes otherwise and fair charges every plan.
  bool decodes_running_when_nothing_waits() const override { return !priority_ && !fair_; }

  bool shares_state_across_replicas() const override { return fair_ && fair_->cluster_wide(); }

  void plan(sim::Replica& replica, sim::IterationPlan& plan) override {
    if (!fair_) return plan_batch(replica, plan);
    fair_->order_waiting(replica);
    plan_batch(replica, plan);
    fair_->charge(replica, plan);
  }

 private:
  void plan_batch(sim::Replica& replica, sim::IterationPlan& plan) {
    if (priority_) {
      replica.order_waiting_by_priority();
      if (preempt_to_admit_)
        preempt_for_waiting_head(replica, [&](sim::RequestId id) { return head_fits(replica, id); });
    }
    if (!replica.waiting().empty() && !replica.resumable(replica.request(replica.waiting().front()))) {
      admit_prefills(replica, plan);
      if (!plan.prefills.empty()) return;
    }
    const bool preempted = priority_ ? decode_running_by_priority(replica, plan, kNoLimit, order_)
                                     : decode_running(replica, plan);
    if (!preempted) admit_resumable(replica, plan, max_num_seqs_, reserved_blocks(replica.kv()));
  }

  // Whether the head of the waiting queue, `id`, would be admitted now: a free sequence slot and,
  // above the watermark, the blocks of its whole prompt (resumable: of its KV and next token). Its
  // prompt always fits the token budget (max_num_batched_tokens >= max_context).
  bool head_fits(sim::Replica& replica, sim::RequestId id) const {
    if (static_cast<int64_t>(replica.running().size()) >= max_num_seqs_) return false;
    const sim::Request& r = replica.request(id);
    const int64_t tokens = replica.resumable(r) ? r.kv_tokens + 1 : r.prefill_target();
    return replica.kv().available() - replica.admission_blocks(tokens) >= reserved_blocks(replica.kv());
  }

  void admit_prefills(sim::Replica& replica, sim::IterationPlan& plan) {
    const int64_t reserved = reserved_blocks(replica.kv());
    int64_t tokens = 0;
    while (true) {
      // Its host/store hit first: a load takes it out of the queue; one waiting for blocks stops here.
      if (replica.settle_tier_hits() || replica.waiting().empty()) break;
      const sim::RequestId id = replica.waiting().front();
      const sim::Request& r = replica.request(id);
      if (replica.resumable(r)) break;
      if (static_cast<int64_t>(replica.running().size()) >= max_num_seqs_) break;
      const int64_t target = r.prefill_target();
      const int64_t hit = replica.prefix_hit_tokens(id);
      const int64_t n = target - hit;
      if (tokens + n > max_num_batched_tokens_) break;
      if (replica.kv().available() - replica.admission_blocks(target) < reserved) break;
      if (!replica.admit_front(target)) break;
      plan.prefills.push_back({id, n});
      tokens += n;
    }
  }

  static constexpr int64_t kNoLimit = std::numeric_limits<int64_t>::max();
  int64_t max_num_seqs_;
  int64_t max_num_batched_tokens_;
  double watermark_;
  bool priority_;
  bool preempt_to_admit_;              // priority_preemption = "admit"
  std::optional<FairShare> fair_;      // policy = "fair"
  std::vector<sim::RequestId> order_;  // priority: the running set in priority order
};

const bool kRegistered = scheduler_registry().add(
    {"continuous",
     "vLLM v0 continuous batching: prefill-prioritising, whole prompts, FCFS, preemption of the newest",
     with_policy_params({
         core::ParamSpec::integer("max_num_seqs", 256, "sequences", "most sequences running at once")
             .range(1, 1 << 20),
         core::ParamSpec::integer("max_num_batched_tokens", 0, "tokens",
                                  "most prompt tokens in one prefill iteration; unset = max(model "
                                  "max_context, 2048) as vLLM; must be >= the model's max_context")
             .range(1, int64_t{1} << 40)
             .optional(),
         core::ParamSpec::real("watermark", 0.01, "fraction of KV blocks",
                               "blocks kept free when admitting prefills, so running sequences can grow")
             .range(0, 0.5),
     })},
    [](const core::Params& p, const SchedulerContext& ctx) {
      int64_t budget = std::max<int64_t>(ctx.max_context, 2048);
      if (p.has("max_num_batched_tokens")) {
        budget = p.get_int("max_num_batched_tokens");
        if (budget < ctx.max_context)
          p.fail("max_num_batched_tokens",
                 "value " + std::to_string(budget) + " is below the model's max_context (" +
                     std::to_string(ctx.max_context) +
                     " tokens): a whole prompt must fit one prefill iteration with this scheduler; "
                     "raise it, lower [model] max_context, or use a chunked-prefill scheduler");
      }
      // Limits are per attention rank (SchedulerContext::data_parallel).
      return std::make_unique<ContinuousScheduler>(p.get_int("max_num_seqs") * ctx.data_parallel,
                                                   budget * ctx.data_parallel, p.get_float("watermark"),
                                                   p.has("policy") && p.get_string("policy") == "priority",
                                                   preempt_to_admit(p), fair_share(p, ctx));
    });

}  // namespace
}  // namespace servesim::policies
