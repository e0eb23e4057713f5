#include "sim/core/config.h"

#include <gtest/gtest.h>

namespace servesim::core {
namespace {

std::vector<ParamSpec> schema() {
  return {
      ParamSpec::integer("seed", 42, "", "run seed").at_least(0),
      ParamSpec::table("slo",
                       {ParamSpec::real("ttft_ms", 2000, "ms", "TTFT limit").above(0),
                        ParamSpec::string("mode", "all", "how limits combine").one_of({"all", "any"})},
                       "latency SLO"),
  };
}

TEST(ConfigTest, DefaultsAndValues) {
  Params p = parse_config("seed = 7\n[slo]\nttft_ms = 500\n", "t.toml", schema());
  EXPECT_EQ(p.get_int("seed"), 7);
  EXPECT_DOUBLE_EQ(p.section("slo").get_float("ttft_ms"), 500.0);
  EXPECT_EQ(p.section("slo").get_string("mode"), "all");
}

TEST(ConfigTest, UnknownKeyNamesLocationAndSuggestion) {
  try {
    parse_config("seed = 7\n[slo]\nttft_m = 500\n", "t.toml", schema());
    FAIL();
  } catch (const ConfigError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("t.toml:3:1"), std::string::npos) << m;
    EXPECT_NE(m.find("slo.ttft_m"), std::string::npos) << m;
    EXPECT_NE(m.find("did you mean 'ttft_ms'"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace servesim::core
