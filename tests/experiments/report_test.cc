// Reports: runs grouped into configurations, plots drawn (PNG and SVG) and an index.html.
#include "experiments/report.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "experiments/cli/cli.h"
#include "experiments/process.h"
#include "experiments/run.h"
#include "experiments/sweep.h"
#include "sim/core/config.h"
#include "sim/core/format.h"
#include "tests/experiments/results_dump.h"
#include "tests/test_paths.h"

namespace servesim::experiments {
namespace {

using servesim::testing::file_bytes;
using servesim::testing::TempDir;

const std::string kExperiment = R"(
name = "report"
seeds = [1, 2]
[base]
[base.workload]
kind = "poisson"
rate = 20.0
max_requests = 300
[base.workload.prompt]
kind = "uniform"
min = 50
max = 800
[base.workload.output]
kind = "uniform"
min = 2
max = 200
[base.model]
kind = "llama-3-8b"
[base.gpu]
kind = "h100-sxm"
[base.cluster]
replicas = 2
[base.slo]
ttft_ms = 300
tpot_ms = 40
[base.output]
sample_interval_ms = 250
[[axis]]
key = "router.kind"
values = ["round_robin", "least_outstanding"]
[[axis]]
key = "workload.rate"
values = [20.0, 60.0, 120.0]
)";

std::string sweep_db(const TempDir& dir) {
  Experiment e = Experiment::parse(kExperiment, "report.toml", ".");
  SweepOptions o;
  o.db_path = dir.file("r.db");
  o.jobs = 2;
  run_sweep(e, o);
  return o.db_path;
}

TEST(ReportTest, GroupsRunsIntoConfigurationsByWhatDiffers) {
  TempDir dir;
  ReportOptions o;
  o.db_path = sweep_db(dir);
  const ReportData d = load_report(o);
  EXPECT_EQ(d.experiment.name, "report");
  EXPECT_EQ(d.knob, "workload.rate");
  ASSERT_EQ(d.runs.size(), 12u);
  ASSERT_EQ(d.series.size(), 2u);
  EXPECT_EQ(d.series[0].label, "router.kind=round_robin");
  EXPECT_EQ(d.series[1].label, "router.kind=least_outstanding");
  for (const auto& s : d.series) {
    ASSERT_EQ(s.points.size(), 3u);
    EXPECT_DOUBLE_EQ(*s.points[0].knob, 20.0);
    EXPECT_DOUBLE_EQ(*s.points[2].knob, 120.0);
    for (const auto& p : s.points) {
      ASSERT_EQ(p.runs.size(), 2u);  // two seeds pooled
      uint64_t meeting = 0, total = 0;
      for (size_t i : p.runs) {
        meeting += d.runs[i].requests_meeting_slo;
        total += d.runs[i].requests_total;
      }
      EXPECT_DOUBLE_EQ(p.slo_attainment, static_cast<double>(meeting) / static_cast<double>(total));
      EXPECT_NEAR(p.offered_req_s / *p.knob, 1.0, 0.25);
    }
    EXPECT_LT(s.points[0].offered_req_s, s.points[2].offered_req_s);
    // Overload shows: attainment falls from the lowest to the highest rate.
    EXPECT_GT(s.points[0].slo_attainment, s.points[2].slo_attainment);
  }
  // The representative run is taken near the median offered rate: the 60 req/s point.
  EXPECT_DOUBLE_EQ(*d.runs[d.series[0].representative].knob, 60.0);
}

TEST(ReportTest, WritesPlotsAndAnIndex) {
  ASSERT_FALSE(find_program("gnuplot").empty()) << "servesim report needs gnuplot: apt-get install gnuplot-nox "
                                                   "(scripts/bootstrap.sh installs it)";
  TempDir dir;
  const std::string db = sweep_db(dir);
  const std::string out_dir = dir.file("report");
  std::ostringstream out, err;
  const char* argv[] = {"servesim", "report", db.c_str(), "--out", out_dir.c_str()};
  ASSERT_EQ(run_cli(5, argv, out, err), 0) << err.str();
  EXPECT_NE(out.str().find("report of 12 runs in 2 configurations"), std::string::npos) << out.str();
  for (const char* name : {"goodput", "slo_attainment", "ttft_cdf", "tpot_cdf", "timeline_0", "timeline_1"}) {
    const std::string png = file_bytes(out_dir + "/" + name + ".png");
    ASSERT_GT(png.size(), 5000u) << name;
    EXPECT_EQ(png.substr(0, 4), "\x89PNG") << name;
    const std::string svg = file_bytes(out_dir + "/" + name + ".svg");
    EXPECT_NE(svg.find("<svg"), std::string::npos) << name;
  }
  const std::string svg = file_bytes(out_dir + "/goodput.svg");
  EXPECT_NE(svg.find("router.kind=least_outstanding"), std::string::npos);
  const std::string index = file_bytes(out_dir + "/index.html");
  EXPECT_NE(index.find("<img src=\"goodput.png\""), std::string::npos);
  EXPECT_NE(index.find("timeline_1.png"), std::string::npos);
  EXPECT_NE(index.find("router.kind=round_robin"), std::string::npos);
  EXPECT_NE(index.find("sweep 'report'"), std::string::npos);
  // The data behind the goodput plot: one line per point with the rate, offered rate and goodput.
  std::ifstream series(out_dir + "/data/series_0.dat");
  std::string line;
  int rows = 0;
  while (std::getline(series, line))
    if (!line.empty() && line[0] != '#') ++rows;
  EXPECT_EQ(rows, 3);
  // Four replicas' blocks would be four; two replicas, two blocks.
  const std::string timeline = file_bytes(out_dir + "/data/timeline_0.dat");
  EXPECT_NE(timeline.find("# replica 1"), std::string::npos);
  EXPECT_EQ(timeline.find("# replica 2"), std::string::npos);
}

// Each point's 95% interval: with two seeds, mean +- t(0.975, 1) s / sqrt(2) = mean +- 12.706 |a - b| / 2
// (computed here by hand from the two runs), drawn as error bars; the SLO limits on the CDFs; the
// CDFs of every configuration at each rate they all ran.
TEST(ReportTest, IntervalsSloLinesAndCdfsByRate) {
  TempDir dir;
  ReportOptions o;
  o.db_path = sweep_db(dir);
  o.out_dir = dir.file("out");
  o.run_gnuplot = false;
  const ReportData d = load_report(o);
  for (const auto& s : d.series)
    for (const auto& p : s.points) {
      ASSERT_EQ(p.runs.size(), 2u);
      const ReportRun& a = d.runs[p.runs[0]];
      const ReportRun& b = d.runs[p.runs[1]];
      const double half = 12.7062047361747 * std::fabs(a.goodput_req_s - b.goodput_req_s) / 2;
      EXPECT_NEAR(p.goodput_lo, (a.goodput_req_s + b.goodput_req_s) / 2 - half, 1e-9);
      EXPECT_NEAR(p.goodput_hi, (a.goodput_req_s + b.goodput_req_s) / 2 + half, 1e-9);
      const double ah = 12.7062047361747 * std::fabs(a.slo_attainment - b.slo_attainment) / 2;
      const double am = (a.slo_attainment + b.slo_attainment) / 2;
      EXPECT_NEAR(p.slo_attainment_lo, std::max(0.0, am - ah), 1e-9);
      EXPECT_NEAR(p.slo_attainment_hi, std::min(1.0, am + ah), 1e-9);
    }
  EXPECT_DOUBLE_EQ(*d.runs[0].ttft_slo_ms, 300);
  EXPECT_DOUBLE_EQ(*d.runs[0].tpot_slo_ms, 40);
  write_report(d, o);
  const std::string gp = file_bytes(dir.file("out/plots.gp"));
  EXPECT_NE(gp.find("with yerrorlines"), std::string::npos);
  EXPECT_NE(gp.find("SLO TTFT <= 300 ms"), std::string::npos);
  EXPECT_NE(gp.find("SLO TPOT <= 40 ms"), std::string::npos);
  // Both configurations ran 20, 60 and 120 req/s: one CDF figure per rate, each with both.
  for (int j = 0; j < 3; ++j) {
    EXPECT_NE(gp.find("ttft_cdf_at_" + std::to_string(j) + ".png"), std::string::npos) << j;
    EXPECT_TRUE(std::filesystem::exists(dir.file("out/data/ttft_ms_1_at_" + std::to_string(j) + ".dat"))) << j;
  }
  EXPECT_NE(gp.find("TTFT CDF at workload.rate = 120, every configuration"), std::string::npos);
  EXPECT_EQ(gp.find("ttft_cdf_at_3"), std::string::npos);
  // The data file's interval columns: lo <= value <= hi.
  std::ifstream series(dir.file("out/data/series_0.dat"));
  int rows = 0;
  for (std::string line; std::getline(series, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream f(line);
    double knob, offered, goodput, att, runs, glo, ghi, alo, ahi;
    f >> knob >> offered >> goodput >> att >> runs >> glo >> ghi >> alo >> ahi;
    ASSERT_TRUE(f) << line;
    EXPECT_LE(glo, goodput);
    EXPECT_GE(ghi, goodput);
    EXPECT_LE(alo, ahi);
    ++rows;
  }
  EXPECT_EQ(rows, 3);
}

// A capacity search's database: the report draws the search's answer, and groups the probes of a
// configuration (however long the search made them run) under its label.
TEST(ReportTest, CapacityDatabasesGetACapacityChart) {
  TempDir dir;
  const std::string path = dir.file("cap.toml");
  std::ofstream(path) << R"(
name = "cap"
[base]
[base.workload]
kind = "poisson"
rate = 20.0
max_requests = 200
[base.workload.prompt]
kind = "fixed"
value = 500
[base.workload.output]
kind = "fixed"
value = 20
[base.model]
kind = "llama-3-8b"
[base.gpu]
kind = "h100-sxm"
[base.slo]
ttft_ms = 500
[base.output]
sample_interval_ms = 0
[[axis]]
key = "cluster.replicas"
values = [1, 2]
[capacity]
tolerance = 0.1
)";
  const std::string db = dir.file("cap.db");
  std::ostringstream out, err;
  const char* argv[] = {"servesim", "capacity", path.c_str(), "--db", db.c_str(), "--json", "--quiet"};
  ASSERT_EQ(run_cli(7, argv, out, err), 0) << err.str();
  ReportOptions o;
  o.db_path = db;
  o.out_dir = dir.file("out");
  o.run_gnuplot = false;
  const ReportData d = load_report(o);
  ASSERT_EQ(d.capacity.size(), 2u);
  EXPECT_EQ(d.capacity_knob, "workload.rate");
  EXPECT_DOUBLE_EQ(d.capacity_target, 0.9);
  ASSERT_EQ(d.series.size(), 2u);  // however many lengths the probes ran
  for (size_t i = 0; i < 2; ++i) {
    const CapacityRow& c = d.capacity[i];
    EXPECT_EQ(c.label, "cluster.replicas=" + std::to_string(i + 1));
    EXPECT_EQ(c.status, "found");
    ASSERT_TRUE(c.sustainable && c.lo && c.hi);
    // No replications: the interval is the search's bracket, within its tolerance.
    EXPECT_DOUBLE_EQ(*c.lo, *c.sustainable);
    EXPECT_DOUBLE_EQ(*c.hi, c.lowest_failing);
    EXPECT_LE(*c.hi - *c.lo, 0.1 * *c.lo * (1 + 1e-9));
    // The JSON's answer is the chart's.
    EXPECT_NE(out.str().find("\"max_value\":" + core::format_double(*c.sustainable)), std::string::npos) << out.str();
  }
  // Two replicas sustain more than one.
  EXPECT_GT(*d.capacity[1].sustainable, *d.capacity[0].sustainable);
  write_report(d, o);
  const std::string gp = file_bytes(dir.file("out/plots.gp"));
  EXPECT_NE(gp.find("capacity.png"), std::string::npos);
  EXPECT_NE(gp.find("with xerrorbars"), std::string::npos);
  const std::string index = file_bytes(dir.file("out/index.html"));
  EXPECT_NE(index.find("Capacity (servesim capacity)"), std::string::npos);
  EXPECT_NE(index.find("search's bracket"), std::string::npos);
}

TEST(ReportTest, PlainRunsAndMistakes) {
  TempDir dir;
  const std::string db = dir.file("plain.db");
  const std::string config = R"(
[workload]
kind = "poisson"
rate = 10.0
max_requests = 100
[workload.prompt]
kind = "fixed"
value = 100
[workload.output]
kind = "fixed"
value = 20
[model]
kind = "llama-3-8b"
[gpu]
kind = "h100-sxm"
)";
  for (const char* rate : {"workload.rate=10", "workload.rate=30"})
    run_simulation(core::parse_config(config, "plain.toml", run_schema(), {rate}), RunOutputs{db, ""});
  ReportOptions o;
  o.db_path = db;
  o.out_dir = dir.file("out");
  o.run_gnuplot = false;
  const ReportData d = load_report(o);
  ASSERT_EQ(d.series.size(), 1u);
  EXPECT_EQ(d.series[0].label, "all runs");
  EXPECT_EQ(d.series[0].points.size(), 2u);
  write_report(d, o);
  EXPECT_TRUE(std::filesystem::exists(dir.file("out/index.html")));
  EXPECT_TRUE(std::filesystem::exists(dir.file("out/plots.gp")));
  EXPECT_FALSE(std::filesystem::exists(dir.file("out/goodput.png")));

  EXPECT_EQ(file_bytes(dir.file("out/index.html")).find("Request classes"), std::string::npos);  // none here

  // A run with request classes adds their table.
  const std::string classed = dir.file("classes.db");
  run_simulation(core::parse_config(config + "[[workload.classes]]\nname = \"gold\"\nshare = 1\ntenant = \"t<1>\"\n"
                                             "[[workload.classes]]\nname = \"bronze\"\nshare = 1\npriority = 2\n",
                                    "classes.toml", run_schema()),
                 RunOutputs{classed, ""});
  ReportOptions oc = o;
  oc.db_path = classed;
  oc.out_dir = dir.file("out_classes");
  const ReportData dc = load_report(oc);
  ASSERT_EQ(dc.classes.size(), 2u);
  EXPECT_EQ(dc.classes[0].name, "gold");
  EXPECT_EQ(dc.classes[1].priority, 2);
  EXPECT_EQ(dc.classes[0].requests + dc.classes[1].requests, 100u);
  write_report(dc, oc);
  const std::string index = file_bytes(dir.file("out_classes/index.html"));
  EXPECT_NE(index.find("<h2>Request classes</h2>"), std::string::npos);
  EXPECT_NE(index.find("bronze"), std::string::npos);
  EXPECT_NE(index.find("t&lt;1&gt;"), std::string::npos);  // escaped
  EXPECT_EQ(index.find("Fleet and KV-tier figures"), std::string::npos);  // no fleet figures in these runs

  // A run with a replica failure writes fleet_metrics: the report shows them, one row per run.
  const std::string failed = dir.file("failed.db");
  run_simulation(core::parse_config(config + "[faults]\n[[faults.events]]\nreplica = 0\nat_s = 1\nrepair_s = 2\n",
                                    "faults.toml", run_schema()),
                 RunOutputs{failed, ""});
  ReportOptions of = o;
  of.db_path = failed;
  of.out_dir = dir.file("out_fleet");
  const ReportData df = load_report(of);
  const auto failures = std::find_if(df.fleet.begin(), df.fleet.end(),
                                     [](const ReportFleetRow& f) { return f.name == "replica_failures"; });
  ASSERT_NE(failures, df.fleet.end());
  EXPECT_EQ(failures->value, 1);
  write_report(df, of);
  const std::string fleet_index = file_bytes(dir.file("out_fleet/index.html"));
  EXPECT_NE(fleet_index.find("<h2>Fleet and KV-tier figures</h2>"), std::string::npos);
  EXPECT_NE(fleet_index.find("<th>replica_failures</th>"), std::string::npos);
  // Per-replica tier figures ("replica<i>.<figure>", docs/kv-tiers.md) stay out of that table.
  ReportData per_replica = df;
  per_replica.fleet.push_back({df.fleet.front().run_id, "replica0.kv_store_loads", 3});
  of.out_dir = dir.file("out_fleet_replicas");
  write_report(per_replica, of);
  const std::string replicas_index = file_bytes(dir.file("out_fleet_replicas/index.html"));
  EXPECT_NE(replicas_index.find("<th>replica_failures</th>"), std::string::npos);
  EXPECT_EQ(replicas_index.find("replica0.kv_store_loads"), std::string::npos);

  std::ostringstream out, err;
  const std::string missing = dir.file("missing.db");
  const std::string where = dir.file("x");
  const char* argv[] = {"servesim", "report", missing.c_str(), "--out", where.c_str()};
  EXPECT_EQ(run_cli(5, argv, out, err), 1);
  EXPECT_NE(err.str().find("missing.db: no such results database"), std::string::npos) << err.str();
}

}  // namespace
}  // namespace servesim::experiments
