#include "traces/request_classes.h"

#include <set>

#include "sim/core/format.h"

namespace servesim::traces {

using core::ParamSpec;

core::ParamSpec classes_spec() {
  return ParamSpec::table_list(
             "classes",
             {
                 ParamSpec::string("name", "", "the class's name (what a trace's `class` field says)").required(),
                 ParamSpec::real("share", 0, "",
                                 "its share of the requests a generator makes (relative weights, normalised over "
                                 "the classes); unset on every class: the workload must name each request's class "
                                 "(a trace's `class` column)")
                     .above(0)
                     .range(0, 1e9)
                     .optional(),
                 ParamSpec::integer("priority", 0, "",
                                    "lower is more important (vLLM's convention): priority scheduling serves it "
                                    "first and admission control sheds the others first")
                     .range(-1e9, 1e9),
                 ParamSpec::string("tenant", "", "who the requests are for (reported per class)"),
                 ParamSpec::real("ttft_slo_ms", 0, "ms", "this class's time-to-first-token limit (unset: the run's [slo])")
                     .range(1e-3, 1e10)
                     .optional(),
                 ParamSpec::real("tpot_slo_ms", 0, "ms",
                                 "this class's time-per-output-token limit (unset: the run's [slo])")
                     .range(1e-3, 1e10)
                     .optional(),
                 ParamSpec::real("admit_fraction", 1, "fraction",
                                 "admission control ([admission]): the class is shed once the load reaches this "
                                 "fraction of the limit; 1 = at the limit itself")
                     .above(0)
                     .range(0, 1),
                 ParamSpec::real("weight", 1, "",
                                 "its tenant's weight under fair sharing ([scheduler] policy = \"fair\"): a tenant "
                                 "of weight 2 gets twice the service of one of weight 1 while both wait; the "
                                 "classes of one tenant must agree; unset: 1")
                     .above(0)
                     .range(0, 1e6)
                     .optional(),
             },
             "request classes: name, share, priority, tenant and SLO of each ([[workload.classes]])")
      .optional();
}

core::RequestClasses read_classes(const core::Params& p) {
  core::RequestClasses out;
  if (!p.has("classes")) return out;
  const std::vector<core::Params>& list = p.list("classes");
  if (list.size() > 1000) p.fail("classes", "at most 1000 classes; got " + std::to_string(list.size()));
  std::set<std::string> seen;
  size_t with_share = 0;
  for (const core::Params& e : list) {
    core::RequestClass c;
    c.name = e.get_string("name");
    if (c.name.empty()) e.fail("name", "a class needs a non-empty name");
    for (char ch : c.name)
      if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f || ch == ',' || ch == '"')
        e.fail("name", "class name " + core::in_quotes(c.name) +
                           " holds a control character, a comma or a quote; trace files could not name it");
    if (!seen.insert(c.name).second) e.fail("name", "class " + core::in_quotes(c.name) + " is defined twice");
    if (e.has("share")) {
      c.share = e.get_float("share");
      ++with_share;
    }
    c.priority = e.get_int("priority");
    c.tenant = e.get_string("tenant");
    if (e.has("ttft_slo_ms")) c.ttft_slo_ms = e.get_float("ttft_slo_ms");
    if (e.has("tpot_slo_ms")) c.tpot_slo_ms = e.get_float("tpot_slo_ms");
    c.admit_fraction = e.get_float("admit_fraction");
    if (e.has("weight")) c.weight = e.get_float("weight");
    out.push_back(std::move(c));
  }
  // One weight per tenant: a class naming a tenant an earlier class named must give the same.
  for (size_t i = 0; i < out.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (!out[i].tenant.empty() && out[i].tenant == out[j].tenant && out[i].weight != out[j].weight) {
        list[i].fail("weight", "class " + core::in_quotes(out[i].name) + " gives tenant " +
                                   core::in_quotes(out[i].tenant) + " weight " + core::format_double(out[i].weight) +
                                   " but class " + core::in_quotes(out[j].name) + " gives it " +
                                   core::format_double(out[j].weight) + "; the classes of a tenant share one weight");
      }
  if (with_share != 0 && with_share != list.size()) {
    for (const core::Params& e : list)
      if (!e.has("share"))
        e.fail("share", "give every class a share or none (" + std::to_string(with_share) + " of " +
                            std::to_string(list.size()) + " classes have one)");
  }
  return out;
}

ClassAssigner::ClassAssigner(core::RequestClasses classes, uint64_t seed)
    : classes_(std::move(classes)), rng_(seed, "classes") {
  double total = 0;
  for (const auto& c : classes_) total += c.share;
  if (total > 0) {
    double acc = 0;
    for (const auto& c : classes_) {
      acc += c.share;
      cumulative_.push_back(acc / total);
    }
    cumulative_.back() = 1.0;
  }
}

int32_t ClassAssigner::find(std::string_view name) const {
  for (size_t i = 0; i < classes_.size(); ++i)
    if (classes_[i].name == name) return static_cast<int32_t>(i);
  return -1;
}

int32_t ClassAssigner::draw() {
  const double u = rng_.uniform();
  for (size_t i = 0; i < cumulative_.size(); ++i)
    if (u < cumulative_[i]) return static_cast<int32_t>(i);
  return static_cast<int32_t>(cumulative_.size() - 1);
}

std::string ClassAssigner::names() const {
  std::string out;
  for (size_t i = 0; i < classes_.size(); ++i) out += (i ? ", " : "") + classes_[i].name;
  return out;
}

int32_t resolve_class(const ClassAssigner& classes, std::string_view name, const FieldRef& at) {
  if (name.empty()) return -1;
  const int32_t i = classes.find(name);
  if (i < 0)
    field_error(at, "unknown request class " + excerpt(name) + "; the configuration's [[workload.classes]] define: " +
                        classes.names());
  return i;
}

}  // namespace servesim::traces
