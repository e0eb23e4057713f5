// servesim bench: the fixed speed scenarios, each repeated in a fresh process (so that its peak
// memory is its own), reporting the median wall time.
#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "experiments/bench.h"
#include "experiments/cli/command.h"
#include "experiments/experiment.h"
#include "experiments/process.h"
#include "sim/core/error.h"

namespace servesim::experiments {
namespace po = boost::program_options;
namespace {

nlohmann::json sample_json(const BenchSample& b) {
  nlohmann::json j = {{"wall_seconds", b.wall_seconds}, {"requests", b.requests},     {"iterations", b.iterations},
          {"events", b.events},             {"sim_seconds", b.sim_seconds}, {"peak_rss_mib", b.peak_rss_mib},
          {"percentiles", b.percentiles}, {"runs", b.runs},             {"configurations", b.configurations}};
  if (b.cpu_seconds > 0) j["cpu_seconds"] = b.cpu_seconds;  // S5 only
  return j;
}

// One repetition in a child process: its stdout is one JSON object; what it says on stderr (a
// missing trace, ...) is passed on to `err`.
BenchSample run_child(const std::string& scenario, const std::string& traces, int64_t requests,
                      const std::string& experiments, std::ostream& err, int jobs = 0) {
  const std::string self = self_executable();
  if (self.empty()) throw core::Error("bench: cannot find its own executable (/proc/self/exe)");
  std::vector<std::string> argv = {self, "bench", "--child", "--scenario", scenario, "--traces", traces,
                                   "--experiments", experiments};
  if (requests > 0) argv.insert(argv.end(), {"--requests", std::to_string(requests)});
  if (jobs > 0) argv.insert(argv.end(), {"--jobs", std::to_string(jobs)});
  const ProcessResult child = run_process(argv);
  err << child.err;
  if (child.exit_code != 0) throw core::Error("bench: scenario " + scenario + " failed");
  const auto j = nlohmann::json::parse(child.out);
  BenchSample b;
  b.wall_seconds = j["wall_seconds"];
  b.requests = j["requests"];
  b.iterations = j["iterations"];
  b.events = j["events"];
  b.sim_seconds = j["sim_seconds"];
  b.peak_rss_mib = j["peak_rss_mib"];
  if (j.contains("percentiles")) b.percentiles = j["percentiles"];
  if (j.contains("runs")) b.runs = j["runs"];
  if (j.contains("configurations")) b.configurations = j["configurations"];
  if (j.contains("cpu_seconds")) b.cpu_seconds = j["cpu_seconds"];
  return b;
}

int cmd_bench(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  po::options_description opts("servesim bench options");
  std::vector<std::string> scenarios;
  std::string traces = "../shared/traces";
  int repeat = 3;
  int64_t requests = 0;
  std::string experiments = "experiments";
  int jobs = 0;
  opts.add_options()("help,h", "this help")(
      "scenario", po::value<std::vector<std::string>>(&scenarios)->composing(),
      "S1 ... S7 (repeatable; default all but S6)")("repeat", po::value<int>(&repeat)->default_value(3),
                                                     "runs per scenario; the median wall time is reported")(
      "requests", po::value<int64_t>(&requests), "override the scenario's request count (S1, S4, S6)")(
      "traces", po::value<std::string>(&traces)->default_value("../shared/traces"),
      "directory holding azure-2023/ and mooncake-fast25/")(
      "experiments", po::value<std::string>(&experiments)->default_value("experiments"),
      "directory holding sweeps/bench64.toml (S5) and sweeps/bench_capacity.toml (S7)")(
      "jobs", po::value<int>(&jobs), "internal: S5's thread count in --child")("json", "one JSON object per scenario")(
      "child", "internal: run one repetition in this process");
  const po::variables_map vm = parse_options(args, opts);
  if (vm.count("help")) {
    out << "usage: servesim bench [--scenario S1 ...] [--repeat N] [--requests N] [--traces DIR] [--json]\n\n"
        << opts << "\nscenarios:\n";
    for (const auto& s : bench_scenarios()) out << "  " << s.name << "  " << s.description << "\n";
    out << "  S5  a 64-point sweep (experiments/sweeps/bench64.toml) with --jobs 1 and --jobs 2: the speed-up\n";
    out << "  S7  a capacity search over 8 configurations of the Azure conv trace "
           "(experiments/sweeps/bench_capacity.toml), one thread\n";
    return 0;
  }
  require_option("--repeat", repeat, 1, 1000, "repetitions of each scenario");
  if (vm.count("requests")) require_option("--requests", static_cast<double>(requests), 1, 1e9, "requests");
  if (vm.count("jobs")) resolve_jobs(jobs);
  if (scenarios.empty()) {
    // S6 (100 M requests, minutes) only when named.
    for (const auto& s : bench_scenarios())
      if (s.name != "S6") scenarios.push_back(s.name);
    scenarios.push_back("S5");
    scenarios.push_back("S7");
  }
  for (const auto& name : scenarios)
    if (name != "S5" && name != "S7" && !find_bench_scenario(name))
      throw UsageError("unknown scenario '" + name + "'; scenarios: S1, S2, S3, S4, S5, S6, S7");

  if (vm.count("child")) {
    if (scenarios.size() != 1) throw UsageError("--child runs exactly one scenario");
    const BenchSample b = scenarios[0] == "S5"   ? run_bench_sweep(experiments, std::max(1, jobs))
                          : scenarios[0] == "S7" ? run_bench_capacity(experiments)
                                                 : run_bench_scenario(*find_bench_scenario(scenarios[0]), traces, requests);
    out << sample_json(b).dump() << "\n";
    return 0;
  }

  const bool json = vm.count("json") > 0;
  if (!json)
    out << "scenario   requests   iterations   wall s (median of " << repeat
        << ")   sim req/s   iterations/s   peak RSS MiB\n";
  int failures = 0;
  auto median = [](std::vector<BenchSample> v) {
    std::sort(v.begin(), v.end(), [](const BenchSample& a, const BenchSample& b) { return a.wall_seconds < b.wall_seconds; });
    BenchSample m = v[v.size() / 2];
    for (const auto& s : v) m.peak_rss_mib = std::max(m.peak_rss_mib, s.peak_rss_mib);
    return m;
  };
  for (const auto& name : scenarios) {
    if (name == "S5") {
      // The same 64-point sweep with one thread and with two: the speed-up is the figure.
      std::vector<BenchSample> one, two;
      try {
        for (int i = 0; i < repeat; ++i) {
          one.push_back(run_child(name, traces, 0, experiments, err, 1));
          two.push_back(run_child(name, traces, 0, experiments, err, 2));
        }
      } catch (const core::Error& e) {
        err << "servesim bench: S5: " << e.what() << "\n";
        if (!json) out << "S5         skipped (see stderr)\n";
        ++failures;
        continue;
      }
      const BenchSample m1 = median(one), m2 = median(two);
      const double speedup = m1.wall_seconds / m2.wall_seconds;
      // What two idle cores could give: the CPU work of --jobs 2 spread over both, against --jobs 1's.
      const double cpu_bound = m2.cpu_seconds > 0 ? 2 * m1.cpu_seconds / m2.cpu_seconds : 0;
      if (json) {
        nlohmann::json j = sample_json(m2);
        j["scenario"] = "S5";
        j["repeat"] = repeat;
        j["wall_seconds_jobs1"] = m1.wall_seconds;
        j["speedup_jobs2_vs_jobs1"] = speedup;
        j["cpu_seconds_jobs1"] = m1.cpu_seconds;
        j["speedup_bound_from_cpu"] = cpu_bound;
        out << j.dump() << "\n";
      } else {
        out << "S5         " << grouped(m2.requests) << " requests in 64 points: --jobs 1 " << fixed(m1.wall_seconds, 3)
            << " s, --jobs 2 " << fixed(m2.wall_seconds, 3) << " s, speed-up " << fixed(speedup, 2) << "x, peak RSS "
            << fixed(std::max(m1.peak_rss_mib, m2.peak_rss_mib), 1) << " MiB\n"
            << "           CPU (user + sys) --jobs 1 " << fixed(m1.cpu_seconds, 3) << " s, --jobs 2 "
            << fixed(m2.cpu_seconds, 3) << " s: 2 x CPU1 / CPU2 = " << fixed(cpu_bound, 2)
            << "x (the speed-up two idle cores give when nothing is serial)\n";
      }
      continue;
    }
    if (name == "S7") {
      std::vector<BenchSample> samples;
      try {
        for (int i = 0; i < repeat; ++i) samples.push_back(run_child(name, traces, 0, experiments, err));
      } catch (const core::Error& e) {
        err << "servesim bench: S7: " << e.what() << "\n";
        if (!json) out << "S7         skipped (see stderr)\n";
        ++failures;
        continue;
      }
      const BenchSample m = median(samples);
      if (json) {
        nlohmann::json j = sample_json(m);
        j["scenario"] = "S7";
        j["repeat"] = repeat;
        out << j.dump() << "\n";
      } else {
        out << "S7         capacity search, " << m.configurations << " configurations, " << m.runs
            << " simulations: " << fixed(m.wall_seconds, 3) << " s, peak RSS " << fixed(m.peak_rss_mib, 1) << " MiB\n";
      }
      continue;
    }
    std::vector<BenchSample> samples;
    try {
      for (int i = 0; i < repeat; ++i) samples.push_back(run_child(name, traces, requests, experiments, err));
    } catch (const core::Error& e) {
      // Say clearly why (a missing trace), go on with the others.
      err << "servesim bench: " << name << ": " << e.what() << "\n";
      if (!json) out << std::left << std::setw(11) << name << "skipped (see stderr)\n";
      ++failures;
      continue;
    }
    const BenchSample m = median(samples);
    if (json) {
      nlohmann::json j = sample_json(m);
      j["scenario"] = name;
      j["repeat"] = repeat;
      j["requests_per_second"] = static_cast<double>(m.requests) / m.wall_seconds;
      j["iterations_per_second"] = static_cast<double>(m.iterations) / m.wall_seconds;
      std::vector<double> walls;
      for (const auto& s : samples) walls.push_back(s.wall_seconds);
      j["wall_seconds_all"] = walls;
      out << j.dump() << "\n";
    } else {
      out << std::left << std::setw(11) << name << std::right << std::setw(8) << grouped(m.requests)
          << std::setw(13) << grouped(m.iterations) << std::setw(21) << fixed(m.wall_seconds, 3) << std::setw(12)
          << grouped(static_cast<uint64_t>(static_cast<double>(m.requests) / m.wall_seconds)) << std::setw(15)
          << grouped(static_cast<uint64_t>(static_cast<double>(m.iterations) / m.wall_seconds)) << std::setw(15)
          << fixed(m.peak_rss_mib, 1) << (m.percentiles == "exact" ? "" : "   percentiles: " + m.percentiles) << "\n";
    }
  }
  return failures == 0 ? 0 : 1;
}

const bool kRegistered = register_command(
    {"bench", "[--scenario S1|S2|S3|S4|S5|S6|S7 ...] [--repeat N] [--requests N] [--traces DIR] [--json]",
     "the fixed speed scenarios, each run --repeat times in a fresh process: median wall time, simulated\n"
     "requests and iterations per second, peak RSS",
     cmd_bench});

}  // namespace
}  // namespace servesim::experiments
