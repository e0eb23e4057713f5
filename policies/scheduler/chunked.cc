// chunked: Sarathi-Serve's stall-free batching with chunked prefills (also vLLM v1's default).
//
// Each iteration has a token budget (max_num_batched_tokens). It takes, in order: one token for
// every decoding request (oldest first, preempting the newest running request when a block runs
// out), then the next chunk of each partially prefilled request, then new requests from the waiting
// queue (FCFS, head-of-line), each chunk min(what is left of its prompt, chunk_size, what is left of
// the budget). A long prompt spans as many iterations as it needs, so it never stalls decodes for a
// whole prefill; prefill chunks and decodes share iterations, and the cost model sees each chunk's
// tokens and the context it attends to.
#include <algorithm>
#include <optional>
#include <vector>

#include "policies/scheduler/batch_scheduler.h"
#include "policies/scheduler/fair.h"
#include "policies/scheduler/steps.h"

namespace servesim::policies {
namespace {

class ChunkedScheduler final : public sim::BatchScheduler {
 public:
  ChunkedScheduler(int64_t max_num_seqs, int64_t budget, int64_t chunk_size, double watermark, bool priority,
                   bool preempt_to_admit, std::optional<FairShare> fair)
      : max_num_seqs_(max_num_seqs),
        budget_(budget),
        chunk_size_(chunk_size),
        watermark_(watermark),
        priority_(priority),
        preempt_to_admit_(preempt_to_admit),
        fair_(std::move(fair)) {}

  int64_t reserved_blocks(const sim::KvCache& kv) const override {
    return static_cast<int64_t>(watermark_ * static_cast<double>(kv.total()));
  }

  // With nothing waiting and every running request decoding, plan_batch plans decode_running alone
  // (no chunk to continue, none to admit), capped by the token budget at one token per decode;
  // priority orders the decodes otherwise and fair charges every plan.
  bool decodes_running_when_nothing_waits() const override { return !priority_ && !fair_; }
  int64_t decodes_running_limit() const override { return budget_; }

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
    const bool preempted =
        priority_ ? decode_running_by_priority(replica, plan, budget_, order_) : decode_running(replica, plan, budget_);
    int64_t left = budget_ - plan.decode_tokens();
    left -= continue_prefills(replica, plan, left);
    if (preempted) return;  // blocks are short: admit nothing new this iteration
    left -= admit_resumable(replica, plan, max_num_seqs_, reserved_blocks(replica.kv()), left);
    admit_new(replica, plan, left);
  }

  // Whether the head of the waiting queue, `id`, would be admitted now: a free sequence slot, a
  // token of the budget left after one token per running request, and, above the watermark, the
  // blocks of its first chunk (resumable: of its KV and next token).
  bool head_fits(sim::Replica& replica, sim::RequestId id) const {
    const auto running = static_cast<int64_t>(replica.running().size());
    if (running >= max_num_seqs_ || running >= budget_) return false;
    const sim::Request& r = replica.request(id);
    const int64_t hit = replica.resumable(r) ? 0 : replica.prefix_hit_tokens(id);
    const int64_t tokens =
        replica.resumable(r) ? r.kv_tokens + 1 : hit + std::min(r.prefill_target() - hit, chunk_size_);
    return replica.kv().available() - replica.admission_blocks(tokens) >= reserved_blocks(replica.kv());
  }

  // The largest chunk <= `want` whose blocks are available (halving: block rounding makes the
  // exact answer a search, and a smaller chunk is always acceptable).
  static int64_t fitting_chunk(sim::Replica& replica, sim::RequestId id, int64_t want) {
    const sim::Request& r = replica.request(id);
    for (int64_t c = want; c > 0; c /= 2)
      if (replica.growth_blocks(id, r.kv_tokens + c) <= replica.kv().available()) return c;
    return 0;
  }

  static bool planned(const sim::IterationPlan& plan, sim::RequestId id) {
    for (sim::RequestId d : plan.decodes)
      if (d == id) return true;
    for (const auto& p : plan.prefills)
      if (p.id == id) return true;
    return false;
  }

  // Whom a partial prefill of `id` that finds no blocks preempts: the newest running request
  // (priority: the lowest-priority one, newest among equals, below `id`) not in this iteration;
  // `id` itself when there is none.
  sim::RequestId victim(sim::Replica& replica, const sim::IterationPlan& plan, sim::RequestId id) const {
    if (!priority_) {
      const sim::RequestId last = replica.running().back();
      return last != id && !planned(plan, last) ? last : id;
    }
    sim::RequestId worst = id;
    for (sim::RequestId v : replica.running())
      if (!planned(plan, v) && priority_before(replica.request(worst), replica.request(v))) worst = v;
    return worst;
  }

  int64_t continue_prefills(sim::Replica& replica, sim::IterationPlan& plan, int64_t left) {
    int64_t used = 0;
    for (size_t i = 0; i < replica.running().size() && used < left; ++i) {
      const sim::RequestId id = replica.running()[i];
      const sim::Request& r = replica.request(id);
      if (r.decoding) continue;
      const int64_t want = std::min({r.prefill_target() - r.kv_tokens, chunk_size_, left - used});
      int64_t c = fitting_chunk(replica, id, want);
      // No room even for a small chunk: make room by preempting the newest running requests not in
      // this iteration, as decodes do, so partially prefilled requests cannot wait on each other.
      // Under priority scheduling the victim is the lowest-priority such request, and only one of
      // lower priority than this one.
      for (sim::RequestId v; c == 0 && (v = victim(replica, plan, id)) != id;) {
        replica.preempt(v);
        c = fitting_chunk(replica, id, want);
      }
      if (c == 0 || !replica.reserve(id, r.kv_tokens + c)) continue;
      plan.prefills.push_back({id, c});
      used += c;
    }
    return used;
  }

  void admit_new(sim::Replica& replica, sim::IterationPlan& plan, int64_t left) {
    const int64_t reserved = reserved_blocks(replica.kv());
    while (left > 0) {
      // Its host/store hit first: a load takes it out of the queue; one waiting for blocks stops here.
      if (replica.settle_tier_hits() || replica.waiting().empty()) break;
      const sim::RequestId id = replica.waiting().front();
      const sim::Request& r = replica.request(id);
      if (replica.resumable(r)) break;
      if (static_cast<int64_t>(replica.running().size()) >= max_num_seqs_) break;
      const int64_t hit = replica.prefix_hit_tokens(id);
      const int64_t c = std::min({r.prefill_target() - hit, chunk_size_, left});
      if (replica.kv().available() - replica.admission_blocks(hit + c) < reserved) break;
      if (!replica.admit_front(hit + c)) break;
      plan.prefills.push_back({id, c});
      left -= c;
    }
  }

  int64_t max_num_seqs_;
  int64_t budget_;
  int64_t chunk_size_;
  double watermark_;
  bool priority_;
  bool preempt_to_admit_;              // priority_preemption = "admit"
  std::optional<FairShare> fair_;      // policy = "fair"
  std::vector<sim::RequestId> order_;  // priority: the running set in priority order
};

const bool kRegistered = scheduler_registry().add(
    {"chunked",
     "Sarathi-Serve chunked prefill: per-iteration token budget; decodes first, then partial "
     "prefills, then new prompts in chunks; prefill and decode share iterations",
     with_policy_params({
         core::ParamSpec::integer("max_num_seqs", 256, "sequences", "most sequences running at once")
             .range(1, 1 << 20),
         core::ParamSpec::integer("max_num_batched_tokens", 2048, "tokens",
                                  "token budget of one iteration (decodes count one each, plus the draft tokens they verify)")
             .range(1, int64_t{1} << 40),
         core::ParamSpec::integer("chunk_size", 0, "tokens",
                                  "most prompt tokens of one request per iteration; unset = the budget")
             .range(1, int64_t{1} << 40)
             .optional(),
         core::ParamSpec::real("watermark", 0.01, "fraction of KV blocks",
                               "blocks kept free when admitting new requests, so running ones can grow")
             .range(0, 0.5),
     })},
    [](const core::Params& p, const SchedulerContext& ctx) {
      // Limits are per attention rank (SchedulerContext::data_parallel); a chunk stays one request's.
      const int64_t budget = p.get_int("max_num_batched_tokens");
      const int64_t chunk = p.has("chunk_size") ? p.get_int("chunk_size") : budget;
      return std::make_unique<ChunkedScheduler>(p.get_int("max_num_seqs") * ctx.data_parallel,
                                                budget * ctx.data_parallel, chunk, p.get_float("watermark"),
                                                p.has("policy") && p.get_string("policy") == "priority",
                                                preempt_to_admit(p), fair_share(p, ctx));
    });

}  // namespace
}  // namespace servesim::policies
