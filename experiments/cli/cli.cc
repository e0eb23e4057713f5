#include "experiments/cli/cli.h"

#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "experiments/run.h"
#include "sim/core/error.h"
#include "sim/core/format.h"
#include "sim/core/params.h"

namespace servesim::experiments {
namespace po = boost::program_options;

namespace {

const char* kUsage =
    "usage: servesim <command> [options]\n"
    "\n"
    "commands:\n"
    "  run CONFIG.toml [--set section.key=value ...] [--db FILE] [--no-db] [--csv DIR] [--json]\n"
    "        simulate the serving cluster a configuration describes; print a summary and write\n"
    "        the results (runs, requests, replica_timeseries) to the SQLite database\n"
    "  list [routers|schedulers|workloads|models|gpus|cost_models|length_distributions]\n"
    "        registered kinds and every parameter: type, default, unit, description\n"
    "\n"
    "options:\n"
    "  -h, --help     this help (servesim <command> --help for a command's options)\n"
    "  --version      print the version\n";

// A usage problem (bad flags); exit code 2 like configuration errors.
class UsageError : public core::Error {
 public:
  using core::Error::Error;
};

std::string fixed(double v, int digits) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(digits) << v;
  return s.str();
}

std::string grouped(uint64_t v) {
  std::string digits = std::to_string(v), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string percent(double fraction) { return fixed(fraction * 100.0, 1) + "%"; }

// ---- list ----------------------------------------------------------------------------------------

void print_params(std::ostream& out, const std::vector<core::ParamSpec>& params, const std::string& indent) {
  if (params.empty()) {
    out << indent << "(no parameters)\n";
    return;
  }
  size_t w_name = 4, w_type = 4, w_def = 7, w_unit = 4;
  for (const auto& p : params) {
    w_name = std::max(w_name, p.name.size());
    w_type = std::max(w_type, p.type_name().size());
    w_def = std::max(w_def, p.default_str().size());
    w_unit = std::max(w_unit, p.unit.size());
  }
  auto row = [&](const std::string& a, const std::string& b, const std::string& c, const std::string& d,
                 const std::string& e) {
    out << indent << std::left << std::setw(static_cast<int>(w_name)) << a << "  " << std::setw(static_cast<int>(w_type))
        << b << "  " << std::setw(static_cast<int>(w_def)) << c << "  " << std::setw(static_cast<int>(w_unit)) << d
        << "  " << e << "\n";
  };
  row("name", "type", "default", "unit", "description");
  for (const auto& p : params) {
    std::string desc = p.description;
    if (p.type == core::ParamType::kSection) desc += " [" + p.family + "]";
    const std::string range = p.range_str();
    if (!range.empty()) desc += " (" + range + ")";
    row(p.name, p.type_name(), p.default_str(), p.unit, desc);
  }
}

const core::KindFamily* family_named(const std::string& name) {
  if (const auto* f = core::find_family(name)) return f;
  if (const auto* f = core::find_family(name + "s")) return f;  // "router" -> "routers"
  return nullptr;
}

int cmd_list(const std::vector<std::string>& args, std::ostream& out) {
  if (args.size() > 1) throw UsageError("list takes at most one argument, the kind family to show");
  if (args.empty()) {
    out << "kind families (servesim list FAMILY shows each kind's parameters):\n";
    for (const auto* f : core::all_families()) {
      out << "  " << std::left << std::setw(22) << f->name() << f->description() << "\n      ";
      const auto names = f->kind_names();
      for (size_t i = 0; i < names.size(); ++i) out << (i ? ", " : "") << names[i];
      out << "\n";
    }
    out << "\nrun configuration sections (top level of CONFIG.toml):\n";
    print_params(out, run_schema(), "  ");
    for (const auto& p : run_schema()) {
      if (p.type != core::ParamType::kTable) continue;
      out << "\n[" << p.name << "] " << p.description << "\n";
      print_params(out, p.fields, "  ");
    }
    return 0;
  }
  const core::KindFamily* family = family_named(args[0]);
  if (!family) {
    std::string valid;
    for (const auto* f : core::all_families()) valid += (valid.empty() ? "" : ", ") + f->name();
    throw UsageError("unknown kind family '" + args[0] + "'; valid: " + valid);
  }
  out << family->name() << ": " << family->description() << "\n";
  for (const auto* kind : family->kinds()) {
    out << "\n" << kind->name << "\n  " << kind->description << "\n";
    print_params(out, kind->params, "  ");
  }
  return 0;
}

// ---- run -----------------------------------------------------------------------------------------

void print_summary(std::ostream& out, const RunResult& r, const std::string& config_path, const std::string& db,
                   const std::string& csv) {
  const auto& s = r.summary;
  out << "servesim " << SERVESIM_VERSION << "  " << config_path << "  (config " << r.info.config_hash << ", seed "
      << r.info.seed << ")\n";
  out << "cluster      " << r.replicas << " x " << r.model_kind << " on " << r.gpu_kind << " (TP " << r.tensor_parallel
      << ", " << grouped(static_cast<uint64_t>(r.kv_blocks_per_replica)) << " KV blocks of " << r.block_size
      << " tokens each), router " << r.router_kind << ", scheduler " << r.scheduler_kind << "\n";
  out << "workload     " << r.workload_kind << ": " << grouped(s.requests_total) << " requests, "
      << grouped(s.requests_completed) << " completed, " << grouped(s.requests_rejected) << " rejected ("
      << s.rejected_context << " over the context, " << s.rejected_kv_capacity << " over the KV capacity), "
      << grouped(s.preemptions) << " preemptions\n";
  const double eps = s.wall_seconds > 0 ? static_cast<double>(s.events) / s.wall_seconds : 0;
  out << "simulated    " << fixed(s.sim_seconds, 1) << " s in " << fixed(s.wall_seconds, 3) << " s wall ("
      << grouped(s.events) << " events, " << grouped(static_cast<uint64_t>(eps)) << " events/s, "
      << grouped(s.iterations) << " iterations)\n";
  out << "\nlatency (ms)      mean        p50        p90        p99\n";
  auto lat = [&](const char* name, const metrics::LatencyStats& l) {
    out << "  " << std::left << std::setw(8) << name << std::right;
    for (double v : {l.mean, l.p50, l.p90, l.p99}) out << std::setw(11) << fixed(v, 2);
    out << "\n";
  };
  lat("TTFT", s.ttft_ms);
  lat("TPOT", s.tpot_ms);
  lat("ITL", s.itl_ms);
  lat("E2E", s.e2e_ms);
  out << "\nthroughput   " << fixed(s.throughput_req_s, 3) << " req/s, " << fixed(s.throughput_output_tok_s, 1)
      << " output tok/s\n";
  std::string limits;
  if (r.slo.ttft_ms) limits += "TTFT <= " + core::format_double(*r.slo.ttft_ms) + " ms";
  if (r.slo.tpot_ms) limits += std::string(limits.empty() ? "" : ", ") + "TPOT <= " + core::format_double(*r.slo.tpot_ms) + " ms";
  if (r.slo.e2e_ms) limits += std::string(limits.empty() ? "" : ", ") + "E2E <= " + core::format_double(*r.slo.e2e_ms) + " ms";
  out << "goodput      " << fixed(s.goodput_req_s, 3) << " req/s under " << (limits.empty() ? "no SLO" : limits)
      << " (SLO attainment " << percent(s.slo_attainment) << ")\n";
  out << "cost         $" << fixed(s.cost_usd_per_mtok_output, 4) << " per 1M output tokens ("
      << fixed(s.gpu_hours, 3) << " GPU-hours at $" << fixed(r.usd_per_gpu_hour, 2) << "/h = $" << fixed(s.cost_usd, 2)
      << ")\n";
  out << "utilisation  MFU " << percent(s.mfu_mean) << ", MBU " << percent(s.mbu_mean) << ", KV cache "
      << percent(s.kv_util_mean) << ", mean batch " << fixed(s.mean_batch_size, 1) << "\n";
  if (!db.empty()) out << "results      run " << r.info.run_id << " in " << db << "\n";
  if (!csv.empty()) out << "csv          " << csv << "/{runs,requests,replica_timeseries}.csv\n";
}

nlohmann::ordered_json summary_json(const RunResult& r, const std::string& db) {
  const auto& s = r.summary;
  nlohmann::ordered_json j;
  j["run_id"] = r.info.run_id;
  j["config_hash"] = r.info.config_hash;
  j["seed"] = r.info.seed;
  j["version"] = r.info.version;
  j["db"] = db.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(db);
  j["wall_seconds"] = s.wall_seconds;
  const std::pair<const char*, const metrics::LatencyStats*> latencies[] = {
      {"ttft_ms", &s.ttft_ms}, {"tpot_ms", &s.tpot_ms}, {"itl_ms", &s.itl_ms}, {"e2e_ms", &s.e2e_ms}};
  // Everything the database stores, with each latency's statistics as one nested object.
  for (const auto& v : metrics::flatten(s)) {
    bool is_latency = false;
    for (const auto& [prefix, stats] : latencies) {
      if (v.name.rfind(prefix, 0) != 0) continue;
      is_latency = true;
      if (!j.contains(prefix))
        j[prefix] = {{"mean", stats->mean}, {"p50", stats->p50}, {"p90", stats->p90}, {"p99", stats->p99}};
    }
    if (is_latency) continue;
    if (v.integer) j[v.name] = static_cast<int64_t>(v.value); else j[v.name] = v.value;
  }
  return j;
}

int cmd_run(const std::vector<std::string>& args, std::ostream& out) {
  po::options_description opts("servesim run options");
  std::vector<std::string> sets;
  std::string db = "results.db", csv, config;
  opts.add_options()
      ("help,h", "this help")
      ("config", po::value<std::string>(&config), "the run configuration (TOML)")
      ("set", po::value<std::vector<std::string>>(&sets)->composing(),
       "override one key, section.key=value (repeatable; TOML value syntax, bare words are strings)")
      ("db", po::value<std::string>(&db)->default_value("results.db"), "SQLite results database (created if missing)")
      ("no-db", "do not write a results database")
      ("csv", po::value<std::string>(&csv), "also write runs.csv, requests.csv, replica_timeseries.csv to this directory")
      ("json", "print the summary as one JSON object on stdout instead of the table");
  po::positional_options_description pos;
  pos.add("config", 1);
  po::variables_map vm;
  po::store(po::command_line_parser(args).options(opts).positional(pos).run(), vm);
  po::notify(vm);
  if (vm.count("help")) {
    out << "usage: servesim run CONFIG.toml [options]\n\n" << opts << "\n";
    return 0;
  }
  if (config.empty()) throw UsageError("run needs a configuration file: servesim run CONFIG.toml");
  if (vm.count("no-db")) db.clear();
  core::Params params = load_run_config(config, sets);
  RunResult result = run_simulation(params, RunOutputs{db, csv});
  if (vm.count("json")) {
    out << summary_json(result, db).dump() << "\n";
  } else {
    print_summary(out, result, config, db, csv);
  }
  return 0;
}

}  // namespace

int run_cli(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  std::vector<std::string> args(argv + (argc > 0 ? 1 : 0), argv + argc);
  try {
    if (args.empty()) {
      err << kUsage;
      return 2;
    }
    const std::string command = args[0];
    std::vector<std::string> rest(args.begin() + 1, args.end());
    if (command == "-h" || command == "--help" || command == "help") {
      out << kUsage;
      return 0;
    }
    if (command == "--version" || command == "version") {
      out << "servesim " << SERVESIM_VERSION << "\n";
      return 0;
    }
    if (command == "run") return cmd_run(rest, out);
    if (command == "list") return cmd_list(rest, out);
    throw UsageError("unknown command '" + command + "'; commands: run, list (servesim --help)");
  } catch (const UsageError& e) {
    err << "servesim: " << e.what() << "\n";
    return 2;
  } catch (const po::error& e) {
    err << "servesim: " << e.what() << " (servesim --help)\n";
    return 2;
  } catch (const core::ConfigError& e) {
    err << "servesim: configuration error: " << e.what() << "\n";
    return 2;
  } catch (const core::InputError& e) {
    err << "servesim: input error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    err << "servesim: error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace servesim::experiments
