#pragma once
// [[workload.classes]]: the request classes a workload's requests belong to (sim/core/request_class.h).
// Generators draw each request's class from the classes' shares on their own random stream
// ("classes"), so that adding classes moves none of the other draws; trace readers take it from the
// trace's `class` column (CSV) or key (JSONL), which must name a class the configuration defines.

#include <cstdint>
#include <string>
#include <string_view>

#include "sim/core/params.h"
#include "sim/core/request_class.h"
#include "sim/core/rng.h"
#include "traces/field_parse.h"

namespace servesim::traces {

// The declaration of `classes`, which every workload kind takes (optional).
core::ParamSpec classes_spec();
// The classes of `p` (empty when none), checked: unique non-empty names, shares all given or none.
core::RequestClasses read_classes(const core::Params& p);

// Assigns classes to requests: the index of a named class, or a draw from the shares.
class ClassAssigner {
 public:
  ClassAssigner() = default;
  ClassAssigner(core::RequestClasses classes, uint64_t seed);
  bool empty() const { return classes_.empty(); }
  const core::RequestClasses& classes() const { return classes_; }
  bool has_shares() const { return !cumulative_.empty(); }
  // The index of the class named `name`; -1 when no class has that name.
  int32_t find(std::string_view name) const;
  // A class drawn from the shares (has_shares() must be true).
  int32_t draw();
  // "premium, batch" for messages.
  std::string names() const;

 private:
  core::RequestClasses classes_;
  std::vector<double> cumulative_;  // normalised cumulative shares; empty without shares
  core::Rng rng_{0, "classes"};
};

// A trace's class field: the index of the class it names; -1 when it is empty (the source then draws
// one from the shares); an InputError at `at` when it names a class the configuration lacks.
int32_t resolve_class(const ClassAssigner& classes, std::string_view name, const FieldRef& at);

}  // namespace servesim::traces
