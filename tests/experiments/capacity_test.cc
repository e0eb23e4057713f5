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
// highest rate at which the run's attainment passes is mu / (1 - 2 / (0.9 N - 1)). That is what a
// search that counts every request and ignores the growing queue finds (require_stationary = false,
// the arrival window); the steady-state search finds mu itself, whatever N. (No engine: a client
// path would add a fixed delay to every TTFT that does not limit the service rate.)
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

// The whole run's attainment: the arrival window, no warm-up left out.
const std::string kFiniteRun = "[base.measurement]\nauto_warmup = false\n";

std::string with_slo(double ttft_ms, const std::string& rest) {
  return kBase + "[base.slo]\nttft_ms = " + std::to_string(ttft_ms) + "\n" + rest;
}

TEST(CapacityTest, FindsTheKneeOfASingleServer) {
  const double s_ms = service_ms();
  ASSERT_GT(s_ms, 1.0);
  const double mu = 1000.0 / s_ms;
  const double expected = mu / (1.0 - 2.0 / (0.9 * kRequests - 1));
  Experiment e = Experiment::parse(with_slo(3 * s_ms, kFiniteRun + "[capacity]\ntarget = 0.9\ntolerance = 0.005\nstart = 2.0\n" +
                                                           "require_stationary = false\n"),
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
  Experiment again = Experiment::parse(
      with_slo(3 * s_ms, kFiniteRun + "[capacity]\ntarget = 0.9\ntolerance = 0.005\nstart = 2.0\nrequire_stationary = false\n"),
      "knee.toml", ".");
  const CapacityResult r2 = run_capacity(again, o);
  EXPECT_EQ(r2.runs, 0);
  EXPECT_EQ(r2.reused, r.runs);
  EXPECT_DOUBLE_EQ(r2.configurations.front().knee->value, c.knee->value);
  EXPECT_DOUBLE_EQ(r2.configurations.front().knee->goodput_req_s, c.knee->goodput_req_s);
  // And without a database, with one thread: the same.
  CapacityOptions plain;
  plain.jobs = 1;
  Experiment third = Experiment::parse(
      with_slo(3 * s_ms, kFiniteRun + "[capacity]\ntarget = 0.9\ntolerance = 0.005\nstart = 2.0\nrequire_stationary = false\n"),
      "knee.toml", ".");
  EXPECT_DOUBLE_EQ(run_capacity(third, plain).configurations.front().knee->value, c.knee->value);
}

// 30 requests: a run at 1.08 mu still meets the target (the finite-run knee mu / (1 - 2 / 26)), but
// its queue grows by 8% of the arrivals: the steady-state search refuses it and finds mu (within the
// 2% growth it tolerates and its tolerance), where the finite-run search finds 1.083 mu. A probe
// that meets the target without having settled runs again with twice the requests.
TEST(CapacityTest, TheSustainableRateIsTheServiceRateWhateverTheRunLength) {
  const double s_ms = service_ms();
  const double mu = 1000.0 / s_ms;
  const std::string set = "[set]\nworkload.max_requests = 30\n";
  auto knee = [&](const std::string& capacity) {
    Experiment e = Experiment::parse(with_slo(3 * s_ms, set + capacity), "short.toml", ".");
    CapacityOptions o;
    o.jobs = 2;
    const CapacityResult r = run_capacity(e, o);
    EXPECT_EQ(r.configurations.front().status, KneeStatus::kFound);
    return r.configurations.front();
  };
  const ConfigurationCapacity finite =
      knee(kFiniteRun + "[capacity]\ntolerance = 0.005\nstart = 2.0\nrequire_stationary = false\n");
  EXPECT_NEAR(finite.knee->value / (mu / (1.0 - 2.0 / (0.9 * 30 - 1))), 1.0, 0.01);
  const ConfigurationCapacity steady = knee("[capacity]\ntolerance = 0.005\nstart = 2.0\n");
  EXPECT_LE(steady.knee->value, 1.02 * mu);
  EXPECT_GE(steady.knee->value, 0.99 * mu);
  bool refused = false, extended = false;
  for (const Probe& p : steady.probes) {
    refused = refused || (!p.stationary && p.slo_attainment >= 0.9 && !p.pass);
    extended = extended || p.max_requests > 30;
    if (p.pass) {
      EXPECT_TRUE(p.stationary && p.settled) << p.value;
    }
  }
  EXPECT_TRUE(extended);
  EXPECT_TRUE(refused);
  // Above mu every request past the first few waits longer: the attainment of a growing queue drops
  // to 0 in the long run, so the knee sits at a cliff, with no margin.
  ASSERT_TRUE(steady.cliff.has_value());
  EXPECT_DOUBLE_EQ(steady.cliff->from, steady.knee->value);
  EXPECT_DOUBLE_EQ(steady.margin, 0.0);
  EXPECT_GT(steady.cliff->slope, 5.0);
}

// replications = 3: each replication searched on its own (its own seed), the sustainable rate their
// mean with a Student-t interval; with nearly even arrivals each finds mu.
TEST(CapacityTest, ReplicationsGiveTheSustainableRateAnInterval) {
  const double s_ms = service_ms();
  const double mu = 1000.0 / s_ms;
  Experiment e = Experiment::parse("replications = 3\n" + with_slo(3 * s_ms, "[capacity]\ntolerance = 0.01\nstart = 4.0\n"),
                                   "reps.toml", ".");
  CapacityOptions o;
  o.jobs = 2;
  const CapacityResult r = run_capacity(e, o);
  EXPECT_EQ(r.replications, 3);
  const ConfigurationCapacity& c = r.configurations.front();
  ASSERT_EQ(c.replications.size(), 3u);
  std::vector<double> knees;
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(c.replications[i].seeds, (std::vector<uint64_t>{5u + i}));
    ASSERT_TRUE(c.replications[i].knee);
    knees.push_back(c.replications[i].knee->value);
    for (const Probe& p : c.replications[i].probes) EXPECT_EQ(p.run_ids.size(), 1u);
  }
  EXPECT_EQ(c.sustainable.n, 3);
  EXPECT_DOUBLE_EQ(c.sustainable.mean, (knees[0] + knees[1] + knees[2]) / 3);
  EXPECT_DOUBLE_EQ(c.knee->value, c.sustainable.mean);
  EXPECT_TRUE(c.sustainable.known());
  // The range spans the knees' interval and the lowest failing probes' one.
  EXPECT_LE(c.range_lo, c.sustainable.lo());
  EXPECT_GE(c.range_hi, c.sustainable.hi());
  EXPECT_GE(c.range_hi, c.lowest_failing - 1e-9);
  EXPECT_GE(c.sustainable.mean, 0.98 * mu);
  EXPECT_LE(c.sustainable.mean, 1.02 * mu);
}

// A composed workload's knob is its arrival rate. Evenly spaced arrivals (kind constant, request k
// at k / rate) have no jitter: request k meets TTFT <= 3 S while k (S - 1/rate) <= 2 S, so 90% of
// 300 meet it exactly up to rate = mu / (1 - 2 / 269), which the bisection must bracket.
TEST(CapacityTest, AComposedWorkloadsKnobIsItsArrivalRate) {
  const double s_ms = service_ms();
  const double expected = 1000.0 / s_ms / (1.0 - 2.0 / 269.0);
  // Counting every request of the run (the finite-run knee), as in FindsTheKneeOfASingleServer.
  std::string base = with_slo(3 * s_ms, kFiniteRun + "[capacity]\ntarget = 0.9\ntolerance = 0.005\nstart = 2.0\n" +
                                            "require_stationary = false\n");
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
  EXPECT_EQ(knob_meaning(c.knob), "arrival rate (req/s)");
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

// With replications the cheapest search gives each configuration's $/1M tokens a Student-t interval
// and compares neighbours replication by replication (the same seeds draw the same arrivals): two
// configurations that run identically (a KV block size that changes nothing here) cannot be told
// apart; four replicas cost a third more than three, every replication.
TEST(CapacityTest, CheapestWithIntervalsSaysWhatCannotBeToldApart) {
  const double s_ms = service_ms();
  const double mu = 1000.0 / s_ms;
  Experiment e = Experiment::parse(
      "replications = 3\n" +
          with_slo(3 * s_ms, "[set]\nrouter.kind = \"round_robin\"\n[[axis]]\nkeys = [\"cluster.replicas\", \"cluster.block_size\"]\n"
                             "values = [[4, 16], [3, 16], [3, 32]]\n[capacity]\ncheapest_at = " +
                                 std::to_string(2.5 * mu) + "\n"),
      "ties.toml", ".");
  CapacityOptions o;
  o.jobs = 2;
  const CheapestResult r = run_cheapest(e, o);
  ASSERT_EQ(r.configurations.size(), 3u);
  EXPECT_EQ(r.replications, 3);
  EXPECT_NE(r.interval_method.find("Student t over 3 replications"), std::string::npos);
  // The two three-replica configurations first (equal cost), then four replicas.
  EXPECT_NE(r.configurations[0].label.find("cluster.replicas=3"), std::string::npos) << r.configurations[0].label;
  EXPECT_NE(r.configurations[1].label.find("cluster.replicas=3"), std::string::npos) << r.configurations[1].label;
  EXPECT_NE(r.configurations[2].label.find("cluster.replicas=4"), std::string::npos) << r.configurations[2].label;
  ASSERT_EQ(r.tied_with_above.size(), 3u);
  EXPECT_FALSE(r.tied_with_above[0]);
  EXPECT_TRUE(r.tied_with_above[1]);
  EXPECT_FALSE(r.tied_with_above[2]);
  const Probe& three = r.configurations[0].probes.front();
  const Probe& four = r.configurations[2].probes.front();
  EXPECT_EQ(three.run_ids.size(), 3u);
  EXPECT_LE(three.usd_lo, three.usd_per_mtok_output);
  EXPECT_GE(three.usd_hi, three.usd_per_mtok_output);
  EXPECT_NEAR(four.usd_per_mtok_output / three.usd_per_mtok_output, 4.0 / 3.0, 0.02);
  ASSERT_TRUE(r.best);
  EXPECT_EQ(*r.best, 0u);
}

// A trace's knob is a replay speed, and the table and JSON say so.
TEST(CapacityTest, ATracesMaxRateIsAReplaySpeed) {
  const double s_ms = service_ms();
  TempDir dir;
  const std::string trace = dir.file("even.csv");
  {
    std::ofstream out(trace);
    out << "TIMESTAMP,ContextTokens,GeneratedTokens\n";
    for (int i = 0; i < 100; ++i) out << "2023-11-16 18:" << (i / 60 < 10 ? "0" : "") << i / 60 << ":" << (i % 60 < 10 ? "0" : "")
                                      << i % 60 << ".000000,2000,1\n";  // one request a second
  }
  const std::string path = dir.file("replay.toml");
  std::ofstream(path) << with_slo(3 * s_ms, "[set]\nworkload = { kind = \"azure_csv\", path = \"" + trace +
                                                "\" }\n[capacity]\nstart = 4.0\ntolerance = 0.05\n");
  std::ostringstream out, err;
  const char* argv[] = {"servesim", "capacity", path.c_str(), "--jobs", "2", "--quiet"};
  ASSERT_EQ(run_cli(6, argv, out, err), 0) << err.str();
  EXPECT_NE(out.str().find("highest workload.rate_scale (replay speed (x the trace's recorded rate))"), std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find("max replay speed"), std::string::npos) << out.str();
  std::ostringstream jout, jerr;
  const char* json[] = {"servesim", "capacity", path.c_str(), "--json", "--quiet"};
  ASSERT_EQ(run_cli(5, json, jout, jerr), 0) << jerr.str();
  EXPECT_NE(jout.str().find("\"knob\":\"workload.rate_scale\",\"knob_meaning\":\"replay speed (x the trace's recorded rate)\""),
            std::string::npos)
      << jout.str();
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
  EXPECT_NE(out.str().find("capacity: highest workload.rate (arrival rate (req/s)) with steady-state SLO attainment >= "
                           "90.0%"),
            std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find("max rate"), std::string::npos) << out.str();
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

// N+1 sizing ([capacity] headroom): with the least-outstanding router a down replica is never picked,
// so N replicas with one down serve exactly as N - 1 replicas all up: the same knee (the same runs),
// at N / (N - 1) times the cost per token (every replica paid for). And with one GPU per node, a
// node's failure is replica 0's.
TEST(CapacityTest, HeadroomOneReplicaDownSustainsWhatOneReplicaLessDoes) {
  const double s_ms = service_ms();
  const std::string text = with_slo(3 * s_ms, "[base.router]\nkind = \"least_outstanding\"\n"
                                              "[[axis]]\nkey = \"cluster.replicas\"\nvalues = [2, 3]\n"
                                              "[capacity]\ntarget = 0.9\ntolerance = 0.01\nstart = 2.0\n"
                                              "headroom = \"replica\"\n");
  Experiment e = Experiment::parse(text, "n1.toml", ".");
  CapacityOptions o;
  o.jobs = 2;
  const CapacityResult r = run_capacity(e, o);
  ASSERT_EQ(r.configurations.size(), 4u);
  EXPECT_EQ(r.headroom, "replica");
  ASSERT_EQ(r.pairs.size(), 2u);
  EXPECT_EQ(r.pairs[0].label, "cluster.replicas=2");
  EXPECT_EQ(r.pairs[1].label, "cluster.replicas=3");
  const auto& c = r.configurations;
  for (const auto& x : c) ASSERT_TRUE(x.knee.has_value()) << x.label;
  EXPECT_EQ(c[0].label, "cluster.replicas=2 headroom=all up");
  EXPECT_EQ(c[3].label, "cluster.replicas=3 headroom=one replica down");
  EXPECT_DOUBLE_EQ(c[3].knee->value, c[0].knee->value);  // 3 with one down = 2 all up
  EXPECT_NEAR(c[3].knee->usd_per_mtok_output / c[0].knee->usd_per_mtok_output, 1.5, 1e-9);
  // Two replicas with one down: one server, whose steady-state capacity is its service rate.
  const double mu = 1000.0 / s_ms;
  EXPECT_NEAR(c[1].knee->value / mu, 1.0, 0.03) << c[1].knee->value << " vs " << mu;
  EXPECT_DOUBLE_EQ(r.pairs[1].kept, c[3].knee->value / c[2].knee->value);
  EXPECT_NEAR(r.pairs[1].cost, c[3].knee->usd_per_mtok_output / c[2].knee->usd_per_mtok_output - 1, 1e-12);
  EXPECT_GT(r.pairs[1].cost, 0.3);  // a third of the GPUs idle at two thirds of the rate, roughly

  // A node of one GPU: the node's failure is replica 0's; the command line overrides the file.
  Experiment n = Experiment::parse(text + "[base.network]\ngpus_per_node = 1\n", "n1.toml", ".");
  n.set_headroom("node", core::SourceLocation{"--headroom", 0, 0});
  const CapacityResult rn = run_capacity(n, o);
  ASSERT_EQ(rn.configurations.size(), 4u);
  EXPECT_EQ(rn.configurations[3].label, "cluster.replicas=3 headroom=one node down");
  ASSERT_TRUE(rn.configurations[3].knee.has_value());
  EXPECT_DOUBLE_EQ(rn.configurations[3].knee->value, c[3].knee->value);
  // An axis over the faults would fight the injected failure.
  EXPECT_THROW(Experiment::parse(text + "[[axis]]\nkey = \"faults.on_failure\"\nvalues = [\"fail\"]\n", "x.toml", "."),
               core::ConfigError);
  EXPECT_THROW(Experiment::parse(with_slo(1, "[capacity]\nheadroom = \"gpu\"\n"), "x.toml", "."), core::ConfigError);
}

}  // namespace
}  // namespace servesim::experiments
