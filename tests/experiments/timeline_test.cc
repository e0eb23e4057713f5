// servesim run --timeline: a trace-event file whose events are the run's iterations and requests.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <SQLiteCpp/SQLiteCpp.h>

#include <fstream>
#include <map>
#include <sstream>

#include "experiments/cli/cli.h"
#include "tests/test_paths.h"

namespace servesim::experiments {
namespace {

using servesim::testing::TempDir;

const char* kConfig = R"(
seed = 9
[workload]
kind = "poisson"
rate = 40.0
max_requests = 200
[workload.prompt]
kind = "uniform"
min = 100
max = 2000
[workload.output]
kind = "uniform"
min = 1
max = 200
[model]
kind = "llama-3-8b"
[gpu]
kind = "h100-sxm"
[cluster]
replicas = 3
)";

nlohmann::json run_with_timeline(const TempDir& dir, const std::vector<std::string>& extra, std::string* err_text = nullptr) {
  const std::string config = dir.file("c.toml");
  std::ofstream(config) << kConfig;
  std::vector<std::string> args = {"servesim", "run", config, "--json", "--db", dir.file("r.db"), "--timeline",
                                   dir.file("t.json")};
  args.insert(args.end(), extra.begin(), extra.end());
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  std::ostringstream out, err;
  EXPECT_EQ(run_cli(static_cast<int>(argv.size()), argv.data(), out, err), 0) << err.str();
  if (err_text) *err_text = err.str();
  std::ifstream in(dir.file("t.json"));
  nlohmann::json j = nlohmann::json::parse(in);
  j["summary"] = nlohmann::json::parse(out.str());
  return j;
}

TEST(TimelineTest, IterationsAndRequestSpansMatchTheRun) {
  TempDir dir;
  std::string err;
  const nlohmann::json j = run_with_timeline(dir, {}, &err);
  const auto& summary = j["summary"];
  EXPECT_EQ(j["otherData"]["events_dropped"], 0);
  EXPECT_EQ(j["otherData"]["config_hash"], summary["config_hash"]);
  EXPECT_NE(err.find("trace events"), std::string::npos) << err;
  std::map<std::string, int> phases;
  std::map<int, std::string> process_names;
  int64_t iterations = 0, prefill_tokens = 0;
  std::map<int64_t, std::pair<double, double>> requests;  // id -> (begin, end) of the outer span
  for (const auto& e : j["traceEvents"]) {
    const std::string ph = e["ph"];
    ++phases[ph];
    if (ph == "M" && e["name"] == "process_name") process_names[e["pid"]] = e["args"]["name"];
    if (ph == "X" && e["cat"] == "iteration") {
      ++iterations;
      prefill_tokens += e["args"]["prefill_tokens"].get<int64_t>();
      EXPECT_GT(e["dur"].get<double>(), 0);
    }
    if ((ph == "b" || ph == "e") && e["name"].get<std::string>().rfind("request ", 0) == 0) {
      auto& span = requests[e["id"].get<int64_t>()];
      (ph == "b" ? span.first : span.second) = e["ts"].get<double>();
    }
  }
  EXPECT_EQ(process_names.size(), 3u);
  EXPECT_EQ(process_names[2], "replica 2");
  EXPECT_EQ(iterations, summary["iterations"].get<int64_t>());
  EXPECT_EQ(static_cast<int64_t>(requests.size()), summary["requests_completed"].get<int64_t>());
  EXPECT_EQ(phases["b"], phases["e"]);
  // Each span is the request's life in the engine as the database records it: from its arrival to
  // the iteration that produced its last token (microseconds in the trace).
  SQLite::Database db(dir.file("r.db"), SQLite::OPEN_READONLY);
  SQLite::Statement st(db, "SELECT request_id, arrival_ns, engine_finish_ns FROM requests WHERE outcome = 'completed'");
  int checked = 0;
  while (st.executeStep()) {
    const auto& span = requests.at(st.getColumn(0).getInt64());
    EXPECT_NEAR(span.first, static_cast<double>(st.getColumn(1).getInt64()) / 1000.0, 1e-3);
    EXPECT_NEAR(span.second, static_cast<double>(st.getColumn(2).getInt64()) / 1000.0, 1e-3);
    ++checked;
  }
  EXPECT_EQ(checked, summary["requests_completed"].get<int>());
  EXPECT_GE(prefill_tokens, summary["prompt_tokens"].get<int64_t>());
}

// A request whose client gave up is an instant event "timed_out" when the engine let go of it.
TEST(TimelineTest, TimedOutRequestsAreMarkedWhenTheyLeave) {
  TempDir dir;
  const nlohmann::json j = run_with_timeline(dir, {"--set", "workload.client_timeout_s=0.2"});
  ASSERT_GT(j["summary"]["requests_timed_out"].get<int64_t>(), 0);
  std::map<int64_t, double> marked;  // request -> ts
  for (const auto& e : j["traceEvents"])
    if (e["ph"] == "i" && e["name"] == "timed_out") marked[e["args"]["request"].get<int64_t>()] = e["ts"].get<double>();
  EXPECT_EQ(static_cast<int64_t>(marked.size()), j["summary"]["requests_timed_out"].get<int64_t>());
  SQLite::Database db(dir.file("r.db"), SQLite::OPEN_READONLY);
  SQLite::Statement st(db, "SELECT request_id, engine_finish_ns FROM requests WHERE outcome = 'timed_out'");
  while (st.executeStep())
    EXPECT_NEAR(marked.at(st.getColumn(0).getInt64()), static_cast<double>(st.getColumn(1).getInt64()) / 1000.0, 1e-3);
}

TEST(TimelineTest, TheEventCapBoundsTheFileAndSaysSo) {
  TempDir dir;
  const nlohmann::json full = run_with_timeline(dir, {});
  const int64_t all = full["otherData"]["events_kept"];
  const nlohmann::json capped = run_with_timeline(dir, {"--timeline-max-events", "500"});
  EXPECT_EQ(capped["otherData"]["events_kept"], 500);
  EXPECT_EQ(capped["otherData"]["events_dropped"].get<int64_t>() + 500, all);
  EXPECT_NE(capped["otherData"]["note"].get<std::string>().find("truncated"), std::string::npos);
  int64_t non_metadata = 0;
  for (const auto& e : capped["traceEvents"])
    if (e["ph"] != "M") ++non_metadata;
  EXPECT_EQ(non_metadata, 500);
  // The capped run's results are the full run's.
  EXPECT_EQ(capped["summary"]["ttft_ms"]["p99"], full["summary"]["ttft_ms"]["p99"]);
}

TEST(TimelineTest, DisaggregatedRequestsSpanTheirPrefillAndDecodeReplicas) {
  TempDir dir;
  std::string config = kConfig;
  config.replace(config.find("[cluster]\nreplicas = 3\n"), 22,
                 "[cluster.prefill]\nreplicas = 1\n[cluster.decode]\nreplicas = 2\n");
  std::ofstream(dir.file("pd.toml")) << config;
  const std::string path = dir.file("pd.toml"), out_file = dir.file("pd.json");
  const char* argv[] = {"servesim", "run", path.c_str(), "--no-db", "--json", "--timeline", out_file.c_str()};
  std::ostringstream out, err;
  ASSERT_EQ(run_cli(7, argv, out, err), 0) << err.str();
  std::ifstream in(out_file);
  const nlohmann::json j = nlohmann::json::parse(in);
  const nlohmann::json summary = nlohmann::json::parse(out.str());
  // Every async span opens and closes in one process; prefills on replica 0, decodes on 1 and 2.
  std::map<std::pair<int, int64_t>, int> open;
  int prefills = 0, decodes = 0, transfers = 0, whole = 0;  // whole: one output token, no hand-off
  for (const auto& e : j["traceEvents"]) {
    const std::string ph = e["ph"];
    if (ph == "X" && e["cat"] == "kv_transfer") ++transfers;
    if (ph != "b" && ph != "e") continue;
    open[{e["pid"].get<int>(), e["id"].get<int64_t>()}] += ph == "b" ? 1 : -1;
    const std::string name = e["name"];
    if (ph == "b" && name.find(" prefill") != std::string::npos) {
      ++prefills;
      EXPECT_EQ(e["pid"], 0);
    }
    if (ph == "b" && name.rfind("request ", 0) == 0 && name.find(' ', 8) == std::string::npos) ++whole;
    if (ph == "b" && name.find(" decode") != std::string::npos) {
      ++decodes;
      EXPECT_NE(e["pid"], 0);
    }
  }
  for (const auto& [key, depth] : open) EXPECT_EQ(depth, 0) << "replica " << key.first << " request " << key.second;
  EXPECT_GT(prefills, 0);
  EXPECT_EQ(prefills + whole, summary["requests_completed"].get<int>());
  EXPECT_EQ(decodes, prefills);
  EXPECT_EQ(transfers, prefills);
  EXPECT_EQ(j["otherData"]["events_dropped"], 0);
}

TEST(TimelineTest, AnUnwritablePathIsAnError) {
  TempDir dir;
  const std::string config = dir.file("c.toml");
  std::ofstream(config) << kConfig;
  const std::string bad = dir.file("no/such/dir/t.json");
  const char* argv[] = {"servesim", "run", config.c_str(), "--no-db", "--timeline", bad.c_str()};
  std::ostringstream out, err;
  EXPECT_EQ(run_cli(6, argv, out, err), 1);
  EXPECT_NE(err.str().find("t.json: cannot write a servesim timeline"), std::string::npos) << err.str();
}

}  // namespace
}  // namespace servesim::experiments
