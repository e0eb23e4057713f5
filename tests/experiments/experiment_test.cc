// Experiment files: axis expansion, seeds, overrides, and errors that name file:line:column.
#include "experiments/experiment.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <fstream>

#include "experiments/run.h"
#include "sim/core/error.h"
#include "tests/test_paths.h"

namespace servesim::experiments {
namespace {

using servesim::testing::TempDir;

const std::string kBase = R"(
[base]
seed = 3
[base.workload]
kind = "poisson"
rate = 20.0
max_requests = 200
[base.workload.prompt]
kind = "uniform"
min = 50
max = 500
[base.workload.output]
kind = "uniform"
min = 1
max = 100
[base.model]
kind = "llama-3-8b"
[base.gpu]
kind = "h100-sxm"
[base.cluster]
replicas = 2
[base.slo]
ttft_ms = 2000
tpot_ms = 100
)";

// 1-based line and column of the first occurrence of `needle` in `text`.
std::string where(const std::string& text, const std::string& needle, const std::string& file = "exp.toml") {
  const size_t at = text.find(needle);
  EXPECT_NE(at, std::string::npos) << needle;
  const size_t line = 1 + static_cast<size_t>(std::count(text.begin(), text.begin() + static_cast<long>(at), '\n'));
  const size_t line_start = text.rfind('\n', at);
  const size_t column = at - (line_start == std::string::npos ? 0 : line_start + 1) + 1;
  return file + ":" + std::to_string(line) + ":" + std::to_string(column);
}

std::string error_of(const std::string& text, bool check = true) {
  try {
    Experiment e = Experiment::parse(text, "exp.toml", ".");
    if (check) e.check(2);
  } catch (const core::ConfigError& e) {
    return e.what();
  } catch (const core::Error& e) {
    return std::string("(not a ConfigError) ") + e.what();
  }
  ADD_FAILURE() << "expected a configuration error";
  return "";
}

TEST(ExperimentTest, AxesExpandAsAProductInFileOrderWithSeedsFastest) {
  const std::string text = "seeds = [1, 2]\n" + kBase + R"(
[[axis]]
key = "router.kind"
values = ["round_robin", "least_outstanding"]
[[axis]]
key = "workload.rate"
from = 10
to = 30
step = 10
[[axis]]
keys = ["cluster.replicas", "scheduler.max_num_seqs"]
values = [[1, 64], [2, 128]]
)";
  Experiment e = Experiment::parse(text, "exp.toml", ".");
  ASSERT_EQ(e.points().size(), 2u * 3u * 2u * 2u);
  EXPECT_EQ(e.configurations().size(), 12u);
  EXPECT_EQ(e.points()[0].label(),
            "router.kind=round_robin workload.rate=10 cluster.replicas=1 scheduler.max_num_seqs=64 seed=1");
  EXPECT_EQ(e.points()[1].label(),
            "router.kind=round_robin workload.rate=10 cluster.replicas=1 scheduler.max_num_seqs=64 seed=2");
  EXPECT_EQ(e.points()[2].label(),
            "router.kind=round_robin workload.rate=10 cluster.replicas=2 scheduler.max_num_seqs=128 seed=1");
  EXPECT_EQ(e.points()[4].label(),
            "router.kind=round_robin workload.rate=20 cluster.replicas=1 scheduler.max_num_seqs=64 seed=1");
  EXPECT_EQ(e.points()[23].label(),
            "router.kind=least_outstanding workload.rate=30 cluster.replicas=2 scheduler.max_num_seqs=128 seed=2");
  e.check(2);
  std::set<std::string> keys;
  for (const Point& p : e.points()) keys.insert(p.key);
  EXPECT_EQ(keys.size(), e.points().size());
  // A point's configuration is the base with its values applied, like --set.
  const Point& p = e.points()[23];
  const core::Params c = e.resolve(p.settings);
  EXPECT_EQ(c.section("router").kind(), "least_outstanding");
  EXPECT_DOUBLE_EQ(c.section("workload").get_float("rate"), 30.0);
  EXPECT_EQ(c.section("cluster").get_int("replicas"), 2);
  EXPECT_EQ(c.section("scheduler").get_int("max_num_seqs"), 128);
  EXPECT_EQ(c.get_int("seed"), 2);
  EXPECT_EQ(p.seed, 2u);
  EXPECT_EQ(p.key, config_hash(c));
  // The base's own values stay.
  EXPECT_EQ(c.section("workload").get_int("max_requests"), 200);
  EXPECT_EQ(e.identity().size(), 16u);
}

TEST(ExperimentTest, RangeForms) {
  auto values = [](const std::string& axis) {
    Experiment e = Experiment::parse(kBase + "[[axis]]\nkey = \"workload.rate\"\n" + axis, "exp.toml", ".");
    std::vector<std::string> out;
    for (const auto& step : e.axes().front().steps) out.push_back(step.front().value);
    return out;
  };
  EXPECT_EQ(values("from = 0.1\nto = 0.5\nstep = 0.1\n"),
            (std::vector<std::string>{"0.1", "0.2", "0.3", "0.4", "0.5"}));
  EXPECT_EQ(values("from = 1\nto = 2\ncount = 5\n"), (std::vector<std::string>{"1.0", "1.25", "1.5", "1.75", "2.0"}));
  EXPECT_EQ(values("from = 2\nto = 10\ncount = 5\n"), (std::vector<std::string>{"2", "4", "6", "8", "10"}));
  EXPECT_EQ(values("from = 1\nto = 100\ncount = 3\nscale = \"log\"\n"),
            (std::vector<std::string>{"1.0", "10.0", "100.0"}));
  EXPECT_EQ(values("from = 5\nto = 5\nstep = 1\n"), (std::vector<std::string>{"5"}));
  EXPECT_EQ(values("from = 1.5\nto = 3\nstep = 1\n"), (std::vector<std::string>{"1.5", "2.5"}));
}

TEST(ExperimentTest, RepetitionsCountFromTheBaseSeed) {
  Experiment e = Experiment::parse("repetitions = 3\n" + kBase, "exp.toml", ".");
  ASSERT_EQ(e.points().size(), 3u);
  EXPECT_EQ(e.seeds(), (std::vector<uint64_t>{3, 4, 5}));
  e.check(1);
  EXPECT_EQ(e.points()[2].seed, 5u);
  EXPECT_EQ(e.points()[2].label(), "seed=5");
}

TEST(ExperimentTest, NoAxesIsOnePointOfTheBase) {
  Experiment e = Experiment::parse(kBase, "exp.toml", ".");
  ASSERT_EQ(e.points().size(), 1u);
  e.check(1);
  EXPECT_EQ(e.points()[0].label(), "(base)");
  EXPECT_EQ(e.points()[0].seed, 3u);
}

TEST(ExperimentTest, BaseFileWithSetOverridesAndPathsRelativeToTheExperiment) {
  TempDir dir;
  std::filesystem::create_directories(dir.file("configs"));
  std::filesystem::create_directories(dir.file("exp"));
  {
    std::ofstream(dir.file("exp/trace.csv")) << "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                                                "2023-11-16 18:15:46.6805900,374,44\n"
                                                "2023-11-16 18:15:50.9951690,396,109\n";
    std::ofstream(dir.file("configs/base.toml")) << R"(
[workload]
kind = "poisson"
rate = 5.0
max_requests = 50
[workload.prompt]
kind = "fixed"
value = 100
[workload.output]
kind = "fixed"
value = 10
[model]
kind = "llama-3-8b"
[gpu]
kind = "h100-sxm"
)";
  }
  const std::string text = R"(
base = "../configs/base.toml"
[set]
workload.kind = "azure_csv"
workload.path = "trace.csv"
cluster.replicas = 3
)";
  std::ofstream(dir.file("exp/e.toml")) << text;
  // The [set] table replaces the generator by a trace; its relative path is the experiment's.
  std::string err;
  try {
    Experiment::load(dir.file("exp/e.toml")).check(1);
  } catch (const core::ConfigError& e) {
    err = e.what();
  }
  // A generator's prompt/output sections are not azure_csv keys: the error points into the base file.
  EXPECT_NE(err.find("base.toml:"), std::string::npos) << err;
  EXPECT_NE(err.find("unknown key; valid keys for kind 'azure_csv'"), std::string::npos) << err;

  std::ofstream(dir.file("configs/base.toml"), std::ios::trunc) << "[model]\nkind = \"llama-3-8b\"\n[gpu]\nkind = \"h100-sxm\"\n";
  Experiment e = Experiment::load(dir.file("exp/e.toml"));
  e.check(1);
  const core::Params c = e.resolve(e.points()[0].settings);
  EXPECT_EQ(c.section("workload").kind(), "azure_csv");
  EXPECT_EQ(c.section("workload").get_string("path"),
            (std::filesystem::absolute(dir.file("exp")) / "trace.csv").lexically_normal().string());
  EXPECT_EQ(c.section("cluster").get_int("replicas"), 3);
  EXPECT_EQ(e.name(), "e");
}

TEST(ExperimentTest, UnknownAxisKeyNamesTheAxisLine) {
  const std::string text = kBase + "[[axis]]\nkey = \"router.kindd\"\nvalues = [\"random\"]\n";
  const std::string err = error_of(text);
  EXPECT_NE(err.find(where(text, "\"router.kindd\"")), std::string::npos) << err;
  EXPECT_NE(err.find("router.kindd"), std::string::npos) << err;
  EXPECT_NE(err.find("did you mean 'kind'"), std::string::npos) << err;
  EXPECT_NE(err.find("point 0"), std::string::npos) << err;
}

TEST(ExperimentTest, BadAxisValuesNameTheValue) {
  const std::string kinds = kBase + "[[axis]]\nkey = \"router.kind\"\nvalues = [\"random\", \"bogus\"]\n";
  std::string err = error_of(kinds);
  EXPECT_NE(err.find(where(kinds, "\"bogus\"")), std::string::npos) << err;
  EXPECT_NE(err.find("unknown routers kind 'bogus'"), std::string::npos) << err;
  EXPECT_NE(err.find("point 1 (router.kind=bogus)"), std::string::npos) << err;

  const std::string range = kBase + "[[axis]]\nkey = \"cluster.replicas\"\nvalues = [1, 0]\n";
  err = error_of(range);
  EXPECT_NE(err.find(where(range, "0]")), std::string::npos) << err;
  EXPECT_NE(err.find("out of range"), std::string::npos) << err;

  const std::string type = kBase + "[[axis]]\nkey = \"cluster.replicas\"\nvalues = [\"two\"]\n";
  err = error_of(type);
  EXPECT_NE(err.find(where(type, "\"two\"")), std::string::npos) << err;
}

TEST(ExperimentTest, BuildErrorsAreCheckedForEveryPointBeforeAnythingRuns) {
  // Llama-3-8B has 32 heads: TP 3 does not divide them. Only the build finds this.
  const std::string text = kBase + "[[axis]]\nkey = \"cluster.tensor_parallel\"\nvalues = [1, 2, 3]\n";
  const std::string err = error_of(text);
  EXPECT_NE(err.find(where(text, "3]")), std::string::npos) << err;
  EXPECT_NE(err.find("point 2"), std::string::npos) << err;

  Experiment e = Experiment::parse("infeasible = \"skip\"\n" + text, "exp.toml", ".");
  e.check(2);
  EXPECT_FALSE(e.points()[0].skipped);
  EXPECT_FALSE(e.points()[1].skipped);
  EXPECT_TRUE(e.points()[2].skipped);
  EXPECT_NE(e.points()[2].skip_reason.find("tensor_parallel"), std::string::npos) << e.points()[2].skip_reason;
}

TEST(ExperimentTest, MalformedExperimentFilesNameTheSpot) {
  std::string text = kBase + "[[axes]]\nkey = \"router.kind\"\n";
  std::string err = error_of(text, false);
  EXPECT_NE(err.find("did you mean 'axis'"), std::string::npos) << err;
  EXPECT_NE(err.find(where(text, "[[axes]]").substr(0, 11)), std::string::npos) << err;

  text = kBase + "[[axis]]\nkeys = [\"cluster.replicas\", \"scheduler.max_num_seqs\"]\nvalues = [[1, 64], [2]]\n";
  err = error_of(text, false);
  EXPECT_NE(err.find(where(text, "[2]")), std::string::npos) << err;
  EXPECT_NE(err.find("one array of 2 values"), std::string::npos) << err;

  text = kBase + "[[axis]]\nkey = \"workload.rate\"\nfrom = 10\nto = 5\nstep = 1\n";
  err = error_of(text, false);
  EXPECT_NE(err.find(where(text, "5\nstep")), std::string::npos) << err;

  text = "seeds = [1]\nrepetitions = 2\n" + kBase;
  err = error_of(text, false);
  EXPECT_NE(err.find("either seeds"), std::string::npos) << err;

  text = kBase + "[[axis]]\nkey = \"router.kind\"\nvalues = [\"random\"]\n[[axis]]\nkey = \"router.kind\"\nvalues = [\"round_robin\"]\n";
  err = error_of(text, false);
  EXPECT_NE(err.find("already an axis"), std::string::npos) << err;

  text = kBase + "[[axis]]\nkey = \"workload.rate\"\nvalues = []\n";
  err = error_of(text, false);
  EXPECT_NE(err.find("non-empty"), std::string::npos) << err;

  text = kBase;
  text.replace(text.find("replicas = 2"), 8, "replicass");
  err = error_of(text);
  EXPECT_NE(err.find(where(text, "replicass")), std::string::npos) << err;
  EXPECT_NE(err.find("did you mean 'replicas'"), std::string::npos) << err;

  err = error_of("name = \"x\"\n", false);
  EXPECT_NE(err.find("base"), std::string::npos) << err;

  err = error_of("base = \"no-such-config.toml\"\n", false);
  EXPECT_NE(err.find("no-such-config.toml"), std::string::npos) << err;
  EXPECT_NE(err.find("exp.toml:1:8"), std::string::npos) << err;

  err = error_of("base = [\n", false);
  EXPECT_NE(err.find("TOML syntax error"), std::string::npos) << err;
}

TEST(ExperimentTest, PointsThatResolveToTheSameConfigurationAreAnError) {
  const std::string text = kBase + "[[axis]]\nkey = \"cluster.replicas\"\nvalues = [2, 1, 2]\n";
  const std::string err = error_of(text);
  EXPECT_NE(err.find("points 0 (cluster.replicas=2) and 2 (cluster.replicas=2)"), std::string::npos) << err;
}

TEST(ExperimentTest, TheExampleExperimentsAreValid) {
  // Every point of every shipped experiment resolves and builds (the traces come from ../shared).
  const std::filesystem::path dir = std::filesystem::path(servesim::testing::source_dir()) / "experiments" / "sweeps";
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".toml") continue;
    ++files;
    SCOPED_TRACE(entry.path().string());
    Experiment e = Experiment::load(entry.path().string());
    EXPECT_NO_THROW(e.check(2));
    EXPECT_FALSE(e.points().empty());
  }
  EXPECT_GE(files, 5);
}

TEST(ExperimentTest, AnAxisOnTheSeedConflictsWithSeeds) {
  const std::string text = "seeds = [1, 2]\n" + kBase + "[[axis]]\nkey = \"seed\"\nvalues = [5]\n";
  const std::string err = error_of(text, false);
  EXPECT_NE(err.find("both set the seed"), std::string::npos) << err;
}

}  // namespace
}  // namespace servesim::experiments
