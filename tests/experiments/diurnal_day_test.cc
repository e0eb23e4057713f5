// The day-long diurnal example, a fixed fleet against an autoscaled one (issue 17;
// experiments/fleet/diurnal_day.toml, docs/fleet.md "Example: a day of diurnal load"), run from the
// command line into a database, and the per-hour query users are told to run on it
// (scripts/report/attainment_by_hour.sql, replicas_by_hour.sql), each checked against what can be known without the
// simulator: the fixed pools' GPU-hours are replicas x TP x the run's length; the cold start is the
// hand computation from Qwen3-32B's weight bytes and the source's bandwidth; the hours' arrivals
// follow the integral of the sinusoid over each hour (Poisson counts, a stated bound); the hours'
// attainment, weighted by their requests, is the run's (also on a single run's database, which has
// no fleet_events and no points table); the hours' replicas add up to the
// provisioned replica-hours the collector counts from the replicas' own spans.
#include <gtest/gtest.h>

#include <SQLiteCpp/SQLiteCpp.h>

#include <cmath>
#include <fstream>
#include <map>
#include <numbers>
#include <sstream>
#include <string>
#include <vector>

#include "tests/cli_driver.h"
#include "tests/test_paths.h"

namespace servesim::experiments {
namespace {

using servesim::testing::TempDir;

constexpr int kPoints = 5;
// The points of diurnal_day.toml in order (run_id = point + 1): the replicas at the start, the pool's
// bounds, and the cold start's parts.
struct Point {
  int start, min, max;
  double provision_s, load_gb_s, warmup_s;
};
constexpr double kHostCacheGbS = 50;  // network.pcie_gb_s's default: weights_source = "host_cache"
const Point kPoint[kPoints] = {{4, 4, 4, 120, 2, 30},
                               {3, 3, 3, 120, 2, 30},
                               {2, 1, 5, 120, 2, 30},
                               {2, 1, 5, 5, kHostCacheGbS, 5},
                               {2, 1, 5, 120, 2, 30}};

// Qwen3-32B's weights by hand from its architecture (hidden 5120, 64 layers, 64 query heads and 8
// KV heads of 128, SwiGLU 25,600, vocabulary 151,936, untied LM head), bf16 (2 bytes): per layer
// Q 5120 x 8192, K and V 5120 x 1024 each, O 8192 x 5120, MLP 3 x 5120 x 25600 = 487,587,840
// parameters; x 64 = 31,205,621,760; embeddings and LM head 2 x 151,936 x 5120 = 1,555,824,640;
// 32,761,446,400 parameters, 65.52 GB. (Norm weights, ~0.7 M parameters, are within the tolerance.)
constexpr double kQwen3_32bBytes = 2.0 * (64.0 * (5120.0 * 8192 + 2 * 5120.0 * 1024 + 8192.0 * 5120 +
                                                   3 * 5120.0 * 25600) +
                                          2 * 151936.0 * 5120);

// The workload: rate(t) = 0.6 (1 + 0.6 sin(2 pi (t - 36000) / 86400)) req/s; its integral over [a, b]
// in closed form (docs/workloads.md: the count in [a, b] is Poisson of this mean).
double expected_arrivals(double a, double b) {
  constexpr double r = 0.6, amp = 0.6, period = 86400, phase = 36000;
  const double w = 2 * std::numbers::pi / period;
  return r * ((b - a) + amp / w * (std::cos(w * (a - phase)) - std::cos(w * (b - phase))));
}

struct HourRow {
  int64_t requests = 0, meeting = 0;
  double attainment_pct = 0, replicas = 0;
};

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class DiurnalDayTest : public ::testing::Test {
 protected:
  // One run of the whole example for every test here (about 6 s of wall time in a release build).
  static void SetUpTestSuite() {
    hours_ = new std::map<int, std::map<int, HourRow>>;
    dir_ = new TempDir;
    db_ = dir_->file("day.db");
    const servesim::testing::Cli c = servesim::testing::cli({"sweep",
                                                              servesim::testing::source_dir() +
                                                                  "/experiments/fleet/diurnal_day.toml",
                                                              "--db", db_, "--jobs", "2", "--quiet"});
    ASSERT_EQ(c.code, 0) << c.err;
    SQLite::Database d(db_, SQLite::OPEN_READONLY);
    // The documented queries, as shipped.
    SQLite::Statement q(d, read_text(servesim::testing::source_dir() + "/scripts/report/attainment_by_hour.sql"));
    while (q.executeStep()) {
      HourRow& h = (*hours_)[q.getColumn("run").getInt()][q.getColumn("hour").getInt()];
      h.requests = q.getColumn("requests").getInt64();
      h.meeting = q.getColumn("meeting_slo").getInt64();
      h.attainment_pct = q.getColumn("attainment_pct").getDouble();
      h.replicas = -1;
    }
    SQLite::Statement r(d, read_text(servesim::testing::source_dir() + "/scripts/report/replicas_by_hour.sql"));
    while (r.executeStep()) {
      const int run = r.getColumn("run").getInt(), hour = r.getColumn("hour").getInt();
      ASSERT_TRUE(hours_->count(run) && hours_->at(run).count(hour)) << run << " hour " << hour;
      (*hours_)[run][hour].replicas = r.getColumn("replicas").getDouble();
    }
  }
  static void TearDownTestSuite() {
    delete hours_;
    delete dir_;
  }
  static double runs_column(const std::string& column, int run) {
    SQLite::Database d(db_, SQLite::OPEN_READONLY);
    SQLite::Statement st(d, "SELECT " + column + " FROM runs WHERE run_id = ?");
    st.bind(1, run);
    EXPECT_TRUE(st.executeStep());
    return st.getColumn(0).getDouble();
  }
  static double fleet_metric(const std::string& name, int run) {
    SQLite::Database d(db_, SQLite::OPEN_READONLY);
    SQLite::Statement st(d, "SELECT value FROM fleet_metrics WHERE run_id = ? AND name = ?");
    st.bind(1, run);
    st.bind(2, name);
    EXPECT_TRUE(st.executeStep()) << name;
    return st.getColumn(0).getDouble();
  }
  static inline TempDir* dir_ = nullptr;
  static inline std::string db_;
  static inline std::map<int, std::map<int, HourRow>>* hours_ = nullptr;  // run -> hour -> row
};

// Fixed pools pay for every replica throughout: GPU-hours = replicas x TP (1) x the run's length,
// which is the day plus the tail of its last requests (the run ends when the last one finishes).
// Autoscaled pools pay strictly between their minimum and maximum pools over the same length.
TEST_F(DiurnalDayTest, GpuHoursOfFixedAndAutoscaledPools) {
  for (int run = 1; run <= kPoints; ++run) {
    const double seconds = runs_column("sim_seconds", run);
    EXPECT_GE(seconds, 86400.0 - 60) << run;   // the last arrival comes within a minute of the day's end
    EXPECT_LE(seconds, 86400.0 + 3600) << run;  // and no answer takes an hour
    const Point& p = kPoint[run - 1];
    const double gpu_hours = runs_column("gpu_hours", run);
    if (p.min == p.max) {
      EXPECT_NEAR(gpu_hours, p.min * 1 * seconds / 3600, 1e-9) << run;
    } else {
      EXPECT_GT(gpu_hours, p.min * seconds / 3600) << run;
      EXPECT_LT(gpu_hours, p.max * seconds / 3600) << run;
    }
  }
  // What the example is for: the autoscaled pool pays less than the pool sized for the peak.
  EXPECT_LT(runs_column("gpu_hours", 3), runs_column("gpu_hours", 1));
}

// Every provision of the autoscaled points is ready after provision_s + 65.52 GB / bandwidth +
// warmup_s: 120 + 32.76 + 30 = 182.76 s from remote storage at 2 GB/s, 5 + 1.31 + 5 = 11.31 s from
// a host cache at 50 GB/s (network.pcie_gb_s). A replica_ready without a provision is a drain called
// off by a scale-up (the replica was draining, loaded and warm: up at once).
TEST_F(DiurnalDayTest, ColdStartsByHand) {
  EXPECT_NEAR(kQwen3_32bBytes / 1e9, 65.52, 0.01);
  SQLite::Database d(db_, SQLite::OPEN_READONLY);
  for (int run = 3; run <= kPoints; ++run) {
    const Point& p = kPoint[run - 1];
    const double expect_s = p.provision_s + kQwen3_32bBytes / (p.load_gb_s * 1e9) + p.warmup_s;
    SQLite::Statement st(d,
                         "SELECT kind, replica, time_ns FROM fleet_events WHERE run_id = ? AND kind IN "
                         "('replica_provision', 'replica_ready', 'replica_drain', 'replica_off') ORDER BY time_ns, rowid");
    st.bind(1, run);
    std::map<int, int64_t> provisioned;  // replica -> provision time, while starting
    std::map<int, bool> draining;
    int ready = 0;
    while (st.executeStep()) {
      const std::string kind = st.getColumn(0).getString();
      const int replica = st.getColumn(1).getInt();
      const int64_t t = st.getColumn(2).getInt64();
      if (kind == "replica_provision") {
        provisioned[replica] = t;
      } else if (kind == "replica_drain") {
        draining[replica] = true;
      } else if (kind == "replica_ready" && !provisioned.count(replica)) {
        EXPECT_TRUE(draining[replica]) << run << " replica " << replica << " ready at " << t;
        draining[replica] = false;
      } else if (kind == "replica_ready") {
        EXPECT_NEAR((t - provisioned[replica]) * 1e-9, expect_s, 0.01) << run << " replica " << replica;
        provisioned.erase(replica);
        ++ready;
      } else {  // off: drained, or a start called off
        provisioned.erase(replica);
        draining[replica] = false;
      }
    }
    EXPECT_GT(ready, 0) << run;  // the day does make each autoscaled pool scale up
  }
}

// The hours' arrivals: the same requests at every point (one seed), adding up to the run's total, and
// each hour's count within 4.5 standard deviations of the Poisson mean 0.6 (F(b) - F(a)) of the
// sinusoid's closed-form integral (for a correct generator, the chance that any of the 24 hours falls
// outside is below 24 x 7e-6; the seed is fixed, so the test is deterministic).
TEST_F(DiurnalDayTest, HourlyArrivalsFollowTheSinusoidsIntegral) {
  ASSERT_EQ(hours_->size(), static_cast<size_t>(kPoints));
  for (int run = 1; run <= kPoints; ++run) {
    const auto& hours = hours_->at(run);
    ASSERT_EQ(hours.size(), 24u) << run;
    int64_t total = 0;
    for (const auto& [hour, row] : hours) {
      ASSERT_GE(hour, 0);
      ASSERT_LT(hour, 24);
      total += row.requests;
      EXPECT_EQ(row.requests, hours_->at(1).at(hour).requests) << run << " hour " << hour;
      const double mean = expected_arrivals(hour * 3600.0, (hour + 1) * 3600.0);
      EXPECT_LE(std::abs(static_cast<double>(row.requests) - mean), 4.5 * std::sqrt(mean))
          << run << " hour " << hour << ": " << row.requests << " arrivals, expected " << mean;
    }
    EXPECT_EQ(total, static_cast<int64_t>(runs_column("requests_total", run))) << run;
  }
  // The closed form against a hand computation: the hour around the peak (16:00) and the one around
  // the trough (04:00) hold 0.6 x 3600 x (1 +- 0.6 m) arrivals on average, m = sin(pi / 24) / (pi / 24)
  // the mean of the sine over the hour around its extreme: about four times as many at the peak.
  const double flat = std::sin(std::numbers::pi / 24) / (std::numbers::pi / 24);
  EXPECT_NEAR(expected_arrivals(15.5 * 3600, 16.5 * 3600), 0.6 * 3600 * (1 + 0.6 * flat), 1e-9);
  EXPECT_NEAR(expected_arrivals(3.5 * 3600, 4.5 * 3600), 0.6 * 3600 * (1 - 0.6 * flat), 1e-9);
  EXPECT_GT(expected_arrivals(15.5 * 3600, 16.5 * 3600) / expected_arrivals(3.5 * 3600, 4.5 * 3600), 3.9);
}

// The hours' attainment, weighted by their requests, is the run's slo_attainment (one definition:
// every request counts, meets_slo only for a completed one within every limit); each hour's
// percentage is its meeting / requests.
TEST_F(DiurnalDayTest, HourlyAttainmentAddsUpToTheRunsAttainment) {
  for (int run = 1; run <= kPoints; ++run) {
    int64_t requests = 0, meeting = 0;
    for (const auto& [hour, row] : hours_->at(run)) {
      EXPECT_LE(row.meeting, row.requests);
      EXPECT_NEAR(row.attainment_pct, 100.0 * row.meeting / row.requests, 0.05 + 1e-9) << run << " hour " << hour;
      requests += row.requests;
      meeting += row.meeting;
    }
    EXPECT_EQ(meeting, static_cast<int64_t>(runs_column("requests_meeting_slo", run))) << run;
    EXPECT_DOUBLE_EQ(static_cast<double>(meeting) / static_cast<double>(requests), runs_column("slo_attainment", run))
        << run;
  }
  // The pool sized for the mean misses where the load is over its capacity: its worst hour is in the
  // afternoon (12:00-20:00, the rate over 0.8 req/s), and it meets the SLO for every request of the
  // night (00:00-08:00, under 0.5 req/s).
  const auto& mean_pool = hours_->at(2);
  int worst = 0;
  for (const auto& [hour, row] : mean_pool)
    if (row.attainment_pct < mean_pool.at(worst).attainment_pct) worst = hour;
  EXPECT_GE(worst, 12);
  EXPECT_LT(worst, 20);
  for (int hour = 0; hour < 8; ++hour) EXPECT_EQ(mean_pool.at(hour).meeting, mean_pool.at(hour).requests) << hour;
}

// The attainment query needs only the requests table: on a single run's database (no points, no
// fleet_events) its hours add up to that run's figures too.
TEST(DiurnalDayQueryTest, AttainmentByHourOnASingleRunsDatabase) {
  TempDir dir;
  const std::string db = dir.file("run.db");
  const servesim::testing::Cli c = servesim::testing::cli(
      {"run", servesim::testing::source_dir() + "/experiments/quickstart.toml", "--db", db});
  ASSERT_EQ(c.code, 0) << c.err;
  SQLite::Database d(db, SQLite::OPEN_READONLY);
  SQLite::Statement q(d, read_text(servesim::testing::source_dir() + "/scripts/report/attainment_by_hour.sql"));
  int64_t requests = 0, meeting = 0;
  while (q.executeStep()) {
    EXPECT_EQ(q.getColumn("run").getInt(), 1);
    requests += q.getColumn("requests").getInt64();
    meeting += q.getColumn("meeting_slo").getInt64();
  }
  EXPECT_EQ(requests, d.execAndGet("SELECT requests_total FROM runs").getInt64());
  EXPECT_DOUBLE_EQ(static_cast<double>(meeting) / static_cast<double>(requests),
                   d.execAndGet("SELECT slo_attainment FROM runs").getDouble());
}

// The hours' replicas: a fixed pool's every replica in every hour; an autoscaled pool's hours (from
// fleet_events) add up to the replica-hours the collector counts from each replica's provisioned
// spans, less the part after the day's 24 hours (at most max_replicas x the run's tail), within the
// query's rounding (0.005 an hour).
TEST_F(DiurnalDayTest, HourlyReplicasAddUpToTheProvisionedReplicaHours) {
  for (int run = 1; run <= kPoints; ++run) {
    const Point& p = kPoint[run - 1];
    double sum = 0;
    for (const auto& [hour, row] : hours_->at(run)) {
      ASSERT_GE(row.replicas, 0) << run << " hour " << hour << ": no row in replicas_by_hour";
      EXPECT_GE(row.replicas, p.min - 0.005) << run << " hour " << hour;
      EXPECT_LE(row.replicas, p.max + 0.005) << run << " hour " << hour;
      if (p.min == p.max) {
        EXPECT_DOUBLE_EQ(row.replicas, p.min) << run << " hour " << hour;
      }
      sum += row.replicas;
    }
    if (p.min == p.max) continue;
    const double provisioned = fleet_metric("provisioned_replica_hours", run);
    const double tail_h = (runs_column("sim_seconds", run) - 86400) / 3600;
    EXPECT_LE(sum, provisioned + 24 * 0.005) << run;
    EXPECT_GE(sum, provisioned - p.max * tail_h - 24 * 0.005) << run;
  }
}

}  // namespace
}  // namespace servesim::experiments
