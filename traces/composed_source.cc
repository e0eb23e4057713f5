#include "traces/composed_source.h"

#include <limits>

#include "traces/workload_common.h"

namespace servesim::traces {

std::vector<core::ParamSpec> composed_params(std::vector<core::ParamSpec> own) {
  own.push_back(arrival_section_spec());
  own.push_back(core::ParamSpec::integer("max_requests", 0, "requests",
                                         "stop after this many requests, whatever the arrival process says (unset: "
                                         "no limit)")
                    .range(1, kMaxRequests)
                    .optional());
  own.push_back(core::ParamSpec::integer("seed", 0, "", "random seed of this workload (unset: the run's seed)")
                    .at_least(0)
                    .optional());
  own.push_back(client_timeout_spec());
  own.push_back(repetition_spec());
  own.push_back(classes_spec());
  own.push_back(rate_profile_spec());
  return own;
}

ComposedSource::ComposedSource(const core::Params& p, uint64_t seed, std::unique_ptr<RequestContent> content)
    : process_(arrival_registry().make(p.section("arrival"), seed)),
      content_(std::move(content)),
      max_requests_(p.has("max_requests") ? p.get_int("max_requests") : std::numeric_limits<int64_t>::max()),
      client_timeout_(read_client_timeout(p)),
      repetition_(read_repetition(p)),
      profile_(read_rate_profile(p)),
      classes_(read_classes(p), seed) {
  if (profile_) who_ = "the " + p.section("arrival").kind() + " arrivals";
  if (profile_ && process_->listens())
    p.fail("rate_profile", "the arrival process (" + p.section("arrival").kind() +
                               (p.section("arrival").kind() == "stages" ? " with drain" : "") +
                               ") sends when requests end for their clients, which a rate profile cannot time-change; "
                               "use an open-loop process (poisson, gamma, constant, poisson_fixed_count, offline, "
                               "stages with drain = false)");
  if (!classes_.empty() && !classes_.has_shares())
    p.fail("classes", "a generated workload draws each request's class from the classes' shares: give every "
                      "[[" + p.key_path("classes") + "]] a share");
}

bool ComposedSource::next(RequestSpec& out) {
  if (static_cast<int64_t>(sent_) >= max_requests_) return false;
  const std::optional<Send> send = process_->peek();
  if (!send) return false;
  process_->take(sent_);
  content_->fill(sent_, out);
  out.arrival = send->time;
  if (profile_) {
    last_shaped_ns_ = shape_arrival_ns(*profile_, send->time.ns(), last_shaped_ns_, who_);
    out.arrival = core::Time::from_ns(last_shaped_ns_);
  }
  out.stage = send->stage;
  out.repetition = repetition_;
  out.request_class = classes_.empty() ? 0 : classes_.draw();
  ++sent_;
  return true;
}

std::optional<core::Time> ComposedSource::due() {  // closed loops only: never with a profile
  if (static_cast<int64_t>(sent_) >= max_requests_) return std::nullopt;
  const std::optional<Send> send = process_->peek();
  if (!send) return std::nullopt;
  return send->time;
}

}  // namespace servesim::traces
