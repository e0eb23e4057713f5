#include "traces/renewal_generator.h"

#include "sim/core/format.h"

namespace servesim::traces {

std::vector<core::ParamSpec> generator_params(std::vector<core::ParamSpec> own) {
  own.push_back(prompt_section_spec());
  own.push_back(output_section_spec());
  return with_common_params(std::move(own));
}

namespace {
// Arrivals must end well inside the int64 nanosecond clock (292 years): a generator's times are
// random, so the expected end must leave room for chance.
constexpr double kClockBudgetS = 3e9;
}  // namespace

double generator_span_s(const core::Params& p) {
  double span = p.has("max_requests") ? static_cast<double>(p.get_int("max_requests")) / p.get_float("rate") : 0;
  if (p.has("window_end_s")) {
    const double window = p.get_float("window_end_s") - p.get_float("window_start_s");
    if (!p.has("max_requests") || window < span) span = window;
  }
  return span;
}

void require_generator_limit(const core::Params& p) {
  if (!p.has("max_requests") && !p.has("window_end_s"))
    p.fail("max_requests", "a generator needs max_requests or window_end_s, otherwise it never ends");
  const double rate = p.get_float("rate");
  const double start = p.get_float("window_start_s");
  const double scale = p.get_float("rate_scale");
  const std::string rate_text = p.key_path("rate") + " = " + core::format_double(rate);
  // How long the arrivals span, in the generator's own time, and why.
  double span = 0;
  std::string because;
  if (p.has("max_requests")) {
    const double n = static_cast<double>(p.get_int("max_requests"));
    span = n / rate;
    because = p.key_path("max_requests") + " = " + core::format_double(n) + " arrivals at " + rate_text + "/s";
  }
  if (p.has("window_end_s")) {
    const double window = p.get_float("window_end_s") - start;
    if (!p.has("max_requests") || window < span) {
      span = window;
      because = "the window [" + core::format_double(start) + ", " + core::format_double(p.get_float("window_end_s")) +
                ") s";
    }
    if (!p.has("max_requests") && window * rate > kMaxRequests)
      p.fail("window_end_s", "the window [" + core::format_double(start) + ", " +
                                 core::format_double(p.get_float("window_end_s")) + ") s at " + rate_text +
                                 "/s holds about " + core::format_double(window * rate) + " arrivals, more than the " +
                                 core::format_double(kMaxRequests) +
                                 " a run simulates; set max_requests, narrow the window or lower the rate");
  }
  const std::string clock = " s of simulated time, beyond the clock (int64 nanoseconds: 292 years)";
  if (!(start + span <= kClockBudgetS))
    p.fail("rate", because + " span about " + core::format_double(span) + " s" +
                       (start > 0 ? " after window_start_s = " + core::format_double(start) : std::string()) +
                       ", ending near " + core::format_double(start + span) + clock +
                       "; raise the rate or lower max_requests (or window_start_s)");
  if (!(span / scale <= kClockBudgetS))
    p.fail("rate_scale", because + " span about " + core::format_double(span) + " s, " + core::format_double(span / scale) +
                             " s once divided by " + p.key_path("rate_scale") + " = " + core::format_double(scale) +
                             clock + "; raise rate_scale or lower max_requests");
}

}  // namespace servesim::traces
