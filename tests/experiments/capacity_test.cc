// The capacity search finds a knee we can compute, and the cheapest configuration at a load.
#include "experiments/capacity.h"

#include <gtest/gtest.h>

#include <SQLiteCpp/SQLiteCpp.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "experiments/cli/cli.h"
#include "experiments/run.h"
#include "sim/core/error.h"
#include "tests/experiments/results_dump.h"
#include "tests/test_paths.h"

namespace servesim::experiments {
namespace {

using servesim::testing::TempDir;

// One replica serving one request at a time (max_num_seqs = 1); every request has the same prompt
// and one output token, so each takes the same service time S (one prefill iteration) and the
// replica serves mu = 1/S requests per second. Arrivals are almost evenly spaced (gamma, cv 0.01).
// Below mu no request waits: TTFT = S. Above it, with gap g = 1/rate, request k waits k (S - g);
// with TTFT <= 3 S it meets the SLO while k (S - g) <= 2 S, so with N requests and a 90% target the
// highest rate that passes is mu / (1 - 2 / (0.9 N - 1)). (No engine: a client path would add a
// fixed delay to every TTFT that does not limit the service rate.)
constexpr int kRequests = 300;
const std::string kBase = R"(
[base]
seed = 5
[base.workload]
kind = "gamma"
rate = 1.0
cv = 0.01
max_requests = 300
[base.workload.prompt]
kind = "fixed"
value = 2000
[base.workload.output]
kind = "fixed"
value = 1
[base.model]
kind = "llama-3-8b"
[base.gpu]
kind = "h100-sxm"
[base.engine]
kind = "none"
[base.cluster]
replicas = 1
[base.scheduler]
kind = "continuous"
max_num_seqs = 1
[base.output]
sample_interval_ms = 0
)";

// S in ms: the TTFT of a request that never waits.
double service_ms() {
  Experiment e = Experiment::parse(kBase + "[set]\nworkload.max_requests = 3\nworkload.rate = 0.1\n", "s.toml", ".");
  e.check(1);
  const RunResult r = run_simulation(e.resolve({}), RunOutputs{});
  EXPECT_DOUBLE_EQ(r.summary.ttft_ms.p50, r.summary.ttft_ms.p99);  // every request alone
  return r.summary.ttft_ms.mean;
}

std::string with_slo(double ttft_ms, const std::string& rest) {
  return kBase + "[base.slo]\nttft_ms = " + std::to_string(ttft_ms) + "\n" + rest;
}

TEST(CapacityTest, FindsTheKneeOfASingleServer) {
  const double s_ms = service_ms();
  ASSERT_GT(s_ms, 1.0);
  const double mu = 1000.0 / s_ms;
  const double expected = mu / (1.0 - 2.0 / (0.9 * kRequests - 1));
  Experiment e = Experiment::parse(with_slo(3 * s_ms, "[capacity]\ntarget = 0.9\ntolerance = 0.005\nstart = 2.0\n"),
                                   "knee.toml", ".");
  TempDir dir;
  CapacityOptions o;
  o.jobs = 2;
  o.db_path = dir.file("knee.db");
  const CapacityResult r = run_capacity(e, o);
  ASSERT_EQ(r.configurations.size(), 1u);
  const ConfigurationCapacity& c = r.configurations.front();
  EXPECT_EQ(c.knob, "workload.rate");
  ASSERT_EQ(c.status, KneeStatus::kFound);
  ASSERT_TRUE(c.knee.has_value());
  // The bracket is within the tolerance and straddles the computed knee (within the jitter of cv 0.01).
  EXPECT_LE(c.lowest_failing - c.knee->value, 0.005 * c.knee->value);
  EXPECT_NEAR(c.knee->value / expected, 1.0, 0.01) << "knee " << c.knee->value << " req/s, expected " << expected
                                                   << " (service rate " << mu << ")";
  EXPECT_GE(c.knee->slo_attainment, 0.9);
  // Probes: doubling from 2 until one fails, then bisecting.
  EXPECT_DOUBLE_EQ(c.probes[0].value, 2.0);
  EXPECT_DOUBLE_EQ(c.probes[1].value, 4.0);
  for (const Probe& p : c.probes) EXPECT_EQ(p.pass, p.value <= c.knee->value) << p.value;
  // Goodput at the knee: nearly every request meets the SLO at nearly the offered rate.
  EXPECT_NEAR(c.knee->offered_req_s / c.knee->value, 1.0, 0.02);
  EXPECT_GT(c.knee->goodput_req_s, 0.8 * c.knee->value);
  EXPECT_GT(c.knee->usd_per_mtok_output, 0);

  // Stored like sweep points; a second search reuses every probe and gives the same answer.
  SQLite::Database db(dir.file("knee.db"), SQLite::OPEN_READONLY);
  EXPECT_EQ(db.execAndGet("SELECT COUNT(*) FROM points").getInt64(), r.runs);
  EXPECT_EQ(db.execAndGet("SELECT value FROM experiment WHERE key = 'kind'").getString(), "capacity");
  Experiment again = Experiment::parse(with_slo(3 * s_ms, "[capacity]\ntarget = 0.9\ntolerance = 0.005\nstart = 2.0\n"),
                                       "knee.toml", ".");
  const CapacityResult r2 = run_capacity(again, o);
  EXPECT_EQ(r2.runs, 0);
  EXPECT_EQ(r2.reused, r.runs);
  EXPECT_DOUBLE_EQ(r2.configurations.front().knee->value, c.knee->value);
  EXPECT_DOUBLE_EQ(r2.configurations.front().knee->goodput_req_s, c.knee->goodput_req_s);
  // And without a database, with one thread: the same.
  CapacityOptions plain;
  plain.jobs = 1;
  Experiment third = Experiment::parse(with_slo(3 * s_ms, "[capacity]\ntarget = 0.9\ntolerance = 0.005\nstart = 2.0\n"),
                                       "knee.toml", ".");
  EXPECT_DOUBLE_EQ(run_capacity(third, plain).configurations.front().knee->value, c.knee->value);
}

// A composed workload's knob is its arrival rate. Evenly spaced arrivals (kind constant, request k
// at k / rate) have no jitter: request k meets TTFT <= 3 S while k (S - 1/rate) <= 2 S, so 90% of
// 300 meet it exactly up to rate = mu / (1 - 2 / 269), which the bisection must bracket.
TEST(CapacityTest, AComposedWorkloadsKnobIsItsArrivalRate) {
  const double s_ms = service_ms();
  const double expected = 1000.0 / s_ms / (1.0 - 2.0 / 269.0);
  std::string base = with_slo(3 * s_ms, "[capacity]\ntarget = 0.9\ntolerance = 0.005\nstart = 2.0\n");
  const std::string gamma = "kind = \"gamma\"\nrate = 1.0\ncv = 0.01\nmax_requests = 300\n";
  ASSERT_NE(base.find(gamma), std::string::npos);
  base.replace(base.find(gamma), gamma.size(), "kind = \"synthetic\"\n");
  base += "[base.workload.arrival]\nkind = \"constant\"\nrate = 1.0\nrequests = 300\n";
  Experiment e = Experiment::parse(base, "constant.toml", ".");
  CapacityOptions o;
  o.jobs = 2;
  const CapacityResult r = run_capacity(e, o);
  const ConfigurationCapacity& c = r.configurations.front();
  EXPECT_EQ(c.knob, "workload.arrival.rate");
  ASSERT_EQ(c.status, KneeStatus::kFound);
  EXPECT_LE(c.knee->value, expected * (1 + 1e-9));
  EXPECT_GE(c.lowest_failing, expected * (1 - 1e-9));
}

TEST(CapacityTest, OneRowPerConfigurationAndSeedsPool) {
  const double s_ms = service_ms();
  const double mu = 1000.0 / s_ms;
  // Two replicas (round robin) serve twice as fast; seeds pool into one attainment per probe.
  Experiment e = Experiment::parse("seeds = [1, 2]\n" +
                                       with_slo(3 * s_ms, "[[axis]]\nkey = \"cluster.replicas\"\nvalues = [1, 2]\n"
                                                          "[capacity]\ntolerance = 0.01\nstart = 4.0\n"),
                                   "two.toml", ".");
  CapacityOptions o;
  o.jobs = 2;
  const CapacityResult r = run_capacity(e, o);
  ASSERT_EQ(r.configurations.size(), 2u);
  EXPECT_EQ(r.configurations[0].label, "cluster.replicas=1");
  EXPECT_EQ(r.configurations[1].label, "cluster.replicas=2");
  for (const auto& c : r.configurations) {
    ASSERT_TRUE(c.knee) << c.label;
    EXPECT_EQ(c.knee->run_ids.size(), 2u);
  }
  const double one = r.configurations[0].knee->value, two = r.configurations[1].knee->value;
  EXPECT_NEAR(one / mu, 1.0, 0.03);
  EXPECT_NEAR(two / (2 * mu), 1.0, 0.03);
}

TEST(CapacityTest, CheapestConfigurationMeetingTheSloAtALoad) {
  const double s_ms = service_ms();
  const double mu = 1000.0 / s_ms;
  // At 2.5 mu, one or two replicas drown; three (round robin, even gaps) keep up; four cost more.
  Experiment e = Experiment::parse(
      with_slo(3 * s_ms, "[[axis]]\nkey = \"cluster.replicas\"\nvalues = [4, 1, 3, 2]\n[capacity]\ncheapest_at = " +
                             std::to_string(2.5 * mu) + "\n"),
      "cheap.toml", ".");
  CapacityOptions o;
  o.jobs = 2;
  const CheapestResult r = run_cheapest(e, o);
  ASSERT_EQ(r.configurations.size(), 4u);
  ASSERT_TRUE(r.best.has_value());
  EXPECT_EQ(r.configurations[*r.best].label, "cluster.replicas=3");
  for (size_t i = 1; i < r.configurations.size(); ++i)
    EXPECT_LE(r.configurations[i - 1].probes.front().usd_per_mtok_output,
              r.configurations[i].probes.front().usd_per_mtok_output);
  for (const auto& c : r.configurations) {
    const bool enough = c.label == "cluster.replicas=3" || c.label == "cluster.replicas=4";
    EXPECT_EQ(c.probes.front().pass, enough) << c.label;
    EXPECT_NEAR(c.probes.front().gpus, std::stod(c.label.substr(c.label.find('=') + 1)), 1e-9);
  }
}

TEST(CapacityTest, MistakesAreReportedBeforeAnythingRuns) {
  auto error_of = [](const std::string& text) {
    try {
      Experiment e = Experiment::parse(text, "bad.toml", ".");
      run_capacity(e, CapacityOptions{});
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    ADD_FAILURE() << "expected an error";
    return std::string();
  };
  std::string err = error_of(kBase);
  EXPECT_NE(err.find("no [slo] limit"), std::string::npos) << err;
  const std::string axis = with_slo(100, "[[axis]]\nkey = \"workload.rate\"\nvalues = [1.0, 2.0]\n");
  err = error_of(axis);
  EXPECT_NE(err.find("varies 'workload.rate' itself"), std::string::npos) << err;
  EXPECT_NE(err.find("bad.toml:" + std::to_string(std::count(axis.begin(), axis.begin() + axis.find("\"workload.rate\""), '\n') + 1)),
            std::string::npos)
      << err;
  err = error_of(with_slo(100, "[capacity]\nknob = \"cluster.block_sizee\"\n"));
  EXPECT_NE(err.find("not a numeric key"), std::string::npos) << err;
  err = error_of(with_slo(100, "[capacity]\ntarget = 1.5\n"));
  EXPECT_NE(err.find("fraction in (0, 1]"), std::string::npos) << err;
  err = error_of(with_slo(100, "[capacity]\ntolerence = 0.1\n"));
  EXPECT_NE(err.find("did you mean 'tolerance'"), std::string::npos) << err;
}

TEST(CapacityTest, CommandLineTableAndJson) {
  const double s_ms = service_ms();
  TempDir dir;
  const std::string path = dir.file("knee.toml");
  std::ofstream(path) << with_slo(3 * s_ms, "[capacity]\ntolerance = 0.02\nstart = 8.0\n");
  std::ostringstream out, err;
  const char* argv[] = {"servesim", "capacity", path.c_str(), "--jobs", "2"};
  ASSERT_EQ(run_cli(5, argv, out, err), 0) << err.str();
  EXPECT_NE(out.str().find("capacity: highest workload.rate with SLO attainment >= 90.0%"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("(base)"), std::string::npos) << out.str();
  EXPECT_NE(err.str().find("capacity round 1: 1/1 done"), std::string::npos) << err.str();
  std::ostringstream jout, jerr;
  const char* json[] = {"servesim", "capacity", path.c_str(), "--json", "--quiet", "--target", "0.5"};
  ASSERT_EQ(run_cli(7, json, jout, jerr), 0) << jerr.str();
  EXPECT_NE(jout.str().find("\"mode\":\"capacity\""), std::string::npos) << jout.str();
  EXPECT_NE(jout.str().find("\"target\":0.5"), std::string::npos) << jout.str();
  EXPECT_NE(jout.str().find("\"status\":\"found\""), std::string::npos) << jout.str();
  EXPECT_TRUE(jerr.str().empty()) << jerr.str();
}

}  // namespace
}  // namespace servesim::experiments
