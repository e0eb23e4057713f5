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

std::vector<ParamSpec> list_schema() {
  return {ParamSpec::table(
      "load",
      {ParamSpec::real("interval_s", 1, "s", "pause"),
       ParamSpec::table_list("stages",
                             {ParamSpec::real("rate", 1, "req/s", "rate").above(0).required(),
                              ParamSpec::string("type", "fixed", "type").one_of({"fixed", "poisson"})},
                             "stages in order")},
      "load")};
}

std::string message_of(const std::string& text, const std::vector<std::string>& overrides = {}) {
  try {
    parse_config(text, "t.toml", list_schema(), overrides);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(ConfigTest, TableListsKeepOrderDefaultsAndPrintAsArraysOfTables) {
  const std::string text =
      "[load]\ninterval_s = 2.0\n[[load.stages]]\nrate = 8.0\n[[load.stages]]\nrate = 20\ntype = \"poisson\"\n";
  const Params p = parse_config(text, "t.toml", list_schema());
  const auto& stages = p.section("load").list("stages");
  ASSERT_EQ(stages.size(), 2u);
  EXPECT_DOUBLE_EQ(stages[0].get_float("rate"), 8.0);
  EXPECT_EQ(stages[0].get_string("type"), "fixed");
  EXPECT_DOUBLE_EQ(stages[1].get_float("rate"), 20.0);
  EXPECT_EQ(stages[1].get_string("type"), "poisson");
  EXPECT_EQ(stages[1].path(), "load.stages[1]");
  const std::string resolved = p.to_toml();
  EXPECT_EQ(resolved,
            "[load]\ninterval_s = 2\n\n[[load.stages]]\nrate = 8\ntype = \"fixed\"\n\n[[load.stages]]\nrate = 20\n"
            "type = \"poisson\"\n");
  // The resolved text reads back as itself, and an inline array of inline tables means the same.
  EXPECT_EQ(parse_config(resolved, "r.toml", list_schema()).to_toml(), resolved);
  EXPECT_EQ(parse_config("[load]\ninterval_s = 2.0\nstages = [{rate = 8.0}, {rate = 20, type = \"poisson\"}]\n",
                         "t.toml", list_schema())
                .to_toml(),
            resolved);
  // --set replaces the whole list.
  const Params o = parse_config(text, "t.toml", list_schema(), {"load.stages=[{rate = 3.5}]"});
  ASSERT_EQ(o.section("load").list("stages").size(), 1u);
  EXPECT_DOUBLE_EQ(o.section("load").list("stages")[0].get_float("rate"), 3.5);
}

TEST(ConfigTest, TableListErrorsNameTheElement) {
  std::string m = message_of("[load]\n[[load.stages]]\nrate = 8.0\n[[load.stages]]\nrat = 1.0\n");
  EXPECT_NE(m.find("t.toml:5:1"), std::string::npos) << m;
  EXPECT_NE(m.find("'load.stages[1].rat'"), std::string::npos) << m;
  EXPECT_NE(m.find("did you mean 'rate'"), std::string::npos) << m;
  m = message_of("[load]\n[[load.stages]]\nrate = 8.0\n[[load.stages]]\ntype = \"fixed\"\n");
  EXPECT_NE(m.find("'load.stages[1].rate'"), std::string::npos) << m;
  EXPECT_NE(m.find("missing required key"), std::string::npos) << m;
  m = message_of("[load]\nstages = 5\n");
  EXPECT_NE(m.find("t.toml:2:10"), std::string::npos) << m;
  EXPECT_NE(m.find("expected a list of tables ([[load.stages]] sections), got an integer"), std::string::npos) << m;
  EXPECT_NE(m.find("each element has the keys rate, type"), std::string::npos) << m;
  m = message_of("[load]\nstages = []\n");
  EXPECT_NE(m.find("the list is empty"), std::string::npos) << m;
  m = message_of("[load]\nstages = [{rate = 1.0}, 2]\n");
  EXPECT_NE(m.find("'load.stages[1]'"), std::string::npos) << m;
  EXPECT_NE(m.find("expected a table, got an integer"), std::string::npos) << m;
  m = message_of("[load]\n");
  EXPECT_NE(m.find("'load.stages'"), std::string::npos) << m;
  EXPECT_NE(m.find("missing required list of tables [[load.stages]]"), std::string::npos) << m;
  m = message_of("[load]\n[[load.stages]]\nrate = 1.0\n", {"load.stages.rate=2"});
  EXPECT_NE(m.find("'stages' is a value, not a section"), std::string::npos) << m;
}

}  // namespace
}  // namespace servesim::core
