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
      case core::RequestOutcome::kTimedOut: noticed = rec.client_finish; break;
      case core::RequestOutcome::kRejectedAdmission: noticed = rec.arrival; break;
      case core::RequestOutcome::kFailed: noticed = rec.finish; break;
      default: break;
    }
    const bool again = retried(next.attempt, rec.outcome);
    // A closed-loop client was told at the attempt's end (client_free) whether it retries: the
    // record that reaches here later must say the same.
    if (closed_loop_ && (!next.told || next.retries != again))
      throw core::Error("internal: request " + std::to_string(rec.id) + "'s client was told " +
                        (next.told ? (next.retries ? "it retries" : "it is free") : "nothing") +
                        ", but its record says " + (again ? "it retries" : "it does not"));
    if (again) {
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

bool Cluster::retried(uint32_t attempt, core::RequestOutcome outcome) const {
  if (attempt + 1 >= retry_.max_attempts) return false;  // the client gives up
  switch (outcome) {
    case core::RequestOutcome::kTimedOut: return retry_.after_timeout;
    case core::RequestOutcome::kRejectedAdmission: return retry_.after_shed;
    case core::RequestOutcome::kFailed: return retry_.after_failure;
    default: return false;  // answered, or a request that can never fit (a 400)
  }
}

void Cluster::client_free(uint64_t id, core::Time t, core::RequestOutcome outcome) {
  if (!retry_.any()) {  // request ids are the source's
    source_.request_done(id, t);
    return;
  }
  // A retrying client stays busy: its think time and next request wait for the end of its last
  // attempt, so the workload keeps `concurrency` clients however many attempts each makes.
  auto it = attempts_.find(id);
  if (it == attempts_.end() || it->second.told)
    throw core::Error("internal: the client of request " + std::to_string(id) + " told twice of its end");
  Retry& a = it->second;
  a.told = true;
  a.retries = retried(a.attempt, outcome);
  if (!a.retries) source_.request_done(a.sent, t);
}

void Cluster::on_retry(uint64_t index) {
  const Retry retry = std::move(retries_[index]);
  retries_[index] = Retry{};
  free_retries_.push_back(index);
  admit(retry.spec, &retry);
  if (closed_loop_) poll_source();  // a last attempt shed at its send frees its client now
}

}  // namespace servesim::sim
