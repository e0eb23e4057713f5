#include "policies/scheduler/fair.h"

#include <algorithm>
#include <limits>

namespace servesim::policies {

FairShare::FairShare(double prompt_weight, double output_weight, const std::vector<double>& tenant_weights,
                     std::shared_ptr<std::vector<double>> counters, bool cluster_wide)
    : prompt_weight_(prompt_weight),
      output_weight_(output_weight),
      counter_(std::move(counters)),
      cluster_wide_(cluster_wide) {
  for (double w : tenant_weights) inverse_weight_.push_back(1.0 / w);
}

void FairShare::grow(uint16_t tenant) {
  if (tenant >= counter_->size()) counter_->resize(static_cast<size_t>(tenant) + 1, 0.0);  // shared: any replica
  if (tenant < active_.size()) return;
  const size_t n = static_cast<size_t>(tenant) + 1;
  active_.resize(n, 0);
  now_.resize(n, 0);
  queues_.resize(n);
  heads_.resize(n, 0);
  projected_.resize(n, 0.0);
}

void FairShare::order_waiting(sim::Replica& replica) {
  for (sim::RequestId id : replica.waiting()) grow(replica.request(id).tenant);
  for (sim::RequestId id : replica.running()) grow(replica.request(id).tenant);
  std::fill(now_.begin(), now_.end(), 0);
  for (sim::RequestId id : replica.waiting()) now_[replica.request(id).tenant] = 1;
  for (sim::RequestId id : replica.running()) now_[replica.request(id).tenant] = 1;
  // The lift: the lowest counter among tenants active here both now and at the last plan.
  std::vector<double>& counter = *counter_;
  double floor = std::numeric_limits<double>::infinity();
  for (size_t t = 0; t < active_.size(); ++t)
    if (now_[t] && active_[t]) floor = std::min(floor, counter[t]);
  for (size_t t = 0; t < active_.size(); ++t) {
    if (now_[t] && !active_[t] && floor < std::numeric_limits<double>::infinity())
      counter[t] = std::max(counter[t], floor);
    active_[t] = now_[t];
  }
  if (replica.waiting().size() < 2) return;
  for (auto& q : queues_) q.clear();
  for (sim::RequestId id : replica.waiting()) queues_[replica.request(id).tenant].push_back(id);
  size_t busy = 0;
  for (size_t t = 0; t < queues_.size(); ++t) {
    heads_[t] = 0;
    projected_[t] = counter[t];
    busy += queues_[t].empty() ? 0 : 1;
  }
  if (busy < 2) return;  // one tenant waiting: its own order (FCFS) stands
  order_.clear();
  for (size_t left = replica.waiting().size(); left > 0; --left) {
    size_t best = queues_.size();
    for (size_t t = 0; t < queues_.size(); ++t) {
      if (heads_[t] == queues_[t].size()) continue;
      if (best == queues_.size() || projected_[t] < projected_[best] ||
          (projected_[t] == projected_[best] &&
           replica.request(queues_[t][heads_[t]]).id < replica.request(queues_[best][heads_[best]]).id))
        best = t;
    }
    const sim::RequestId id = queues_[best][heads_[best]++];
    order_.push_back(id);
    projected_[best] += prompt_weight_ * static_cast<double>(replica.request(id).pending_prefill_tokens()) *
                        per_service(static_cast<uint16_t>(best));
  }
  replica.order_waiting(order_);
}

void FairShare::charge(sim::Replica& replica, const sim::IterationPlan& plan) {
  for (const sim::PlannedPrefill& p : plan.prefills) {
    const uint16_t t = replica.request(p.id).tenant;
    grow(t);
    (*counter_)[t] += prompt_weight_ * static_cast<double>(p.tokens) * per_service(t);
  }
  for (sim::RequestId id : plan.decodes) {
    const uint16_t t = replica.request(id).tenant;
    grow(t);
    (*counter_)[t] += output_weight_ * per_service(t);
  }
}

std::vector<core::ParamSpec> with_policy_params(std::vector<core::ParamSpec> params) {
  std::vector<core::ParamSpec> policy = {
    core::ParamSpec::string("policy", "",
                            "fcfs: the waiting queue in arrival order, the newest running request preempted "
                            "when blocks run out; priority (vLLM's scheduling_policy = \"priority\"): waiting "
                            "requests in order of their class's priority (lower first, [[workload.classes]]), "
                            "then arrival, and the lowest-priority running request preempted; fair: waiting "
                            "requests in order of their tenant's virtual token counter (VTC: service had here, "
                            "fair_prompt_weight per prefill token + fair_output_weight per decode; "
                            "docs/fleet.md); unset: fcfs")
        .one_of({"fcfs", "priority", "fair"})
        .optional(),
    core::ParamSpec::string("priority_preemption", "",
                            "policy = \"priority\": admit: at each plan, while the head of the waiting queue "
                            "cannot be admitted and a running request has a lower priority (a larger value), "
                            "the lowest-priority running request (newest among equals) is preempted, as vLLM "
                            "v0's priority policy; none or unset: a waiting request that does not fit waits "
                            "(vLLM v1)")
        .one_of({"none", "admit"})
        .optional(),
    core::ParamSpec::real("fair_prompt_weight", 1, "per token",
                          "policy = \"fair\": a prefill token's weight in a tenant's counter")
        .range(0, 1e6)
        .optional(),
    core::ParamSpec::real("fair_output_weight", 2, "per token",
                          "policy = \"fair\": a decoded token's weight (VTC's default: twice a prompt token)")
        .range(0, 1e6)
        .optional(),
    core::ParamSpec::string("fair_scope", "",
                            "policy = \"fair\": replica: each replica's scheduler keeps its own tenant "
                            "counters; cluster: every replica's scheduler charges and reads one set (a shared "
                            "counter service); unset: replica")
        .one_of({"replica", "cluster"})
        .optional(),
  };
  params.insert(params.end(), policy.begin(), policy.end());
  return params;
}

std::optional<FairShare> fair_share(const core::Params& p, const SchedulerContext& ctx) {
  const bool fair = p.has("policy") && p.get_string("policy") == "fair";
  for (const char* key : {"fair_prompt_weight", "fair_output_weight", "fair_scope"})
    if (!fair && p.given(key))
      p.fail(key, "weights of the fair policy's counters; set policy = \"fair\" or remove it");
  if (!fair) return std::nullopt;
  const double wp = p.has("fair_prompt_weight") ? p.get_float("fair_prompt_weight") : 1.0;
  const double wq = p.has("fair_output_weight") ? p.get_float("fair_output_weight") : 2.0;
  if (wp + wq <= 0) p.fail("fair_output_weight", "the two weights are both 0: every tenant's counter would stay at 0");
  const bool cluster = p.has("fair_scope") && p.get_string("fair_scope") == "cluster";
  std::shared_ptr<std::vector<double>> counters;
  if (cluster) {
    if (!ctx.shared->fair_counters) ctx.shared->fair_counters = std::make_shared<std::vector<double>>();
    counters = ctx.shared->fair_counters;
  } else {
    counters = std::make_shared<std::vector<double>>();
  }
  return FairShare(wp, wq, ctx.tenant_weights, std::move(counters), cluster);
}

bool preempt_to_admit(const core::Params& p) {
  if (!p.has("priority_preemption")) return false;
  const bool priority = p.has("policy") && p.get_string("policy") == "priority";
  if (!priority && p.given("priority_preemption"))
    p.fail("priority_preemption",
           "preemption of lower classes to admit a waiting request; set policy = \"priority\" or remove it");
  return p.get_string("priority_preemption") == "admit";
}

}  // namespace servesim::policies
