// Client retries ([retries]): a client whose request failed (timed out, shed at the router, lost
// with a failed replica) sends it again after a back-off, as a new request. Part of sim::Cluster
// (cluster.h); the arrival path calls in through admit() and client_done().
#include <algorithm>
#include <cmath>
#include <string>

#include "sim/cluster/cluster.h"
#include "sim/core/error.h"

namespace servesim::sim {

double RetryPolicy::delay_s(uint32_t k, double u) const {
  // min(backoff x multiplier^(k-1), max): the power is capped before it can overflow.
  double d = backoff_s;
  for (uint32_t i = 1; i < k && d < max_backoff_s; ++i) d *= multiplier;
  return std::min(d, max_backoff_s) * (1.0 - jitter * u);
}

void Cluster::set_retries(const RetryPolicy& policy) {
  if (!policy.any()) return;
  if (closed_loop_)
    throw core::Error("internal: client retries are modelled for open-loop workloads only");
  retry_ = policy;
  retry_rng_ = core::Rng(policy.seed, "retries");
}

void Cluster::client_done(core::RequestRecord& rec) {
  rec.first_sent = rec.arrival;
  if (retry_.any()) {
    auto it = attempts_.find(rec.id);
    if (it == attempts_.end()) throw core::Error("internal: request " + std::to_string(rec.id) + " left twice");
    Retry next = std::move(it->second);
    attempts_.erase(it);
    rec.attempt = next.attempt;
    rec.first_sent = next.first_sent;
    // When the client learns of the failure: its own time-out, the rejection at its send, or the
    // replica's failure (now).
    std::optional<core::Time> noticed;
    switch (rec.outcome) {
      case core::RequestOutcome::kTimedOut:
        if (retry_.after_timeout) noticed = rec.client_finish;
        break;
      case core::RequestOutcome::kRejectedAdmission:
        if (retry_.after_shed) noticed = rec.arrival;
        break;
      case core::RequestOutcome::kFailed:
        if (retry_.after_failure) noticed = rec.finish;
        break;
      default:
        break;
    }
    if (noticed && next.attempt + 1 < retry_.max_attempts) {
      ++next.attempt;
      next.replica = rec.replica;
      const double delay = retry_.delay_s(next.attempt, retry_rng_.uniform());
      const core::Time at = std::max(sim_.now(), *noticed + core::Duration::from_seconds(delay));
      next.spec.arrival = at;
      rec.retried = true;
      uint64_t slot = retries_.size();
      if (!free_retries_.empty()) {
        slot = free_retries_.back();
        free_retries_.pop_back();
        retries_[slot] = std::move(next);
      } else {
        retries_.push_back(std::move(next));
      }
      // A strong event: the client will send it, so the run goes on until it has.
      sim_.schedule_at(at, &retry_timer_, slot);
    }
  }
  observer_.on_request_done(rec);
}

void Cluster::on_retry(uint64_t index) {
  const Retry retry = std::move(retries_[index]);
  retries_[index] = Retry{};
  free_retries_.push_back(index);
  admit(retry.spec, &retry);
}

}  // namespace servesim::sim
