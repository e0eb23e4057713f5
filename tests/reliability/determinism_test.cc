// Determinism across configurations, processes, threads, --jobs and shards: the same configuration
// and seed give the same bytes. Runs go through the real binary (separate processes, so nothing can
// depend on addresses or on state left by an earlier run) and through run_simulation in concurrent
// threads (nothing may be shared between simulations).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "experiments/run.h"
#include "sim/core/config.h"
#include "sim/core/format.h"
#include "tests/experiments/results_dump.h"
#include "tests/reliability/process.h"
#include "tests/test_paths.h"

namespace servesim::testing {
namespace {

namespace fs = std::filesystem;

constexpr double kTimeoutS = 300;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string trace(const std::string& rel) { return core::toml_quote(shared_file("traces/" + rel)); }

const char* kLengths =
    "[workload.prompt]\nkind = \"lognormal\"\nmean = 600\nsd = 500\n"
    "[workload.output]\nkind = \"uniform\"\nmin = 1\nmax = 300\n";

// One configuration per mechanism: generators, both trace formats, every router family, both
// schedulers, prefix caching, swapping, disaggregation, tight KV (preemptions), load stages,
// closed-loop clients and client time-outs, speculative decoding, expert parallelism.
std::vector<std::pair<std::string, std::string>> configurations() {
  const std::string model = "[model]\nkind = \"llama-3-8b\"\n[gpu]\nkind = \"h100-sxm\"\n";
  return {
      {"poisson_round_robin_continuous",
       "seed = 11\n[workload]\nkind = \"poisson\"\nrate = 40\nmax_requests = 300\n" + std::string(kLengths) + model +
           "[cluster]\nreplicas = 3\n[router]\nkind = \"round_robin\"\n"},
      {"gamma_least_outstanding_chunked_tight_kv",
       "seed = 12\n[workload]\nkind = \"gamma\"\nrate = 60\ncv = 3\nmax_requests = 300\n" + std::string(kLengths) +
           model +
           "[cluster]\nreplicas = 2\nactivation_reserve_gib = 53\n[router]\nkind = \"least_outstanding\"\n"
           "[scheduler]\nkind = \"chunked\"\n[output]\nsample_interval_ms = 100\n"},
      {"azure_random_swap",
       "seed = 13\n[workload]\nkind = \"azure_csv\"\npath = " + trace("azure-2023/AzureLLMInferenceTrace_code.csv") +
           "\nmax_requests = 300\nrate_scale = 4\n" + model +
           "[cluster]\nreplicas = 2\nactivation_reserve_gib = 54\npreemption = \"swap\"\nswap_space_gib = 0.5\n"
           "[router]\nkind = \"random\"\n"},
      {"mooncake_prefix_affinity_prefix_caching",
       "seed = 14\n[workload]\nkind = \"mooncake_jsonl\"\npath = " +
           trace("mooncake-fast25/conversation_trace.jsonl") + "\nmax_requests = 300\nrate_scale = 2\n" + model +
           "[cluster]\nreplicas = 4\nprefix_caching = true\n[router]\nkind = \"prefix_affinity\"\n"},
      {"sessions_power_of_two_prefix_caching",
       "seed = 15\n[workload]\nkind = \"sessions\"\nrate = 5\nmax_requests = 300\n"
       "[workload.turns]\nkind = \"uniform\"\nmin = 1\nmax = 6\n[workload.system_tokens]\nkind = \"fixed\"\nvalue = 800\n"
       "[workload.user]\nkind = \"uniform\"\nmin = 20\nmax = 300\n[workload.output]\nkind = \"uniform\"\nmin = 1\nmax = 200\n" +
           model + "[cluster]\nreplicas = 3\nprefix_caching = true\n[router]\nkind = \"power_of_two\"\n"},
      {"azure_disaggregated_consistent_hash",
       "seed = 16\n[workload]\nkind = \"azure_csv\"\npath = " + trace("azure-2023/AzureLLMInferenceTrace_conv.csv") +
           "\nmax_requests = 300\nrate_scale = 8\n" + model +
           "[cluster.prefill]\nreplicas = 2\n[cluster.decode]\nreplicas = 2\n[router]\nkind = \"consistent_hash\"\n"
           "[decode_router]\nkind = \"least_outstanding\"\n"},
      // Issue 12: a prompt pool in draining stages with prefix caching and client time-outs that fire;
      // closed-loop clients with think time and time-outs on a disaggregated cluster.
      {"shared_prefix_stages_timeouts",
       "seed = 17\n[workload]\nkind = \"shared_prefix\"\ngroups = 3\nprompts_per_group = 4\nsystem_prompt_len = 700\n"
       "question_len = 200\nclient_timeout_s = 1.5\n[workload.extra_tokens]\nkind = \"uniform\"\nmin = 1\nmax = 40\n"
       "[workload.output]\nkind = \"uniform\"\nmin = 20\nmax = 300\n[workload.arrival]\nkind = \"stages\"\n"
       "[[workload.arrival.stages]]\nrate = 20\nduration_s = 6\n[[workload.arrival.stages]]\nrate = 60\nduration_s = 3\n"
       "type = \"poisson\"\n" +
           model + "[cluster]\nreplicas = 2\nprefix_caching = true\nactivation_reserve_gib = 53\n"
                   "[router]\nkind = \"prefix_affinity\"\n[scheduler]\nkind = \"chunked\"\n"},
      {"closed_loop_disaggregated_timeouts",
       "seed = 18\n[workload]\nkind = \"synthetic\"\nclient_timeout_s = 0.8\n" + std::string(kLengths) +
           "[workload.arrival]\nkind = \"closed_loop\"\nconcurrency = 24\nrequests = 300\nthink_time_s = 0.05\n" +
           model + "[cluster.prefill]\nreplicas = 1\n[cluster.decode]\nreplicas = 1\n"},
      {"poisson_speculative_draft_head_chunked_tight_kv",
       "seed = 17\n[workload]\nkind = \"poisson\"\nrate = 40\nmax_requests = 300\n" + std::string(kLengths) + model +
           "[cluster]\nreplicas = 2\nactivation_reserve_gib = 53\n[router]\nkind = \"least_outstanding\"\n"
           "[scheduler]\nkind = \"chunked\"\n[decoding]\nkind = \"draft_head\"\nk_schedule = [4, 2]\n"
           "k_schedule_batch = [8, 64]\nacceptance = [0.8, 0.6]\n"},
      // Expert parallelism across nodes: prefill EP4 on two nodes of 2, decode EP8 on four, with
      // their all-to-all flows sharing links with the KV transfers.
      {"poisson_expert_parallel_disaggregated",
       "seed = 19\n[workload]\nkind = \"poisson\"\nrate = 30\nmax_requests = 300\n" + std::string(kLengths) +
           "[model]\nkind = \"mixtral-8x7b\"\n[gpu]\nkind = \"h100-sxm\"\n[network]\ngpus_per_node = 2\n"
           "[cluster.prefill]\nreplicas = 1\nexpert_parallel = 4\n[cluster.decode]\nreplicas = 1\nexpert_parallel = 8\n"
           "[moe]\nrouting_skew = 0.5\noverlap = \"two_batch\"\n"},
  };
}

ProcessResult servesim(const std::vector<std::string>& args, const fs::path& cwd) {
  std::vector<std::string> argv = {servesim_bin()};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_process(argv, cwd.string(), kTimeoutS);
}

TEST(DeterminismTest, EveryMechanismWritesTheSameBytesInSeparateProcessesAndConcurrentThreads) {
  ASSERT_FALSE(servesim_bin().empty());
  TempDir dir;
  const auto configs = configurations();
  for (const auto& [name, text] : configs) {
    SCOPED_TRACE(name);
    std::ofstream(fs::path(dir.path()) / (name + ".toml")) << text;
    for (const char* copy : {"a", "b"}) {
      const ProcessResult r = servesim({"run", name + ".toml", "--check", "--db", name + "-" + copy + ".db", "--csv",
                                        name + "-" + copy + "-csv"},
                                       dir.path());
      ASSERT_EQ(r.exit_code, 0) << r.err;
    }
    const fs::path d = dir.path();
    const std::string db = slurp(d / (name + "-a.db"));
    EXPECT_GT(db.size(), 20000u);
    EXPECT_TRUE(db == slurp(d / (name + "-b.db"))) << "two processes wrote different databases";
    for (const char* csv : {"runs.csv", "requests.csv", "replica_timeseries.csv"})
      EXPECT_TRUE(slurp(d / (name + "-a-csv") / csv) == slurp(d / (name + "-b-csv") / csv)) << csv;
  }
  // All configurations at once, one thread each, in this process: each database is the binary's.
  std::vector<std::thread> threads;
  std::vector<std::string> errors(configs.size());
  for (size_t i = 0; i < configs.size(); ++i) {
    threads.emplace_back([&, i] {
      try {
        const auto& [name, text] = configs[i];
        const core::Params p =
            core::parse_config(text, name + ".toml", experiments::run_schema(), {}, dir.path());
        experiments::RunOutputs out;
        out.db_path = dir.file(name + "-thread.db");
        out.check = true;
        experiments::run_simulation(p, out);
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < configs.size(); ++i) {
    SCOPED_TRACE(configs[i].first);
    EXPECT_EQ(errors[i], "");
    EXPECT_TRUE(slurp(dir.file(configs[i].first + "-thread.db")) == slurp(dir.file(configs[i].first + "-a.db")))
        << "a run in a thread beside others wrote a different database than the binary";
  }
}

// The sweep through the command line: --jobs 1 and --jobs 2 write the same bytes; three shards
// merged with `servesim merge` hold the same content as the whole sweep.
TEST(DeterminismTest, SweepIsTheSameForAnyJobsAndAnyShardSplitThroughTheCli) {
  TempDir dir;
  const fs::path d = dir.path();
  std::ofstream(d / "sweep.toml") << "name = \"determinism\"\nseeds = [1, 2]\n"
                                     "[base]\n"
                                  << "[base.workload]\nkind = \"poisson\"\nrate = 30\nmax_requests = 150\n"
                                     "[base.workload.prompt]\nkind = \"uniform\"\nmin = 10\nmax = 1500\n"
                                     "[base.workload.output]\nkind = \"uniform\"\nmin = 1\nmax = 200\n"
                                     "[base.model]\nkind = \"llama-3-8b\"\n[base.gpu]\nkind = \"h100-sxm\"\n"
                                     "[base.cluster]\nreplicas = 2\nactivation_reserve_gib = 53\n"
                                     "[[axis]]\nkey = \"router.kind\"\nvalues = [\"round_robin\", \"least_outstanding\", "
                                     "\"power_of_two\"]\n"
                                     "[[axis]]\nkey = \"scheduler.kind\"\nvalues = [\"continuous\", \"chunked\"]\n";
  for (const auto& [db, extra] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"jobs1.db", {"--jobs", "1"}},
           {"jobs2.db", {"--jobs", "2"}},
           {"shard0.db", {"--jobs", "2", "--shard", "0/3"}},
           {"shard1.db", {"--jobs", "1", "--shard", "1/3"}},
           {"shard2.db", {"--jobs", "2", "--shard", "2/3"}}}) {
    std::vector<std::string> args = {"sweep", "sweep.toml", "--db", db, "--quiet"};
    args.insert(args.end(), extra.begin(), extra.end());
    const ProcessResult r = servesim(args, d);
    ASSERT_EQ(r.exit_code, 0) << db << ": " << r.err;
  }
  const std::string whole = slurp(d / "jobs1.db");
  EXPECT_GT(whole.size(), 50000u);
  EXPECT_TRUE(whole == slurp(d / "jobs2.db")) << "--jobs 1 and --jobs 2 wrote different databases";
  const ProcessResult m = servesim({"merge", "merged.db", "shard2.db", "shard0.db", "shard1.db"}, d);
  ASSERT_EQ(m.exit_code, 0) << m.err;
  EXPECT_EQ(dump_results((d / "merged.db").string()), dump_results((d / "jobs1.db").string()));
}

}  // namespace
}  // namespace servesim::testing
