// The results of the example experiments must not change when the simulator is made faster (issue 6):
// each example is run through the real binary into a fresh database, and a digest of the database's
// content is compared with the one recorded in tests/experiments/golden_results.txt.
//
// Volatile or location-dependent columns are left out of the digest: `config` (the configuration text
// names trace files by absolute path) and `version`. Everything the simulation computes is in it: every
// request row, every time-series sample, every per-replica statistic, every summary column.
//
// A deliberate change of results (a new metric, a model fix) re-records the digests:
//   SERVESIM_UPDATE_GOLDEN=1 build/tests/servesim_tests --gtest_filter='GoldenResultsTest.*'
// (with SERVESIM_SHARED_DIR, SERVESIM_SOURCE_DIR and SERVESIM_BIN set as meson test sets them), and
// the commit says why the numbers moved.
#include <gtest/gtest.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "sim/core/rng.h"
#include "tests/experiments/results_dump.h"
#include "tests/reliability/process.h"
#include "tests/test_paths.h"

namespace servesim::testing {
namespace {

namespace fs = std::filesystem;

struct Example {
  std::string name;                // the key in golden_results.txt
  std::vector<std::string> args;   // servesim arguments; the database goes after them
  bool needs_shared = false;       // reads a trace from ../shared
};

// Every example configuration in experiments/ (the 1M-request example capped at 200,000 requests so
// that the sanitizer build runs it in reasonable time; the cap keeps every mechanism it exercises).
std::vector<Example> examples() {
  return {
      {"quickstart", {"run", "experiments/quickstart.toml"}, false},
      {"azure_conv", {"run", "experiments/azure_conv.toml"}, true},
      {"poisson_1m_64_first_200k",
       {"run", "experiments/poisson_1m_64.toml", "--set", "workload.max_requests=200000"}, false},
      {"policies_azure_pd", {"run", "experiments/policies/azure_pd.toml"}, true},
      {"policies_azure_schedulers", {"run", "experiments/policies/azure_schedulers.toml"}, true},
      {"policies_mooncake_routers", {"run", "experiments/policies/mooncake_routers.toml"}, true},
      {"sweep_smoke", {"sweep", "experiments/sweeps/smoke.toml", "--jobs", "2", "--quiet"}, false},
      // Issue 12's load shapes: a prompt pool in draining stages with a client time-out, and a
      // closed loop over a trace's lengths (that run's time-out at 2 s, so that some requests fail).
      {"workloads_shared_prefix_stages", {"run", "experiments/workloads/shared_prefix_stages.toml"}, false},
      {"workloads_closed_loop_azure_lengths",
       {"run", "experiments/workloads/closed_loop_azure_lengths.toml", "--set", "workload.client_timeout_s=2"},
       true},
      // Issue 17's day: a Poisson rate following a diurnal sinusoid over 24 simulated hours.
      {"workloads_diurnal", {"run", "experiments/workloads/diurnal.toml"}, false},
      // MoE, MLA and fp8 models, under the invariant checker.
      {"sweep_models", {"sweep", "experiments/sweeps/models.toml", "--jobs", "2", "--quiet", "--check"}, false},
      // Speculative decoding (MTP, a draft model) across load on DeepSeek-V3, under the checker.
      {"sweep_speculative_decoding",
       {"sweep", "experiments/sweeps/speculative_decoding.toml", "--jobs", "2", "--quiet", "--check"}, false},
      // A hybrid model (linear-attention and full layers) against a dense one: capacity search.
      {"capacity_hybrid_vs_dense", {"capacity", "experiments/sweeps/hybrid_vs_dense.toml", "--jobs", "2", "--quiet"},
       false},
      // Expert parallelism across nodes (prefill EP32, decode EP72), under the invariant checker.
      {"deepseek_v3_wide_ep", {"run", "experiments/deepseek_v3_wide_ep.toml", "--check"}, false},
      // Issue 16: the Mooncake trace with a host-DRAM KV tier per replica, under the checker.
      {"kvtier_mooncake_host_tier", {"run", "experiments/kvtier/mooncake_host_tier.toml", "--check"}, true},
      // Issue 16, one fabric: PD on two DGX H100 nodes, the prefill replicas' host tier's loads and
      // stores as flows beside the PD transfers, under the checker.
      {"kvtier_mooncake_pd_fabric",
       {"run", "experiments/kvtier/mooncake_pd_fabric.toml", "--set", "kv_tiers.host.capacity_gb=256", "--check"}, true},
  };
}

// The database's content (config text and version left out) as a digest and a row count.
std::pair<uint64_t, int64_t> digest(const std::string& path) {
  int64_t rows = 0;
  const std::string text = dump_results(path, {"config", "version"}, &rows);
  return {core::fnv1a64(text), rows};
}

std::string golden_path() { return source_dir() + "/tests/experiments/golden_results.txt"; }

std::map<std::string, std::string> read_golden() {
  std::map<std::string, std::string> m;
  std::ifstream in(golden_path());
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream s(line);
    std::string name, value;
    s >> name;
    std::getline(s >> std::ws, value);
    m[name] = value;
  }
  return m;
}

TEST(GoldenResultsTest, ExampleExperimentsWriteTheRecordedResults) {
  ASSERT_FALSE(source_dir().empty());
  ASSERT_FALSE(servesim_bin().empty());
  const bool update = std::getenv("SERVESIM_UPDATE_GOLDEN") != nullptr;
  const bool have_shared = fs::exists(shared_file("traces/azure-2023/AzureLLMInferenceTrace_conv.csv"));
  const auto golden = read_golden();
  const fs::path work = fs::temp_directory_path() / ("servesim-golden-" + std::to_string(::getpid()));
  fs::remove_all(work);
  fs::create_directories(work);
  std::map<std::string, std::string> measured;
  for (const auto& ex : examples()) {
    SCOPED_TRACE(ex.name);
    if (ex.needs_shared && !have_shared) {
      ADD_FAILURE() << "needs ../shared/traces (SERVESIM_SHARED_DIR=" << shared_dir() << ")";
      continue;
    }
    const std::string db = (work / (ex.name + ".db")).string();
    std::vector<std::string> argv = {servesim_bin()};
    argv.insert(argv.end(), ex.args.begin(), ex.args.end());
    argv.insert(argv.end(), {"--db", db});
    if (ex.args[0] == "run") argv.push_back("--json");  // no table on stdout to read
    const ProcessResult r = run_process(argv, source_dir(), 600);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto [h, rows] = digest(db);
    char text[64];
    std::snprintf(text, sizeof text, "%016" PRIx64 " %" PRId64 " rows", h, rows);
    measured[ex.name] = text;
    if (!update) {
      const auto it = golden.find(ex.name);
      ASSERT_NE(it, golden.end()) << "no recorded digest in " << golden_path() << " (record with SERVESIM_UPDATE_GOLDEN=1)";
      EXPECT_EQ(measured[ex.name], it->second)
          << "the results of " << ex.name << " changed; if on purpose, re-record (see the top of golden_test.cc)";
    }
  }
  fs::remove_all(work);
  if (update) {
    std::ofstream out(golden_path());
    out << "# Digests of the example experiments' results databases (tests/experiments/golden_test.cc).\n";
    for (const auto& [name, value] : measured) out << name << " " << value << "\n";
  }
}

}  // namespace
}  // namespace servesim::testing
