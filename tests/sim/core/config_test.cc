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

TEST(ConfigTest, ListsOfNumbers) {
  const std::vector<ParamSpec> specs = {
      ParamSpec::real_list("acceptance", {0.5}, "probability", "per position").range(0, 1),
      ParamSpec::real_list("weights", {}, "", "optional list").optional()};
  Params d = parse_config("", "t.toml", specs);
  EXPECT_EQ(d.get_float_list("acceptance"), (std::vector<double>{0.5}));
  EXPECT_FALSE(d.has("weights"));
  Params p = parse_config("acceptance = [0.9, 1, 0.25]\nweights = []\n", "t.toml", specs);
  EXPECT_EQ(p.get_float_list("acceptance"), (std::vector<double>{0.9, 1.0, 0.25}));
  EXPECT_TRUE(p.get_float_list("weights").empty());
  // Printed back as TOML; a --set override is a TOML array too.
  EXPECT_NE(p.to_toml().find("acceptance = [0.9, 1, 0.25]\n"), std::string::npos) << p.to_toml();
  EXPECT_EQ(parse_config("", "t.toml", specs, {"acceptance=[0.1,0.2]"}).get_float_list("acceptance"),
            (std::vector<double>{0.1, 0.2}));
  auto error = [&](const std::string& text) -> std::string {
    try {
      parse_config(text, "t.toml", specs);
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(error("acceptance = 0.5\n").find("expected a list of floats"), std::string::npos);
  const std::string range = error("\nacceptance = [0.5,\n 1.5]\n");
  EXPECT_NE(range.find("t.toml:3:2"), std::string::npos) << range;  // the element itself
  EXPECT_NE(range.find("'acceptance[1]'"), std::string::npos) << range;
  EXPECT_NE(range.find("each in [0, 1]"), std::string::npos) << range;
  EXPECT_NE(error("acceptance = [0.5, true]\n").find("expected a number, got a bool"), std::string::npos);
}

}  // namespace
}  // namespace servesim::core
