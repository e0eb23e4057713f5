// tpot: scale a disaggregated cluster's decode pool so that the predicted time per output token
// stays under max_tpot_ms. A decode replica's TPOT is its iteration time, which grows with its batch:
// the prediction is the cost model's GPU time of one decode iteration of the mean batch of the
// replicas up, ceil(S / up), where S counts the requests on them (running, and queued: waiting for
// blocks or with their KV transfer waiting or under way, which all join the batch), each attending
// to context_tokens keys (the load's typical prompt plus half its answer: an operator's figure, as
// vLLM's metrics give the batch and not each sequence's length). With b* the largest batch whose
// iteration fits the limit, the count that brings it back under is n = ceil(S / b*), at least one
// more; below scale_down_below x the limit it wants one replica fewer than it has (the stabilisation
// window and the next evaluations step the pool down one at a time), as the slo kind does.
#include <cmath>
#include <string>

#include "policies/autoscaler/autoscaler.h"
#include "sim/core/error.h"

namespace servesim::policies {
namespace {

using core::ParamSpec;

class TpotAutoscaler final : public sim::Autoscaler {
 public:
  TpotAutoscaler(double max_tpot_ms, double scale_down_below, int64_t context_tokens)
      : max_tpot_ms_(max_tpot_ms), down_below_(scale_down_below), context_(context_tokens) {}
  void bind(std::span<sim::Replica* const> replicas) override {
    // The pool's replicas are alike: one cost serves them all.
    replica_ = replicas.front();
    // b*: the largest batch whose iteration fits the limit (the step time grows with the batch).
    int64_t lo = 0, hi = int64_t{1} << 20;
    if (step_ms(hi) <= max_tpot_ms_) lo = hi;
    while (hi - lo > 1) {
      const int64_t mid = lo + (hi - lo) / 2;
      (step_ms(mid) <= max_tpot_ms_ ? lo : hi) = mid;
    }
    max_batch_ = lo;
  }
  int64_t desired(const sim::FleetView& v) override {
    double seqs = 0;
    for (size_t i = 0; i < v.loads.size(); ++i)
      if (v.phases[i] == sim::ReplicaPhase::kUp) seqs += static_cast<double>(v.loads[i].queued + v.loads[i].running);
    const auto batch = static_cast<int64_t>(std::ceil(seqs / static_cast<double>(v.up)));
    const double predicted_ms = batch > 0 ? step_ms(batch) : 0.0;
    if (predicted_ms <= max_tpot_ms_ && predicted_ms >= down_below_ * max_tpot_ms_) return v.current;
    if (predicted_ms < down_below_ * max_tpot_ms_) return static_cast<int64_t>(v.current) - 1;
    if (max_batch_ == 0) return INT32_MAX;  // not even one sequence fits: as many as it may have
    return std::max<int64_t>(v.current + 1, static_cast<int64_t>(std::ceil(seqs / static_cast<double>(max_batch_))));
  }

 private:
  double step_ms(int64_t seqs) const {
    const double s = replica_->decode_seconds(seqs, context_);
    if (!(s >= 0) || !std::isfinite(s))
      throw core::Error("internal: a decode iteration of " + std::to_string(seqs) + " sequences costs " +
                        std::to_string(s) + " s on replica " + std::to_string(replica_->index()));
    return s * 1e3;
  }
  double max_tpot_ms_, down_below_;
  int64_t context_;
  const sim::Replica* replica_ = nullptr;
  int64_t max_batch_ = 0;
};

const bool kRegistered = autoscaler_registry().add(
    {"tpot",
     "disaggregated decode pools ([cluster.decode.autoscaler]): scale up when the predicted TPOT (the cost "
     "model's decode iteration for the mean batch of the replicas up, each sequence at context_tokens) exceeds "
     "max_tpot_ms, to ceil(requests / the largest batch that fits the limit) (at least one more); one replica "
     "fewer when it is below scale_down_below x max_tpot_ms",
     autoscaler_params({
         ParamSpec::real("max_tpot_ms", 50, "ms", "the predicted time per output token above which the pool scales up")
             .range(1e-3, 1e10)
             .required(),
         ParamSpec::real("scale_down_below", 0.5, "fraction",
                         "scale down when the prediction is below this fraction of max_tpot_ms")
             .range(0, 1),
         ParamSpec::integer("context_tokens", 2048, "tokens",
                            "the context each sequence of the batch attends to (typical prompt + half the answer)")
             .range(1, 1 << 24),
     })},
    [](const core::Params& p) {
      return std::make_unique<TpotAutoscaler>(p.get_float("max_tpot_ms"), p.get_float("scale_down_below"),
                                              p.get_int("context_tokens"));
    });

}  // namespace
}  // namespace servesim::policies
