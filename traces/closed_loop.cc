// Arrival kind "closed_loop": a fixed number of clients, each sending its next request once it has
// received the last token of its previous one (plus a think time), like `vllm bench serve
// --max-concurrency` with every request ready at once, or GuideLLM's concurrent mode. A request
// that fails (rejected, or timed out under the workload's client_timeout_s) frees its client too.

#include <memory>
#include <queue>
#include <vector>

#include "sim/core/error.h"
#include "traces/staged_process.h"

namespace servesim::traces {
namespace {

using core::ParamSpec;

class ClosedLoop final : public ArrivalProcess {
 public:
  ClosedLoop(int64_t clients, std::optional<int64_t> requests, std::optional<double> duration_s, double think_s)
      : clients_(clients), requests_(requests), think_(core::Duration::from_seconds(think_s)) {
    if (duration_s) end_ns_ = core::Duration::from_seconds(*duration_s).ns();
    // Every client sends its first request at time 0; ties go in client order.
    for (int64_t c = 0; c < clients; ++c) ready_.push({0, seq_++});
  }

  std::optional<Send> peek() override {
    if ((requests_ && sent_ >= *requests_) || ready_.empty()) return std::nullopt;
    const Ready& r = ready_.top();
    // A client ready at or after the end sends nothing more; one that is still waiting for a
    // response may yet be ready earlier, so this is "none now", not the end.
    if (end_ns_ && r.t_ns >= *end_ns_) return std::nullopt;
    return Send{core::Time::from_ns(r.t_ns), 0};
  }
  void take(uint64_t /*id*/) override {
    const int64_t t = ready_.top().t_ns;
    ready_.pop();
    ++sent_;
    // Requests that end when they are sent (refused: longer than the context or the KV cache), with
    // no think time, would be sent again and again at one instant: stop rather than spin.
    same_instant_ = t == last_ns_ ? same_instant_ + 1 : 0;
    last_ns_ = t;
    if (same_instant_ > clients_ + kMaxSameInstant)
      throw core::Error("closed_loop arrivals: more than " + std::to_string(clients_ + kMaxSameInstant) +
                        " requests sent at t = " + std::to_string(static_cast<double>(t) * 1e-9) +
                        " s without the clock moving: every request ends as soon as it is sent (rejected: "
                        "longer than the model's context or the KV cache?) and think_time_s is 0");
  }
  bool listens() const override { return true; }
  void request_done(uint64_t /*id*/, core::Time t) override {
    int64_t next = 0;
    if (__builtin_add_overflow(t.ns(), think_.ns(), &next))
      throw core::Error("closed_loop arrivals: the clock passed the int64 nanosecond limit (292 years)");
    ready_.push({next, seq_++});
  }

 private:
  struct Ready {
    int64_t t_ns;
    uint64_t seq;  // the order clients became ready in: ties are sent in that order
    bool operator>(const Ready& o) const { return t_ns != o.t_ns ? t_ns > o.t_ns : seq > o.seq; }
  };
  static constexpr int64_t kMaxSameInstant = 1'000'000;
  int64_t clients_;
  std::optional<int64_t> requests_;
  std::optional<int64_t> end_ns_;
  core::Duration think_;
  std::priority_queue<Ready, std::vector<Ready>, std::greater<Ready>> ready_;
  int64_t sent_ = 0;
  uint64_t seq_ = 0;
  int64_t last_ns_ = -1;
  int64_t same_instant_ = 0;  // sends at last_ns_ after the first
};

const bool kRegistered = arrival_registry().add(
    {"closed_loop",
     "`concurrency` clients, all starting at time 0, each sending its next request think_time_s after its previous "
     "one ended for it (last token received at the client, or failed); stops after `requests` sends or at "
     "`duration_s` (no send at or after it)",
     {ParamSpec::integer("concurrency", 1, "clients", "clients, each with at most one request in flight")
          .range(1, 1 << 20)
          .required(),
      requests_spec(false), duration_spec(false),
      ParamSpec::real("think_time_s", 0, "s", "a client's pause between the end of one request and its next send")
          .range(0, 9.2e9)}},
    [](const core::Params& p, uint64_t) -> std::unique_ptr<ArrivalProcess> {
      StageSpec limits;
      read_limits(p, limits, true);
      return std::make_unique<ClosedLoop>(p.get_int("concurrency"), limits.count, limits.duration_s,
                                          p.get_float("think_time_s"));
    });

}  // namespace
}  // namespace servesim::traces
