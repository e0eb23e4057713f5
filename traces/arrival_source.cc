#include "traces/arrival_source.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>

#include "sim/core/error.h"
#include "sim/core/format.h"
#include "sim/core/input_file.h"
#include "traces/workload_common.h"

namespace servesim::traces {

using core::ParamSpec;

WorkloadRegistry& workload_registry() {
  static WorkloadRegistry registry("workloads",
                                   "arrival sources: trace readers, generators, and composed workloads (request "
                                   "content sent by an arrival process)");
  return registry;
}

std::vector<ParamSpec> with_common_params(std::vector<ParamSpec> own) {
  // Plausible ranges (issue 14): a run holds at most a billion requests (its exact percentiles keep
  // a few doubles per request) and its windows stay well inside the int64 nanosecond clock (292
  // years).
  own.push_back(ParamSpec::real("rate_scale", 1.0, "",
                                "replay this many times faster: arrival offsets are divided by it "
                                "(after the window is cut)")
                    .range(1e-6, 1e6));
  own.push_back(
      ParamSpec::integer("max_requests", 0, "requests", "stop after this many requests (unset: no limit)")
          .range(1, kMaxRequests)
          .optional());
  own.push_back(ParamSpec::real("window_start_s", 0.0, "s",
                                "keep arrivals at or after this offset (in the source's own time, "
                                "before rate_scale); it becomes time 0")
                    .range(0, kMaxWindowS));
  own.push_back(ParamSpec::real("window_end_s", 0.0, "s",
                                "keep arrivals before this offset (source time, before rate_scale; "
                                "unset: to the end)")
                    .above(0)
                    .range(0, kMaxWindowS)
                    .optional());
  own.push_back(ParamSpec::integer("seed", 0, "",
                                   "random seed of this workload (unset: the run's seed); trace "
                                   "readers draw nothing and ignore it")
                    .at_least(0)
                    .optional());
  own.push_back(client_timeout_spec());
  own.push_back(repetition_spec());
  own.push_back(classes_spec());
  own.push_back(rate_profile_spec());
  return own;
}

core::ParamSpec repetition_spec() {
  return ParamSpec::real("repetition", 0.0, "fraction",
                         "how repetitive the requests' outputs are: the chance that a decode step's next tokens "
                         "continue an n-gram already in the request's context, which a prompt-lookup drafter "
                         "([decoding] kind = \"ngram\") finds and proposes; set for every request (unset: unknown)")
      .range(0, 1)
      .optional();
}

double read_repetition(const core::Params& p) { return p.has("repetition") ? p.get_float("repetition") : -1.0; }

core::ParamSpec client_timeout_spec() {
  return ParamSpec::real("client_timeout_s", 0, "s",
                         "client time-out: a request whose client has not received its last token this long after "
                         "sending it fails (outcome timed_out; the engine aborts it); unset: clients wait forever")
      .above(0)
      .range(0, 9.2e9)
      .optional();
}

std::optional<core::Duration> read_client_timeout(const core::Params& p) {
  if (!p.has("client_timeout_s")) return std::nullopt;
  const core::Duration d = core::Duration::from_seconds(p.get_float("client_timeout_s"));
  if (d.ns() <= 0) p.fail("client_timeout_s", "must be at least 1 ns");
  return d;
}

uint64_t workload_seed(const core::Params& p, uint64_t run_seed) {
  return p.has("seed") ? static_cast<uint64_t>(p.get_int("seed")) : run_seed;
}

std::string readable_file(const core::Params& p, std::string_view key) { return p.readable_file(key, "a trace file"); }

namespace {
// Seconds to raw nanoseconds; the validator keeps the values finite and non-negative.
int64_t window_ns(const core::Params& p, std::string_view key, double seconds) {
  if (seconds >= 9.2e9) p.fail(key, "more than 292 years; time is int64 nanoseconds");
  return core::Duration::from_seconds(seconds).ns();
}
}  // namespace

ShapedSource::ShapedSource(const core::Params& p, uint64_t run_seed)
    : client_timeout_(read_client_timeout(p)),
      classes_(read_classes(p), workload_seed(p, run_seed)),
      profile_(read_rate_profile(p)) {
  rate_scale_ = p.get_float("rate_scale");
  repetition_ = read_repetition(p);
  max_requests_ = p.has("max_requests") ? p.get_int("max_requests") : std::numeric_limits<int64_t>::max();
  const double start_s = p.get_float("window_start_s");
  window_start_ns_ = window_ns(p, "window_start_s", start_s);
  window_end_ns_ = std::numeric_limits<int64_t>::max();
  if (p.has("window_end_s")) {
    const double end_s = p.get_float("window_end_s");
    if (end_s <= start_s)
      p.fail("window_end_s", "window_end_s (" + core::format_double(end_s) +
                                 ") must be greater than window_start_s (" + core::format_double(start_s) +
                                 ")");
    window_end_ns_ = window_ns(p, "window_end_s", end_s);
  }
}

bool ShapedSource::next(RequestSpec& out) {
  if (done_) return false;
  if (emitted_ >= max_requests_) {
    done_ = true;
    return false;
  }
  bool any_raw = false;
  bool past_end = false;
  int64_t last_raw = 0;  // for the empty-window message
  for (;;) {
    if (!classes_.empty()) out.request_class = -1;  // a trace row names its class, or none
    if (!next_raw(out)) break;
    any_raw = true;
    int64_t t = out.arrival.ns();
    last_raw = t;
    if (t < window_start_ns_) continue;
    if (t >= window_end_ns_) {
      past_end = true;
      break;
    }
    t -= window_start_ns_;
    if (rate_scale_ != 1.0) {
      const double scaled = static_cast<double>(t) / rate_scale_;
      if (!(scaled < 9.2e18))
        throw core::Error(describe() + ": arrival at " + core::format_double(static_cast<double>(t) * 1e-9) +
                          " s divided by rate_scale " + core::format_double(rate_scale_) +
                          " is beyond the int64 nanosecond clock (292 years)");
      t = std::llround(scaled);
    }
    if (profile_) last_shaped_ns_ = t = shape_arrival_ns(*profile_, t, last_shaped_ns_, describe());
    out.arrival = core::Time::from_ns(t);
    out.repetition = repetition_;
    if (classes_.empty()) {
      out.request_class = 0;
    } else if (out.request_class < 0) {
      if (!classes_.has_shares())
        throw core::Error(describe() + ": request " + std::to_string(emitted_) +
                          " names no class, and the classes (" + classes_.names() +
                          ") have no share to draw one from: give each [[workload.classes]] a share, or the "
                          "trace a class column");
      out.request_class = classes_.draw();
    }
    ++emitted_;
    return true;
  }
  done_ = true;
  if (emitted_ == 0) {
    std::string window = "[";
    window += core::format_double(static_cast<double>(window_start_ns_) * 1e-9);
    window += ", ";
    window += window_end_ns_ == std::numeric_limits<int64_t>::max()
                  ? std::string("end")
                  : core::format_double(static_cast<double>(window_end_ns_) * 1e-9);
    window += ") s";
    const std::string where = core::format_double(static_cast<double>(last_raw) * 1e-9) + " s";
    const std::string seen = !any_raw   ? ""
                             : past_end ? "; its first arrival after the window is at " + where
                                        : "; its last arrival is at " + where;
    throw core::Error(describe() + ": no requests in the window " + window + seen +
                      " (an empty workload would be a silent zero-request run)");
  }
  return false;
}

double ShapedSource::shaped_span_s(double span_s) const {
  if (!profile_) return span_s;
  const double t = profile_->inverse(span_s);
  return std::isfinite(t) ? t : 0;
}

}  // namespace servesim::traces
