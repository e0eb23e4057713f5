#pragma once
// Helpers shared by the tests of traces/: building workloads from inline TOML, writing fixture
// files, draining sources and checking that an InputError names its file, line and field.

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "sim/core/config.h"
#include "sim/core/error.h"
#include "sim/core/format.h"
#include "traces/arrival_source.h"
#include "traces/length_distribution.h"

namespace servesim::traces::testing {

inline core::Params parse_workload_config(const std::string& toml) {
  static const std::vector<core::ParamSpec> schema = {
      core::ParamSpec::section("workload", "workloads", "", "the workload")};
  return core::parse_config(toml, "test.toml", schema);
}

// Builds the workload described by the [workload] section of `toml`.
inline std::unique_ptr<ArrivalSource> make_workload(const std::string& toml, uint64_t run_seed = 42) {
  const core::Params root = parse_workload_config(toml);
  return workload_registry().make(root.section("workload"), run_seed);
}

// Builds the length distribution described by the [dist] section of `toml`.
inline std::unique_ptr<LengthDistribution> make_distribution(const std::string& toml) {
  static const std::vector<core::ParamSpec> schema = {
      core::ParamSpec::section("dist", "length_distributions", "", "the distribution")};
  const core::Params root = core::parse_config(toml, "test.toml", schema);
  return distribution_registry().make(root.section("dist"));
}

inline std::string q(const std::string& s) { return core::toml_quote(s); }

inline void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
}

// Every request of `source`, copied.
inline std::vector<RequestSpec> drain(ArrivalSource& source) {
  std::vector<RequestSpec> out;
  RequestSpec r;
  while (source.next(r)) out.push_back(r);
  return out;
}

struct Caught {
  bool thrown = false;
  std::string message;
  std::string file;
  int64_t line = 0;
  std::string field;
};

// Runs `fn` and captures the core::InputError it throws.
template <class F>
Caught catch_input_error(F&& fn) {
  try {
    fn();
  } catch (const core::InputError& e) {
    return {true, e.what(), e.file(), e.line(), e.field()};
  }
  return {};
}

// The error names the file, the line and the field (in its fields and in its message) and says
// `needle`.
inline void expect_input_error(const Caught& c, const std::string& file, int64_t line,
                               const std::string& field, const std::string& needle) {
  ASSERT_TRUE(c.thrown) << "expected an InputError mentioning '" << needle << "'";
  EXPECT_EQ(c.file, file) << c.message;
  EXPECT_EQ(c.line, line) << c.message;
  EXPECT_EQ(c.field, field) << c.message;
  EXPECT_NE(c.message.find(file + ":" + std::to_string(line) + ":"), std::string::npos) << c.message;
  if (!field.empty()) {
    EXPECT_NE(c.message.find("field '" + field + "'"), std::string::npos) << c.message;
  }
  EXPECT_NE(c.message.find(needle), std::string::npos) << c.message;
}

// Captures the message of the core::ConfigError that `fn` throws ("" when none).
template <class F>
std::string config_error(F&& fn) {
  try {
    fn();
  } catch (const core::ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace servesim::traces::testing
