// Kind "sessions": multi-turn conversations for prefix-caching studies.
//
// Sessions start as a Poisson process. Each session picks one of `system_prompts` shared system
// prompts (lengths drawn once per system prompt), then runs `turns` turns; turn t's prompt is the
// whole history (system prompt + every earlier user message and answer) plus a new user message,
// and the next turn arrives an exponential think time after this one (open loop: a workload does
// not know how it is served). Each request carries prefix block hashes, one per `block_tokens`
// tokens of its history + answer, so that equal prefixes have equal hash chains: blocks inside a
// system prompt are shared by every session using it, later blocks by the session's own turns;
// a block that is only partly filled gets its own id (its content differs from the full block).
#include <queue>
#include <vector>

#include "sim/core/format.h"
#include "sim/core/rng.h"
#include "traces/length_distribution.h"
#include "traces/renewal_generator.h"
#include "traces/workload_common.h"

namespace servesim::traces {
namespace {

constexpr double kMaxSessionsBeforeWindow = 1e7;

uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t s = a * 0x9e3779b97f4a7c15ULL ^ (b + 0x7f4a7c159e3779b9ULL);
  return core::splitmix64(s);
}

class SessionSource final : public ShapedSource {
 public:
  SessionSource(const core::Params& p, uint64_t seed)
      : ShapedSource(p, seed),
        rate_(p.get_float("rate")),
        think_s_(p.get_float("think_time_s")),
        block_tokens_(p.get_int("block_tokens")),
        seed_(seed),
        session_rng_(seed, "sessions"),
        turn_rng_(seed, "turns"),
        user_rng_(seed, "user"),
        output_rng_(seed, "output"),
        system_rng_(seed, "system"),
        turns_(distribution_registry().make(p.section("turns"))),
        user_(distribution_registry().make(p.section("user"))),
        output_(distribution_registry().make(p.section("output"))),
        system_(distribution_registry().make(p.section("system_tokens"))) {
    const int64_t n = p.get_int("system_prompts");
    for (int64_t i = 0; i < n; ++i) system_lengths_.push_back(system_->sample(system_rng_));
    next_session_s_ = session_rng_.exponential(rate_);
    expected_span_s_ = shaped_span_s(generator_span_s(p) / p.get_float("rate_scale"));
  }

  int64_t hash_block_tokens() const override { return block_tokens_; }
  double expected_span_s() const override { return expected_span_s_; }

 protected:
  bool next_raw(RequestSpec& out) override {
    // The earlier of: the next new session, the next turn of a running one.
    if (pending_.empty() || next_session_s_ <= pending_.top().time_s) {
      Turn t;
      t.time_s = next_session_s_;
      t.session = ++sessions_;
      t.system = static_cast<uint32_t>(session_rng_.uniform_int(system_lengths_.size()));
      t.turns_left = turns_->sample(turn_rng_);
      t.history = system_lengths_[t.system];
      next_session_s_ += session_rng_.exponential(rate_);
      pending_.push(t);
    }
    Turn t = pending_.top();
    pending_.pop();
    if (!(t.time_s < 9.2e9)) throw core::Error(describe() + ": the clock passed the int64 nanosecond limit");
    const int64_t user = user_->sample(user_rng_);
    const int64_t output = output_->sample(output_rng_);
    out.arrival = core::Time::from_ns(core::Duration::from_seconds(t.time_s).ns());
    out.prompt_tokens = t.history + user;
    out.output_tokens = output;
    out.session = t.session;
    out.hashed_tokens = out.prompt_tokens + output;
    fill_hashes(t, out);
    if (--t.turns_left > 0) {
      t.history = out.prompt_tokens + output;
      t.time_s += think_s_ > 0 ? turn_rng_.exponential(1.0 / think_s_) : 0.0;
      t.seq = ++turn_seq_;
      pending_.push(t);
    }
    return true;
  }

  std::string describe() const override { return "sessions generator"; }

 private:
  struct Turn {
    double time_s = 0;
    uint64_t seq = 0;  // tie-break: arrival order of equal times is fixed
    uint64_t session = 0;
    uint32_t system = 0;
    int64_t turns_left = 0;
    int64_t history = 0;  // tokens resent with the next user message
    bool operator>(const Turn& o) const { return time_s != o.time_s ? time_s > o.time_s : seq > o.seq; }
  };

  void fill_hashes(const Turn& t, RequestSpec& out) const {
    out.block_hashes.clear();
    const int64_t sys = system_lengths_[t.system];
    const int64_t total = out.hashed_tokens;
    for (int64_t b = 0; b * block_tokens_ < total; ++b) {
      const int64_t end = std::min((b + 1) * block_tokens_, total);
      const bool full = end - b * block_tokens_ == block_tokens_;
      uint64_t id = end <= sys ? mix(mix(seed_, 0x5e55'0000ULL + t.system), static_cast<uint64_t>(b))
                               : mix(mix(seed_, t.session << 1 | 1), static_cast<uint64_t>(b));
      if (!full) id = mix(id, static_cast<uint64_t>(end));  // a partial block's content is its own
      out.block_hashes.push_back(id);
    }
  }

  double rate_, think_s_;
  int64_t block_tokens_;
  uint64_t seed_;
  core::Rng session_rng_, turn_rng_, user_rng_, output_rng_, system_rng_;
  std::unique_ptr<LengthDistribution> turns_, user_, output_, system_;
  std::vector<int64_t> system_lengths_;
  std::priority_queue<Turn, std::vector<Turn>, std::greater<Turn>> pending_;
  double next_session_s_ = 0;
  double expected_span_s_ = 0;
  uint64_t sessions_ = 0;
  uint64_t turn_seq_ = 0;
};

const bool kRegistered = workload_registry().add(
    {"sessions",
     "multi-turn conversations: Poisson session starts, shared system prompts, each turn resends "
     "the history plus a new user message; requests carry prefix block hashes; needs max_requests "
     "or window_end_s",
     with_common_params({
         core::ParamSpec::real("rate", 1, "sessions/s", "mean rate of new sessions").range(1e-6, 1e9).required(),
         core::ParamSpec::section("turns", "length_distributions", "", "turns per session (>= 1)"),
         core::ParamSpec::real("think_time_s", 10, "s", "mean gap between a session's turns (exponential)")
             .range(0, 1e7),
         core::ParamSpec::integer("system_prompts", 8, "prompts", "distinct system prompts sessions share")
             .range(1, 1 << 20),
         core::ParamSpec::section("system_tokens", "length_distributions", "", "length of each system prompt (tokens)"),
         core::ParamSpec::section("user", "length_distributions", "", "new user tokens per turn"),
         core::ParamSpec::section("output", "length_distributions", "", "answer tokens per turn"),
         core::ParamSpec::integer("block_tokens", 16, "tokens",
                                  "tokens per prefix hash block (the prefix cache's unit)")
             .range(1, 1 << 20),
     })},
    [](const core::Params& p, uint64_t run_seed) -> std::unique_ptr<ArrivalSource> {
      require_generator_limit(p);
      // Turns of sessions that started before the window can fall inside it, so every session is
      // drawn from time 0 (no skipping ahead as for renewal arrivals): refuse what would take hours.
      const double before = p.get_float("window_start_s") * p.get_float("rate");
      if (before > kMaxSessionsBeforeWindow)
        p.fail("window_start_s", "window_start_s = " + core::format_double(p.get_float("window_start_s")) + " s at " +
                                     p.key_path("rate") + " = " + core::format_double(p.get_float("rate")) +
                                     " sessions/s: about " + core::format_double(before) +
                                     " sessions start before the window, and the generator draws each of them (their "
                                     "later turns may fall inside it); at most " +
                                     core::format_double(kMaxSessionsBeforeWindow) + ": start the window earlier");
      return std::make_unique<SessionSource>(p, workload_seed(p, run_seed));
    });

}  // namespace
}  // namespace servesim::traces
