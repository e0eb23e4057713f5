#include "experiments/report.h"

#include <SQLiteCpp/SQLiteCpp.h>
#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <map>
#include <set>
#include <sstream>

#include "experiments/process.h"
#include "sim/core/error.h"
#include "sim/core/output_file.h"
#include "sim/core/format.h"

namespace servesim::experiments {
namespace {

namespace fs = std::filesystem;

constexpr size_t kMaxCdfPoints = 1500;
constexpr size_t kMaxSamplesPerReplica = 4000;
constexpr size_t kMaxRunRows = 500;

// Keys that do not make a configuration: the rate knob and the seeds.
bool is_rate_or_seed(const std::string& key) {
  return key == "seed" || key == "workload.seed" || key == "workload.rate" || key == "workload.rate_scale";
}

void flatten_toml(const toml::table& table, const std::string& prefix, std::map<std::string, std::string>& out) {
  for (const auto& [k, v] : table) {
    const std::string key = prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
    if (v.is_table()) {
      flatten_toml(*v.as_table(), key, out);
      continue;
    }
    std::ostringstream s;
    if (v.is_string()) s << *v.value<std::string>();
    else if (v.is_floating_point()) s << core::format_double(*v.value<double>());
    else if (v.is_integer()) s << *v.value<int64_t>();
    else if (v.is_boolean()) s << (*v.value<bool>() ? "true" : "false");
    else s << toml::toml_formatter(v);
    out[key] = s.str();
  }
}

std::string short_value(const std::string& v) {
  if (v.find('/') == std::string::npos) return v;
  return fs::path(v).filename().string();
}

std::string gp_string(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

std::string html(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string num(double v, int digits) {
  if (!std::isfinite(v)) return "-";
  std::ostringstream s;
  s << std::fixed << std::setprecision(digits) << v;
  return s.str();
}

std::string pct(double f) { return num(100 * f, 1) + "%"; }

constexpr const char* kIndexPrefix = "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>servesim report";

// Each file whole or not at all; an existing file is replaced only when it is the report's own kind
// (an index.html of another site, a .dat of another tool, stays).
void write_file(const fs::path& path, const std::string& text) {
  const std::string ext = path.extension().string();
  const core::KindTest kind = ext == ".html" ? core::starts_with(kIndexPrefix)
                              : ext == ".gp" ? core::starts_with("reset\n")
                                             : core::starts_with("# ");
  core::write_file_atomically(path.string(), "a servesim report file", kind, text);
}

}  // namespace

ReportData load_report(const ReportOptions& options) {
  ReportData data;
  data.db_path = options.db_path;
  data.experiment = read_experiment(options.db_path);
  std::map<int64_t, std::map<std::string, std::string>> leaves;
  std::map<int64_t, std::string> point_labels;  // run_id -> the experiment's label of its configuration
  try {
    SQLite::Database db(options.db_path, SQLite::OPEN_READONLY);
    db.exec("PRAGMA busy_timeout = 60000");
    if (!db.tableExists("runs")) throw core::Error(options.db_path + ": holds no runs table (not a servesim database)");
    SQLite::Statement st(db,
                         "SELECT run_id, seed, config, requests_total, requests_meeting_slo, goodput_req_s, "
                         "slo_attainment, ttft_ms_p50, ttft_ms_p90, ttft_ms_p99, tpot_ms_p50, tpot_ms_p90, tpot_ms_p99, "
                         "throughput_output_tok_s, cost_usd_per_mtok_output FROM runs ORDER BY run_id");
    while (st.executeStep()) {
      ReportRun r;
      r.run_id = st.getColumn(0).getInt64();
      r.seed = static_cast<uint64_t>(st.getColumn(1).getInt64());
      const std::string config = st.getColumn(2).getString();
      r.requests_total = static_cast<uint64_t>(st.getColumn(3).getInt64());
      r.requests_meeting_slo = static_cast<uint64_t>(st.getColumn(4).getInt64());
      r.goodput_req_s = st.getColumn(5).getDouble();
      r.slo_attainment = st.getColumn(6).getDouble();
      r.ttft_ms_p50 = st.getColumn(7).getDouble();
      r.ttft_ms_p90 = st.getColumn(8).getDouble();
      r.ttft_ms_p99 = st.getColumn(9).getDouble();
      r.tpot_ms_p50 = st.getColumn(10).getDouble();
      r.tpot_ms_p90 = st.getColumn(11).getDouble();
      r.tpot_ms_p99 = st.getColumn(12).getDouble();
      r.throughput_output_tok_s = st.getColumn(13).getDouble();
      r.cost_usd_per_mtok_output = st.getColumn(14).getDouble();
      std::map<std::string, std::string> flat;
      try {
        flatten_toml(toml::parse(config), "", flat);
      } catch (const toml::parse_error& e) {
        throw core::Error(options.db_path + ": run " + std::to_string(r.run_id) + " stores an unreadable configuration: " +
                          std::string(e.description()));
      }
      auto number = [&](const char* key) -> std::optional<double> {
        auto it = flat.find(key);
        if (it == flat.end()) return std::nullopt;
        return std::strtod(it->second.c_str(), nullptr);
      };
      const auto rate = number("workload.rate");
      const auto scale = number("workload.rate_scale");
      if (rate) r.knob = *rate * scale.value_or(1.0);
      else if (scale) r.knob = *scale;
      if (data.knob.empty()) data.knob = rate ? "workload.rate" : (scale ? "workload.rate_scale" : "");
      for (const auto& [k, v] : flat)
        if (!is_rate_or_seed(k)) r.configuration += k + "=" + v + "\n";
      leaves[r.run_id] = std::move(flat);
      data.runs.push_back(std::move(r));
    }
    SQLite::Statement arr(db, "SELECT run_id, COUNT(*), MIN(arrival_ns), MAX(arrival_ns) FROM requests GROUP BY run_id");
    std::map<int64_t, double> offered;
    while (arr.executeStep()) {
      const int64_t n = arr.getColumn(1).getInt64();
      const double span = static_cast<double>(arr.getColumn(3).getInt64() - arr.getColumn(2).getInt64()) / 1e9;
      if (n > 1 && span > 0) offered[arr.getColumn(0).getInt64()] = static_cast<double>(n - 1) / span;
    }
    for (auto& r : data.runs) r.offered_req_s = offered.count(r.run_id) ? offered[r.run_id] : 0;
    if (db.tableExists("points")) {
      SQLite::Statement pts(db, "SELECT run_id, configuration FROM points");
      while (pts.executeStep()) point_labels[pts.getColumn(0).getInt64()] = pts.getColumn(1).getString();
    }
  } catch (const core::Error&) {
    throw;
  } catch (const std::exception& e) {
    throw core::Error(options.db_path + ": cannot read the results: " + e.what());
  }
  if (data.runs.empty()) throw core::Error(options.db_path + ": holds no runs to report on");

  // Configurations, in order of first appearance, and the keys that tell them apart.
  std::vector<std::string> order;
  std::map<std::string, std::vector<size_t>> members;
  for (size_t i = 0; i < data.runs.size(); ++i) {
    auto& m = members[data.runs[i].configuration];
    if (m.empty()) order.push_back(data.runs[i].configuration);
    m.push_back(i);
  }
  std::set<std::string> varying;
  if (order.size() > 1) {
    std::set<std::string> keys;
    for (const auto& [id, flat] : leaves)
      for (const auto& [k, v] : flat) keys.insert(k);
    for (const auto& k : keys) {
      if (is_rate_or_seed(k)) continue;
      std::set<std::string> values;
      for (const auto& c : order) {
        const auto& flat = leaves[data.runs[members[c].front()].run_id];
        auto it = flat.find(k);
        values.insert(it == flat.end() ? "(unset)" : it->second);
      }
      if (values.size() > 1) varying.insert(k);
    }
  }
  for (const auto& c : order) {
    ReportSeries s;
    const auto& flat = leaves[data.runs[members[c].front()].run_id];
    for (const auto& k : varying) {
      auto it = flat.find(k);
      s.label += (s.label.empty() ? "" : " ") + k + "=" + (it == flat.end() ? "(unset)" : short_value(it->second));
    }
    if (s.label.empty()) s.label = data.experiment.name.empty() ? "all runs" : data.experiment.name;
    std::map<std::string, ReportPoint> by_knob;
    std::vector<std::string> knob_order;
    for (size_t i : members[c]) {
      const ReportRun& r = data.runs[i];
      const std::string key = r.knob ? core::format_double(*r.knob) : "";
      auto [it, inserted] = by_knob.try_emplace(key);
      if (inserted) knob_order.push_back(key);
      it->second.knob = r.knob;
      it->second.runs.push_back(i);
    }
    for (const auto& key : knob_order) {
      ReportPoint p = by_knob[key];
      uint64_t meeting = 0, total = 0;
      for (size_t i : p.runs) {
        p.offered_req_s += data.runs[i].offered_req_s;
        p.goodput_req_s += data.runs[i].goodput_req_s;
        meeting += data.runs[i].requests_meeting_slo;
        total += data.runs[i].requests_total;
      }
      p.offered_req_s /= static_cast<double>(p.runs.size());
      p.goodput_req_s /= static_cast<double>(p.runs.size());
      p.slo_attainment = total ? static_cast<double>(meeting) / static_cast<double>(total) : 0;
      s.points.push_back(std::move(p));
    }
    std::stable_sort(s.points.begin(), s.points.end(),
                     [](const ReportPoint& a, const ReportPoint& b) { return a.offered_req_s < b.offered_req_s; });
    data.series.push_back(std::move(s));
  }

  // An experiment's own labels (its axes' values or labels) when they tell the configurations apart.
  std::set<std::string> distinct;
  std::vector<std::string> from_points;
  for (const auto& c : order) {
    std::set<std::string> labels;
    for (size_t i : members[c]) {
      auto it = point_labels.find(data.runs[i].run_id);
      labels.insert(it == point_labels.end() ? "" : it->second);
    }
    from_points.push_back(labels.size() == 1 ? *labels.begin() : "");
    distinct.insert(from_points.back());
  }
  if (distinct.size() == order.size() && !distinct.count("") && (order.size() > 1 || from_points[0] != "(base)"))
    for (size_t i = 0; i < order.size(); ++i) data.series[i].label = from_points[i];

  // The reference rate: the median of every point's offered rate, unless given.
  std::vector<double> rates;
  for (const auto& s : data.series)
    for (const auto& p : s.points) rates.push_back(p.offered_req_s);
  std::sort(rates.begin(), rates.end());
  data.reference_rate = options.reference_rate.value_or(rates[rates.size() / 2]);
  for (auto& s : data.series) {
    const ReportPoint* best = &s.points.front();
    for (const auto& p : s.points)
      if (std::fabs(p.offered_req_s - data.reference_rate) < std::fabs(best->offered_req_s - data.reference_rate))
        best = &p;
    s.representative = *std::min_element(best->runs.begin(), best->runs.end());
  }
  return data;
}

std::vector<std::string> write_report(const ReportData& data, const ReportOptions& options) {
  const fs::path dir = fs::absolute(options.out_dir).lexically_normal();
  std::error_code ec;
  // The files a person may have put there are checked before anything is written.
  core::check_replaceable((dir / "index.html").string(), "a servesim report file", core::starts_with(kIndexPrefix));
  core::check_replaceable((dir / "plots.gp").string(), "a servesim report file", core::starts_with("reset\n"));
  fs::create_directories(dir / "data", ec);
  if (ec) throw core::Error(dir.string() + ": cannot create the report directory: " + ec.message());
  std::string gnuplot;
  if (options.run_gnuplot) {
    gnuplot = find_program("gnuplot");
    if (gnuplot.empty())
      throw core::Error("servesim report draws its plots with gnuplot, which is not installed: apt-get install "
                        "gnuplot-nox (scripts/bootstrap.sh installs it)");
  }
  const fs::path data_dir = dir / "data";
  const size_t n = data.series.size();
  std::map<std::string, std::vector<size_t>> cdf_points;  // metric -> values per configuration
  std::vector<std::string> timeline_names(n);             // gnuplot word list of legend names

  // ---- Data files.
  for (size_t i = 0; i < n; ++i) {
    std::ostringstream s;
    s << "# configuration " << i << ": " << data.series[i].label << "\n"
      << "# knob offered_req_s goodput_req_s slo_attainment_pct runs\n";
    for (const auto& p : data.series[i].points)
      s << (p.knob ? core::format_double(*p.knob) : "NaN") << " " << core::format_double(p.offered_req_s) << " "
        << core::format_double(p.goodput_req_s) << " " << core::format_double(100 * p.slo_attainment) << " "
        << p.runs.size() << "\n";
    write_file(data_dir / ("series_" + std::to_string(i) + ".dat"), s.str());
  }
  try {
    SQLite::Database db(data.db_path, SQLite::OPEN_READONLY);
    for (size_t i = 0; i < n; ++i) {
      const int64_t run_id = data.runs[data.series[i].representative].run_id;
      for (const char* metric : {"ttft_ms", "tpot_ms"}) {
        std::vector<double> values;
        SQLite::Statement st(db, std::string("SELECT ") + metric + " FROM requests WHERE run_id = ? AND " + metric +
                                     " IS NOT NULL ORDER BY " + metric);
        st.bind(1, run_id);
        while (st.executeStep()) values.push_back(st.getColumn(0).getDouble());
        std::ostringstream s;
        s << "# run " << run_id << ": " << metric << " (ms) and the fraction of requests at or below it\n";
        const size_t m = std::min(values.size(), kMaxCdfPoints);
        cdf_points[metric].push_back(m);
        for (size_t k = 0; k < m; ++k) {
          const size_t idx = m == 1 ? values.size() - 1 : k * (values.size() - 1) / (m - 1);
          s << core::format_double(values[idx]) << " "
            << core::format_double(static_cast<double>(idx + 1) / static_cast<double>(values.size())) << "\n";
        }
        write_file(data_dir / (std::string(metric) + "_" + std::to_string(i) + ".dat"), s.str());
      }
      if (i >= options.max_timelines) continue;
      SQLite::Statement count(db, "SELECT COUNT(*), COUNT(DISTINCT replica) FROM replica_timeseries WHERE run_id = ?");
      count.bind(1, run_id);
      count.executeStep();
      const int64_t rows = count.getColumn(0).getInt64(), replicas = std::max<int64_t>(1, count.getColumn(1).getInt64());
      const int64_t stride = std::max<int64_t>(1, rows / replicas / static_cast<int64_t>(kMaxSamplesPerReplica));
      // Legend names: "replica 3", with the replica's role when the run disaggregates prefill and decode.
      std::map<int64_t, std::string> roles;
      if (db.tableExists("replica_stats")) {
        SQLite::Statement r(db, "SELECT replica, role FROM replica_stats WHERE run_id = ?");
        r.bind(1, run_id);
        while (r.executeStep()) roles[r.getColumn(0).getInt64()] = r.getColumn(1).getString();
      }
      std::string& names = timeline_names[i];
      SQLite::Statement st(db,
                           "SELECT replica, time_ns, queued, running, kv_blocks_used, kv_blocks_total FROM "
                           "replica_timeseries WHERE run_id = ? AND replica < ? ORDER BY replica, time_ns");
      st.bind(1, run_id);
      st.bind(2, static_cast<int64_t>(options.max_timeline_replicas));
      std::ostringstream s;
      s << "# run " << run_id << ": one block per replica: time_s queued running kv_use_pct\n";
      int64_t current = -1, k = 0;
      while (st.executeStep()) {
        const int64_t replica = st.getColumn(0).getInt64();
        if (replica != current) {
          if (current >= 0) s << "\n\n";
          s << "# replica " << replica << "\n";
          const std::string role = roles.count(replica) ? roles[replica] : "";
          names += (names.empty() ? "" : " ") + std::string("\"replica ") + std::to_string(replica) +
                   (role.empty() || role == "unified" ? "" : " (" + role + ")") + "\"";
          current = replica;
          k = 0;
        }
        if (k++ % stride) continue;
        const double total = static_cast<double>(st.getColumn(5).getInt64());
        s << core::format_double(static_cast<double>(st.getColumn(1).getInt64()) / 1e9) << " "
          << st.getColumn(2).getInt64() << " " << st.getColumn(3).getInt64() << " "
          << core::format_double(total > 0 ? 100.0 * static_cast<double>(st.getColumn(4).getInt64()) / total : 0)
          << "\n";
      }
      write_file(data_dir / ("timeline_" + std::to_string(i) + ".dat"), s.str());
    }
  } catch (const core::Error&) {
    throw;
  } catch (const std::exception& e) {
    throw core::Error(data.db_path + ": cannot read the requests and time series: " + e.what());
  }

  // ---- The gnuplot script: every figure drawn twice, PNG then SVG.
  std::ostringstream gp;
  std::vector<std::string> images;
  const std::string font = "font 'DejaVu Sans,11' noenhanced";
  auto figure = [&](const std::string& name, const std::string& body, int height = 600) {
    for (const char* ext : {"png", "svg"}) {
      gp << "reset\n";
      if (std::string(ext) == "png")
        gp << "set terminal pngcairo size 1000," << height << " " << font << "\n";
      else
        gp << "set terminal svg size 1000," << height << " dynamic background rgb 'white' " << font << "\n";
      gp << "set output " << gp_string((dir / (name + "." + ext)).string()) << "\n" << body << "unset output\n\n";
    }
    images.push_back(name + ".png");
  };
  auto data_path = [&](const std::string& file) { return gp_string((data_dir / file).string()); };
  const std::string key = n > 4 ? "set key below maxrows 4\n" : "set key top left\n";
  const std::string common = "set grid\nset style data linespoints\n" + key;
  {
    std::ostringstream b;
    b << common << "set title 'Goodput vs offered arrival rate'\nset xlabel 'offered arrival rate (req/s)'\n"
      << "set ylabel 'goodput (requests meeting the SLO per simulated second)'\nset yrange [0:*]\nplot ";
    for (size_t i = 0; i < n; ++i)
      b << (i ? ", \\\n  " : "") << data_path("series_" + std::to_string(i) + ".dat") << " using 2:3 title "
        << gp_string(data.series[i].label) << " lw 2 pt 7";
    b << "\n";
    figure("goodput", b.str());
  }
  {
    std::ostringstream b;
    b << "set grid\nset style data linespoints\n" << (n > 4 ? "set key below maxrows 4\n" : "set key bottom left\n")
      << "set title 'SLO attainment vs offered arrival rate'\nset xlabel 'offered arrival rate (req/s)'\n"
      << "set ylabel 'requests meeting the SLO (%)'\nset yrange [0:105]\n"
      << "set arrow from graph 0, first " << core::format_double(100 * options.target) << " to graph 1, first "
      << core::format_double(100 * options.target) << " nohead dashtype 2 lc rgb 'gray40'\n"
      << "set label " << gp_string("target " + num(100 * options.target, 0) + "%") << " at graph 0.01, first "
      << core::format_double(100 * options.target - 4) << " tc rgb 'gray40'\nplot ";
    for (size_t i = 0; i < n; ++i)
      b << (i ? ", \\\n  " : "") << data_path("series_" + std::to_string(i) + ".dat") << " using 2:4 title "
        << gp_string(data.series[i].label) << " lw 2 pt 7";
    b << "\n";
    figure("slo_attainment", b.str());
  }
  for (const auto& [metric, title] : {std::pair<std::string, std::string>{"ttft_ms", "TTFT"}, {"tpot_ms", "TPOT"}}) {
    std::ostringstream b;
    bool any = false;
    for (size_t count : cdf_points[metric]) any = any || count > 0;
    if (!any) continue;  // no request had one (for example TPOT with one output token each)
    b << "set grid\nset style data lines\n" << key << "set logscale x\nset title "
      << gp_string(title + " CDF, one run per configuration near " + num(data.reference_rate, 2) + " req/s offered")
      << "\nset xlabel " << gp_string(title + " (ms, log scale)") << "\nset ylabel 'fraction of requests'\n"
      << "set yrange [0:1]\nplot ";
    bool first = true;
    for (size_t i = 0; i < n; ++i) {
      if (cdf_points[metric][i] == 0) continue;
      const ReportRun& r = data.runs[data.series[i].representative];
      b << (first ? "" : ", \\\n  ") << data_path(metric + "_" + std::to_string(i) + ".dat") << " using 1:2 title "
        << gp_string(data.series[i].label + " (" + num(r.offered_req_s, 1) + " req/s, run " +
                     std::to_string(r.run_id) + ")")
        << " lw 2";
      first = false;
    }
    b << "\n";
    figure(metric == "ttft_ms" ? "ttft_cdf" : "tpot_cdf", b.str());
  }
  std::vector<std::pair<size_t, int64_t>> timeline_replicas;
  for (size_t i = 0; i < n && i < options.max_timelines; ++i) {
    const ReportRun& r = data.runs[data.series[i].representative];
    // How many replica blocks the data file holds.
    std::ifstream in(data_dir / ("timeline_" + std::to_string(i) + ".dat"));
    int64_t blocks = 0;
    for (std::string line; std::getline(in, line);)
      if (line.rfind("# replica", 0) == 0) ++blocks;
    timeline_replicas.emplace_back(i, blocks);
    if (blocks == 0) continue;
    std::ostringstream b;
    const std::string file = data_path("timeline_" + std::to_string(i) + ".dat");
    b << "set multiplot layout 2,1 title " << gp_string("run " + std::to_string(r.run_id) + ": " + data.series[i].label +
                                                         " at " + num(r.offered_req_s, 1) + " req/s offered")
      << "\nset grid\nset style data lines\nset key outside right top\nset autoscale xfix\n"
      << "set xlabel 'simulated time (s)'\n"
      << "names = " << gp_string(timeline_names[i]) << "\n"
      << "set ylabel 'queued requests'\nset yrange [0:*]\nplot for [k=0:" << blocks - 1 << "] " << file
      << " index k using 1:2 title word(names, k + 1) lw 1.5\n"
      << "set ylabel 'KV cache in use (%)'\nset yrange [0:100]\nplot for [k=0:" << blocks - 1 << "] " << file
      << " index k using 1:4 title word(names, k + 1) lw 1.5\nunset multiplot\n";
    figure("timeline_" + std::to_string(i), b.str(), 750);
  }
  write_file(dir / "plots.gp", gp.str());
  if (options.run_gnuplot) {
    // gnuplot writes the images itself: an existing file there must be an image servesim drew.
    for (const std::string& png : images) {
      const std::string svg = png.substr(0, png.size() - 4) + ".svg";
      core::check_replaceable((dir / png).string(), "a PNG image of the report", core::starts_with("\x89PNG"));
      core::check_replaceable((dir / svg).string(), "an SVG image of the report", [](std::string_view head) {
        return head.rfind("<?xml", 0) == 0 || head.rfind("<svg", 0) == 0;
      });
    }
    const ProcessResult r = run_process({gnuplot, (dir / "plots.gp").string()});
    if (r.exit_code != 0)
      throw core::Error("gnuplot failed on " + (dir / "plots.gp").string() + " (exit " + std::to_string(r.exit_code) +
                        "): " + r.err.substr(0, 2000));
  }

  // ---- index.html
  std::ostringstream h;
  const std::string title = data.experiment.name.empty() ? fs::path(data.db_path).filename().string()
                                                         : data.experiment.kind + " '" + data.experiment.name + "'";
  h << "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>servesim report: " << html(title)
    << "</title>\n<style>body{font-family:sans-serif;margin:2em;max-width:1100px}img{max-width:100%;border:1px solid "
       "#ddd}table{border-collapse:collapse;font-size:90%}td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}"
       "td.l,th.l{text-align:left}</style></head><body>\n"
    << "<h1>servesim report: " << html(title) << "</h1>\n<p>Database <code>" << html(data.db_path) << "</code>: "
    << data.runs.size() << " runs in " << n << " configuration" << (n == 1 ? "" : "s");
  if (!data.knob.empty()) h << ", varying <code>" << html(data.knob) << "</code>";
  h << ". Plots are PNG; click one for its SVG. The data behind them is in <code>data/</code> and the gnuplot "
       "script in <code>plots.gp</code>.</p>\n";
  h << "<h2>Configurations</h2>\n<table><tr><th class=l>#</th><th class=l>configuration</th><th>runs</th>"
       "<th>highest offered req/s with SLO attainment &ge; "
    << num(100 * options.target, 0) << "%</th><th>goodput there (req/s)</th></tr>\n";
  for (size_t i = 0; i < n; ++i) {
    const auto& s = data.series[i];
    const ReportPoint* best = nullptr;
    size_t runs = 0;
    for (const auto& p : s.points) {
      runs += p.runs.size();
      if (p.slo_attainment >= options.target && (!best || p.offered_req_s > best->offered_req_s)) best = &p;
    }
    h << "<tr><td class=l>" << i << "</td><td class=l>" << html(s.label) << "</td><td>" << runs << "</td><td>"
      << (best ? num(best->offered_req_s, 2) : "none") << "</td><td>" << (best ? num(best->goodput_req_s, 2) : "-")
      << "</td></tr>\n";
  }
  h << "</table>\n";
  auto img = [&](const std::string& name, const std::string& caption) {
    h << "<h2>" << html(caption) << "</h2>\n<p><a href=\"" << name << ".svg\"><img src=\"" << name << ".png\" alt=\""
      << html(caption) << "\"></a></p>\n";
  };
  img("goodput", "Goodput vs offered arrival rate");
  img("slo_attainment", "SLO attainment vs offered arrival rate");
  for (const auto& [name, caption] :
       {std::pair<std::string, std::string>{"ttft_cdf", "TTFT distribution"}, {"tpot_cdf", "TPOT distribution"}})
    if (std::find(images.begin(), images.end(), name + ".png") != images.end()) img(name, caption);
  for (const auto& [i, blocks] : timeline_replicas) {
    if (blocks == 0) continue;
    img("timeline_" + std::to_string(i), "Queue and KV-cache use per replica: " + data.series[i].label);
  }
  if (n > options.max_timelines)
    h << "<p>(timelines of the first " << options.max_timelines << " configurations only)</p>\n";
  h << "<h2>Runs</h2>\n<table><tr><th>run</th><th class=l>configuration</th><th>seed</th><th>knob</th><th>offered "
       "req/s</th><th>goodput</th><th>SLO</th><th>TTFT p50</th><th>TTFT p99</th><th>TPOT p50</th><th>TPOT p99</th>"
       "<th>output tok/s</th><th>$/1M tok</th></tr>\n";
  std::map<size_t, size_t> series_of;
  for (size_t i = 0; i < n; ++i)
    for (const auto& p : data.series[i].points)
      for (size_t r : p.runs) series_of[r] = i;
  for (size_t i = 0; i < data.runs.size() && i < kMaxRunRows; ++i) {
    const ReportRun& r = data.runs[i];
    h << "<tr><td>" << r.run_id << "</td><td class=l>" << html(data.series[series_of[i]].label) << "</td><td>" << r.seed
      << "</td><td>" << (r.knob ? core::format_double(*r.knob) : "-") << "</td><td>" << num(r.offered_req_s, 2)
      << "</td><td>" << num(r.goodput_req_s, 2) << "</td><td>" << pct(r.slo_attainment) << "</td><td>"
      << num(r.ttft_ms_p50, 1) << "</td><td>" << num(r.ttft_ms_p99, 1) << "</td><td>" << num(r.tpot_ms_p50, 2)
      << "</td><td>" << num(r.tpot_ms_p99, 2) << "</td><td>" << num(r.throughput_output_tok_s, 0) << "</td><td>"
      << num(r.cost_usd_per_mtok_output, 3) << "</td></tr>\n";
  }
  h << "</table>\n";
  if (data.runs.size() > kMaxRunRows) h << "<p>(first " << kMaxRunRows << " of " << data.runs.size() << " runs)</p>\n";
  h << "<p>Latencies in ms. Goodput counts completed requests meeting every SLO limit per simulated second; SLO "
       "attainment is those requests over all requests. Written by servesim "
    << SERVESIM_VERSION << ".</p>\n</body></html>\n";
  write_file(dir / "index.html", h.str());
  return images;
}

}  // namespace servesim::experiments
