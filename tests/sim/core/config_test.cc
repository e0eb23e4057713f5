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
