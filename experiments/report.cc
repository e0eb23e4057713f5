#include "experiments/report.h"

#include <SQLiteCpp/SQLiteCpp.h>
#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iomanip>
#include <map>
#include <set>
#include <sstream>

#include "experiments/capacity.h"
#include "experiments/process.h"
#include "sim/core/error.h"
#include "sim/core/output_file.h"
#include "sim/core/format.h"
#include "sim/metrics/steady_state.h"

namespace servesim::experiments {
namespace {

namespace fs = std::filesystem;

constexpr size_t kMaxCdfPoints = 1500;
constexpr size_t kMaxSamplesPerReplica = 4000;
constexpr size_t kMaxRunRows = 500;
constexpr size_t kMaxCdfRates = 6;
// Line colours that stay apart with ten configurations (Tableau 10, then two more); point types and
// dash patterns cycle with them, so lines differ even where colours are hard to tell.
constexpr const char* kColours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
                                    "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#000000", "#aec7e8"};
constexpr int kPointTypes[] = {7, 5, 9, 11, 13, 15};

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

// A string field of a gnuplot data file.
std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) out += c == '"' ? '\'' : c;
  return out + "\"";
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

// The capacity search's answer (capacity_table's text).
void read_capacity(const std::string& text, const std::string& path, ReportData& data) {
  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line) || line != kCapacityTableHeader)
    throw core::Error(path + ": its capacity_result is not in the layout this servesim reads (written by another version?)");
  auto split = [](const std::string& l) {
    std::vector<std::string> f;
    size_t start = 0;
    for (size_t tab; (tab = l.find('\t', start)) != std::string::npos; start = tab + 1) f.push_back(l.substr(start, tab - start));
    f.push_back(l.substr(start));
    return f;
  };
  auto opt = [](const std::string& v) -> std::optional<double> {
    if (v.empty()) return std::nullopt;
    return std::strtod(v.c_str(), nullptr);
  };
  while (std::getline(in, line)) {
    const auto f = split(line);
    if (f.size() != 11) throw core::Error(path + ": capacity_result line '" + line + "' does not have 11 fields");
    CapacityRow r;
    r.label = f[0];
    data.capacity_knob = f[1];
    r.status = f[2];
    r.sustainable = opt(f[3]);
    r.lo = opt(f[4]);
    r.hi = opt(f[5]);
    if (auto v = opt(f[6])) r.lowest_failing = *v;
    r.cliff_from = opt(f[7]);
    r.margin = opt(f[8]);
    r.replications = std::strtoll(f[9].c_str(), nullptr, 10);
    data.capacity_target = opt(f[10]).value_or(0);
    data.capacity.push_back(std::move(r));
  }
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
    // The batch-means intervals, where the database has them (older ones do not).
    std::set<std::string> columns;
    {
      SQLite::Statement cols(db, "PRAGMA table_info(runs)");
      while (cols.executeStep()) columns.insert(cols.getColumn(1).getString());
    }
    const bool have_ci = columns.count("goodput_req_s_window_ci95") && columns.count("slo_attainment_window_ci95");
    SQLite::Statement st(db,
                         std::string("SELECT run_id, seed, config, requests_total, requests_meeting_slo, goodput_req_s, "
                                     "slo_attainment, ttft_ms_p50, ttft_ms_p90, ttft_ms_p99, tpot_ms_p50, tpot_ms_p90, "
                                     "tpot_ms_p99, throughput_output_tok_s, cost_usd_per_mtok_output, ") +
                             (have_ci ? "goodput_req_s_window_ci95, slo_attainment_window_ci95" : "NULL, NULL") +
                             " FROM runs ORDER BY run_id");
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
      if (!st.getColumn(15).isNull()) r.goodput_ci95 = st.getColumn(15).getDouble();
      if (!st.getColumn(16).isNull()) r.slo_attainment_ci95 = st.getColumn(16).getDouble();
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
      r.ttft_slo_ms = number("slo.ttft_ms");
      r.tpot_slo_ms = number("slo.tpot_ms");
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
    if (db.tableExists("class_stats")) {  // request classes (issue 17; schema version 6)
      SQLite::Statement cs(db, "SELECT run_id, class, tenant, priority, requests, completed, rejected_admission, "
                               "ttft_ms_p99, tpot_ms_p99, goodput_req_s, slo_attainment FROM class_stats "
                               "ORDER BY run_id, rowid");
      while (cs.executeStep()) {
        ReportClassRow c;
        c.run_id = cs.getColumn(0).getInt64();
        c.name = cs.getColumn(1).getString();
        c.tenant = cs.getColumn(2).getString();
        c.priority = cs.getColumn(3).getInt64();
        c.requests = static_cast<uint64_t>(cs.getColumn(4).getInt64());
        c.completed = static_cast<uint64_t>(cs.getColumn(5).getInt64());
        c.rejected_admission = static_cast<uint64_t>(cs.getColumn(6).getInt64());
        c.ttft_ms_p99 = cs.getColumn(7).getDouble();
        c.tpot_ms_p99 = cs.getColumn(8).getDouble();
        c.goodput_req_s = cs.getColumn(9).getDouble();
        c.slo_attainment = cs.getColumn(10).getDouble();
        data.classes.push_back(std::move(c));
      }
    }
    if (db.tableExists("fleet_metrics")) {  // fleet dynamics and the host KV tier (issues 16, 17)
      SQLite::Statement fm(db, "SELECT run_id, name, value FROM fleet_metrics ORDER BY run_id, rowid");
      while (fm.executeStep())
        data.fleet.push_back({fm.getColumn(0).getInt64(), fm.getColumn(1).getString(), fm.getColumn(2).getDouble()});
    }
    if (db.tableExists("experiment")) {
      SQLite::Statement cap(db, "SELECT value FROM experiment WHERE key = 'capacity_result'");
      if (cap.executeStep()) read_capacity(cap.getColumn(0).getString(), options.db_path, data);
    }
  } catch (const core::Error&) {
    throw;
  } catch (const std::exception& e) {
    throw core::Error(options.db_path + ": cannot read the results: " + e.what());
  }
  if (data.runs.empty()) throw core::Error(options.db_path + ": holds no runs to report on");
  // A capacity search's probes of one configuration differ in what the search itself set (the
  // MSER-5 warm-up, a longer run: measurement.auto_warmup, workload.max_requests, appended after the
  // configuration's own settings): the label without them groups them.
  if (data.experiment.kind == "capacity") {
    bool labelled = true;
    for (const auto& r : data.runs) labelled = labelled && point_labels.count(r.run_id);
    if (labelled)
      for (auto& r : data.runs) {
        std::istringstream words(point_labels[r.run_id]);
        std::string label;
        for (std::string w; words >> w;)
          if (w.rfind("measurement.auto_warmup=", 0) != 0 && w.rfind("workload.max_requests=", 0) != 0)
            label += (label.empty() ? "" : " ") + w;
        if (label.empty()) label = "(base)";
        point_labels[r.run_id] = label;
        r.configuration = "label=" + label;
      }
  }

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
      if (p.runs.size() >= 2) {
        std::vector<double> goodput, attainment;
        for (size_t i : p.runs) {
          goodput.push_back(data.runs[i].goodput_req_s);
          attainment.push_back(data.runs[i].slo_attainment);
        }
        const metrics::Interval g = metrics::t_interval(goodput), a = metrics::t_interval(attainment);
        p.goodput_lo = g.lo();
        p.goodput_hi = g.hi();
        p.slo_attainment_lo = std::max(0.0, a.lo());
        p.slo_attainment_hi = std::min(1.0, a.hi());
      } else {
        const ReportRun& r = data.runs[p.runs.front()];
        if (!std::isnan(r.goodput_ci95)) {
          p.goodput_lo = std::max(0.0, p.goodput_req_s - r.goodput_ci95);
          p.goodput_hi = p.goodput_req_s + r.goodput_ci95;
        }
        if (!std::isnan(r.slo_attainment_ci95)) {
          p.slo_attainment_lo = std::max(0.0, p.slo_attainment - r.slo_attainment_ci95);
          p.slo_attainment_hi = std::min(1.0, p.slo_attainment + r.slo_attainment_ci95);
        }
      }
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
      << "# knob offered_req_s goodput_req_s slo_attainment_pct runs goodput_lo goodput_hi slo_attainment_lo_pct "
         "slo_attainment_hi_pct (95% intervals; the value itself when unknown)\n";
    for (const auto& p : data.series[i].points) {
      auto or_value = [](double bound, double value) { return core::format_double(std::isnan(bound) ? value : bound); };
      s << (p.knob ? core::format_double(*p.knob) : "NaN") << " " << core::format_double(p.offered_req_s) << " "
        << core::format_double(p.goodput_req_s) << " " << core::format_double(100 * p.slo_attainment) << " "
        << p.runs.size() << " " << or_value(p.goodput_lo, p.goodput_req_s) << " "
        << or_value(p.goodput_hi, p.goodput_req_s) << " " << or_value(100 * p.slo_attainment_lo, 100 * p.slo_attainment)
        << " " << or_value(100 * p.slo_attainment_hi, 100 * p.slo_attainment) << "\n";
    }
    write_file(data_dir / ("series_" + std::to_string(i) + ".dat"), s.str());
  }
  // The knob values every configuration ran (at most kMaxCdfRates, spread over them): CDFs compared
  // at the same rate.
  std::vector<double> common_knobs;
  if (n >= 2 && !data.knob.empty()) {
    std::map<double, size_t> seen;
    for (const auto& s : data.series) {
      std::set<double> mine;
      for (const auto& p : s.points)
        if (p.knob) mine.insert(*p.knob);
      for (double k : mine) ++seen[k];
    }
    std::vector<double> all;
    for (const auto& [k, count] : seen)
      if (count == n) all.push_back(k);
    for (size_t j = 0; j < std::min(all.size(), kMaxCdfRates); ++j)
      common_knobs.push_back(all[all.size() <= kMaxCdfRates ? j : j * (all.size() - 1) / (kMaxCdfRates - 1)]);
  }
  // cdf_at[metric][j][i]: points written for configuration i at common knob j.
  std::map<std::string, std::vector<std::vector<size_t>>> cdf_at;
  try {
    SQLite::Database db(data.db_path, SQLite::OPEN_READONLY);
    auto write_cdf = [&](int64_t run_id, const std::string& metric, const std::string& file) {
      std::vector<double> values;
      SQLite::Statement st(db, "SELECT " + metric + " FROM requests WHERE run_id = ? AND " + metric +
                                   " IS NOT NULL ORDER BY " + metric);
      st.bind(1, run_id);
      while (st.executeStep()) values.push_back(st.getColumn(0).getDouble());
      std::ostringstream s;
      s << "# run " << run_id << ": " << metric << " (ms) and the fraction of requests at or below it\n";
      const size_t m = std::min(values.size(), kMaxCdfPoints);
      for (size_t k = 0; k < m; ++k) {
        const size_t idx = m == 1 ? values.size() - 1 : k * (values.size() - 1) / (m - 1);
        s << core::format_double(values[idx]) << " "
          << core::format_double(static_cast<double>(idx + 1) / static_cast<double>(values.size())) << "\n";
      }
      write_file(data_dir / file, s.str());
      return m;
    };
    for (const char* metric : {"ttft_ms", "tpot_ms"})
      cdf_at[metric].assign(common_knobs.size(), std::vector<size_t>(n, 0));
    for (size_t i = 0; i < n; ++i) {
      const int64_t run_id = data.runs[data.series[i].representative].run_id;
      for (const char* metric : {"ttft_ms", "tpot_ms"})
        cdf_points[metric].push_back(write_cdf(run_id, metric, std::string(metric) + "_" + std::to_string(i) + ".dat"));
      for (size_t j = 0; j < common_knobs.size(); ++j) {
        for (const auto& p : data.series[i].points) {
          if (!p.knob || *p.knob != common_knobs[j]) continue;
          const int64_t at = data.runs[*std::min_element(p.runs.begin(), p.runs.end())].run_id;
          for (const char* metric : {"ttft_ms", "tpot_ms"})
            cdf_at[metric][j][i] = write_cdf(at, metric, std::string(metric) + "_" + std::to_string(i) + "_at_" +
                                                              std::to_string(j) + ".dat");
          break;
        }
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
  // Every figure with lines per configuration: configuration i is linetype i + 1, whatever the figure.
  std::string styles;
  for (size_t i = 0; i < n; ++i)
    styles += "set linetype " + std::to_string(i + 1) + " lc rgb '" + kColours[i % std::size(kColours)] +
              "' pt " + std::to_string(kPointTypes[i % std::size(kPointTypes)]) + " dt " +
              std::to_string(1 + (i / std::size(kColours)) % 5) + "\n";
  // Up to four configurations: a key inside; more: one entry per row below the plot, which grows to
  // hold them, so long labels never overlap.
  const bool many = n > 4;
  const int tall = 600 + (many ? 20 * static_cast<int>(n) : 0);
  const std::string key = many ? "set key outside below left vertical maxcols 1 samplen 3\n" : "set key top left\n";
  const std::string common = styles + "set grid\nset style data linespoints\n" + key;
  {
    std::ostringstream b;
    b << common << "set title 'Goodput vs offered arrival rate (bars: 95% intervals)'\n"
      << "set xlabel 'offered arrival rate (req/s)'\n"
      << "set ylabel 'goodput (requests meeting the SLO per simulated second)'\nset yrange [0:*]\nplot ";
    for (size_t i = 0; i < n; ++i)
      b << (i ? ", \\\n  " : "") << data_path("series_" + std::to_string(i) + ".dat")
        << " using 2:3:6:7 with yerrorlines lt " << i + 1 << " lw 2 title " << gp_string(data.series[i].label);
    b << "\n";
    figure("goodput", b.str(), tall);
  }
  {
    std::ostringstream b;
    b << styles << "set grid\nset style data linespoints\n" << (many ? key : "set key bottom left\n")
      << "set title 'SLO attainment vs offered arrival rate (bars: 95% intervals)'\n"
      << "set xlabel 'offered arrival rate (req/s)'\n"
      << "set ylabel 'requests meeting the SLO (%)'\nset yrange [0:105]\n"
      << "set arrow from graph 0, first " << core::format_double(100 * options.target) << " to graph 1, first "
      << core::format_double(100 * options.target) << " nohead dashtype 2 lc rgb 'gray40'\n"
      << "set label " << gp_string("target " + num(100 * options.target, 0) + "%") << " at graph 0.01, first "
      << core::format_double(100 * options.target - 4) << " tc rgb 'gray40'\nplot ";
    for (size_t i = 0; i < n; ++i)
      b << (i ? ", \\\n  " : "") << data_path("series_" + std::to_string(i) + ".dat")
        << " using 2:4:8:9 with yerrorlines lt " << i + 1 << " lw 2 title " << gp_string(data.series[i].label);
    b << "\n";
    figure("slo_attainment", b.str(), tall);
  }
  // The SLO limit of a metric when every configuration has the same one.
  auto slo_limit = [&](const std::string& metric) -> std::optional<double> {
    std::optional<double> limit;
    for (size_t i = 0; i < n; ++i) {
      const ReportRun& r = data.runs[data.series[i].representative];
      const std::optional<double> mine = metric == "ttft_ms" ? r.ttft_slo_ms : r.tpot_slo_ms;
      if (!mine || (limit && *limit != *mine)) return std::nullopt;
      limit = mine;
    }
    return limit;
  };
  // A CDF figure: the limit as a vertical line, the target as a horizontal one (a configuration
  // whose curve crosses the target left of the limit meets that limit for the target's share).
  auto cdf_figure = [&](const std::string& metric, const std::string& title, const std::string& name,
                        const std::string& heading, const std::vector<size_t>& points,
                        const std::function<std::string(size_t)>& file, const std::function<std::string(size_t)>& label) {
    bool any = false;
    for (size_t count : points) any = any || count > 0;
    if (!any) return;  // no request had one (for example TPOT with one output token each)
    std::ostringstream b;
    b << styles << "set grid\nset style data lines\n" << (many ? key : "set key bottom right\n")
      << "set logscale x\nset title " << gp_string(heading)
      << "\nset xlabel " << gp_string(title + " (ms, log scale)") << "\nset ylabel 'fraction of requests'\n"
      << "set yrange [0:1]\n";
    if (const auto limit = slo_limit(metric)) {
      b << "set arrow from first " << core::format_double(*limit) << ", graph 0 to first " << core::format_double(*limit)
        << ", graph 1 nohead dashtype 2 lw 2 lc rgb 'red'\n"
        << "set label " << gp_string("SLO " + title + " <= " + core::format_double(*limit) + " ms") << " at first "
        << core::format_double(*limit) << ", graph 0.04 offset 0.5,0 tc rgb 'red'\n";
    }
    b << "set arrow from graph 0, first " << core::format_double(options.target) << " to graph 1, first "
      << core::format_double(options.target) << " nohead dashtype 3 lc rgb 'gray40'\n"
      << "set label " << gp_string("target " + num(100 * options.target, 0) + "%") << " at graph 0.01, first "
      << core::format_double(options.target + 0.03) << " tc rgb 'gray40'\nplot ";
    bool first = true;
    for (size_t i = 0; i < n; ++i) {
      if (points[i] == 0) continue;
      b << (first ? "" : ", \\\n  ") << data_path(file(i)) << " using 1:2 lt " << i + 1 << " lw 2 title "
        << gp_string(label(i));
      first = false;
    }
    b << "\n";
    figure(name, b.str(), tall);
  };
  for (const auto& names : {std::pair<std::string, std::string>{"ttft_ms", "TTFT"}, {"tpot_ms", "TPOT"}}) {
    // Plain names, not structured bindings: clang 14 rejects lambdas that capture those.
    const std::string& metric = names.first;
    const std::string& title = names.second;
    const std::string short_name = metric == "ttft_ms" ? "ttft_cdf" : "tpot_cdf";
    cdf_figure(
        metric, title, short_name,
        title + " CDF, one run per configuration near " + num(data.reference_rate, 2) + " req/s offered",
        cdf_points[metric], [&](size_t i) { return metric + "_" + std::to_string(i) + ".dat"; },
        [&](size_t i) {
          const ReportRun& r = data.runs[data.series[i].representative];
          return data.series[i].label + " (" + num(r.offered_req_s, 1) + " req/s, run " + std::to_string(r.run_id) + ")";
        });
    for (size_t j = 0; j < common_knobs.size(); ++j)
      cdf_figure(
          metric, title, short_name + "_at_" + std::to_string(j),
          title + " CDF at " + data.knob + " = " + core::format_double(common_knobs[j]) + ", every configuration",
          cdf_at[metric][j], [&](size_t i) { return metric + "_" + std::to_string(i) + "_at_" + std::to_string(j) + ".dat"; },
          [&](size_t i) { return data.series[i].label; });
  }
  // A capacity search's answer: the sustainable rate per configuration with its interval, and the
  // cliff above it.
  if (!data.capacity.empty()) {
    std::ostringstream d;
    d << "# row sustainable interval_lo interval_hi cliff_from label (" << data.capacity_knob << ")\n";
    size_t rows = 0;
    for (size_t k = 0; k < data.capacity.size(); ++k) {
      const CapacityRow& c = data.capacity[k];
      if (!c.sustainable) continue;
      const double lo = c.lo.value_or(*c.sustainable), hi = c.hi && std::isfinite(*c.hi) ? *c.hi : *c.sustainable;
      d << rows++ << " " << core::format_double(*c.sustainable) << " " << core::format_double(lo) << " "
        << core::format_double(hi) << " " << (c.cliff_from ? core::format_double(*c.cliff_from) : "NaN") << " "
        << quoted(c.label) << "\n";
    }
    write_file(data_dir / "capacity.dat", d.str());
    if (rows > 0) {
      std::ostringstream b;
      const std::string meaning = knob_meaning(data.capacity_knob);
      b << "set grid xtics\nset key outside below\nset title "
        << gp_string("Sustainable " + meaning + " per configuration (servesim capacity)") << "\nset xlabel "
        << gp_string(meaning) << "\nset ylabel ''\nset yrange [-0.5:" << rows - 0.5 << "] reverse\n"
        << "set ytics scale 0 font ',9'\nset offsets graph 0.05, graph 0.05, 0, 0\nplot "
        << data_path("capacity.dat") << " using 2:1:3:4:ytic(6) with xerrorbars pt 7 ps 1.5 lc rgb '#1f77b4' title "
        << gp_string(data.capacity.front().replications > 0 ? "sustainable rate, 95% interval across replications"
                                                            : "sustainable rate, bracket [highest passing, lowest failing]")
        << ", \\\n  " << data_path("capacity.dat") << " using 5:1 with points pt 9 ps 1.5 lc rgb '#d62728' title 'cliff'\n";
      figure("capacity", b.str(), 300 + 28 * static_cast<int>(rows));
    }
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
       "<th>highest offered req/s on the grid with SLO attainment &ge; "
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
  h << "<p>The grid's highest passing rate is only as fine as the rates swept, and counts every request of each "
       "run; <code>servesim capacity</code> finds the sustainable rate itself, in the steady state, with an "
       "interval.</p>\n";
  auto img = [&](const std::string& name, const std::string& caption) {
    h << "<h2>" << html(caption) << "</h2>\n<p><a href=\"" << name << ".svg\"><img src=\"" << name << ".png\" alt=\""
      << html(caption) << "\"></a></p>\n";
  };
  auto drawn = [&](const std::string& name) { return std::find(images.begin(), images.end(), name + ".png") != images.end(); };
  if (!data.capacity.empty()) {
    h << "<h2>Capacity (servesim capacity)</h2>\n<table><tr><th class=l>configuration</th><th>sustainable "
      << html(knob_meaning(data.capacity_knob)) << "</th><th>95% interval</th><th>fails at</th><th>cliff from</th>"
         "<th>margin</th><th class=l>status</th></tr>\n";
    for (const CapacityRow& c : data.capacity) {
      auto o = [](const std::optional<double>& v, int digits) { return v ? num(*v, digits) : std::string("-"); };
      h << "<tr><td class=l>" << html(c.label) << "</td><td>" << o(c.sustainable, 3) << "</td><td>"
        << (c.lo && c.hi ? "[" + num(*c.lo, 3) + ", " + (std::isfinite(*c.hi) ? num(*c.hi, 3) : "inf") + "]" : "-")
        << "</td><td>" << num(c.lowest_failing, 3) << "</td><td>" << o(c.cliff_from, 3) << "</td><td>"
        << (c.margin ? pct(*c.margin) : "-") << "</td><td class=l>" << html(c.status) << "</td></tr>\n";
    }
    h << "</table>\n<p>Target: steady-state SLO attainment &ge; " << num(100 * data.capacity_target, 0)
      << "% with a stationary queue. "
      << (data.capacity.front().replications > 0
              ? "Intervals: 95% across " + std::to_string(data.capacity.front().replications) + " replications."
              : std::string("Without replications the interval is the search's bracket (highest passing, lowest "
                            "failing); run with replications = N for a confidence interval."))
      << " Margin: how far below the cliff (attainment falling faster than the search's threshold) the answer "
         "sits.</p>\n";
    if (drawn("capacity")) img("capacity", "Sustainable rate per configuration");
  }
  img("goodput", "Goodput vs offered arrival rate");
  img("slo_attainment", "SLO attainment vs offered arrival rate");
  for (const auto& [name, caption] :
       {std::pair<std::string, std::string>{"ttft_cdf", "TTFT distribution"}, {"tpot_cdf", "TPOT distribution"}}) {
    if (drawn(name)) img(name, caption);
    for (size_t j = 0; j < common_knobs.size(); ++j)
      if (drawn(name + "_at_" + std::to_string(j)))
        img(name + "_at_" + std::to_string(j),
            caption + " at " + data.knob + " = " + core::format_double(common_knobs[j]));
  }
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
  if (!data.classes.empty()) {
    h << "<h2>Request classes</h2>\n<table><tr><th>run</th><th class=l>class</th><th class=l>tenant</th><th>priority</th>"
         "<th>requests</th><th>completed</th><th>shed</th><th>TTFT p99</th><th>TPOT p99</th><th>goodput</th>"
         "<th>SLO (its own)</th></tr>\n";
    for (size_t i = 0; i < data.classes.size() && i < kMaxRunRows; ++i) {
      const ReportClassRow& c = data.classes[i];
      h << "<tr><td>" << c.run_id << "</td><td class=l>" << html(c.name) << "</td><td class=l>" << html(c.tenant)
        << "</td><td>" << c.priority << "</td><td>" << c.requests << "</td><td>" << c.completed << "</td><td>"
        << c.rejected_admission << "</td><td>" << num(c.ttft_ms_p99, 1) << "</td><td>" << num(c.tpot_ms_p99, 2)
        << "</td><td>" << num(c.goodput_req_s, 2) << "</td><td>" << pct(c.slo_attainment) << "</td></tr>\n";
    }
    h << "</table>\n";
    if (data.classes.size() > kMaxRunRows)
      h << "<p>(first " << kMaxRunRows << " of " << data.classes.size() << " class rows)</p>\n";
  }
  if (!data.fleet.empty()) {
    // One row per run, one column per figure name (in the order the first run wrote them).
    std::vector<std::string> names;
    std::map<int64_t, std::map<std::string, double>> by_run;
    for (const ReportFleetRow& f : data.fleet) {
      // Per-replica tier figures ("replica3.kv_host_loads") stay in the database, out of this table.
      if ((f.name.rfind("replica", 0) == 0 || f.name.rfind("store", 0) == 0) && f.name.find('.') != std::string::npos)
        continue;
      if (std::find(names.begin(), names.end(), f.name) == names.end()) names.push_back(f.name);
      by_run[f.run_id][f.name] = f.value;
    }
    h << "<h2>Fleet and KV-tier figures</h2>\n<p>The runs' fleet_metrics (docs/fleet.md, docs/kv-tiers.md).</p>\n"
         "<table><tr><th>run</th>";
    for (const std::string& n : names) h << "<th>" << html(n) << "</th>";
    h << "</tr>\n";
    size_t rows = 0;
    for (const auto& [run, values] : by_run) {
      if (rows++ == kMaxRunRows) break;
      h << "<tr><td>" << run << "</td>";
      for (const std::string& n : names) {
        const auto it = values.find(n);
        h << "<td>" << (it == values.end() ? std::string("-") : core::format_double(it->second)) << "</td>";
      }
      h << "</tr>\n";
    }
    h << "</table>\n";
    if (by_run.size() > kMaxRunRows) h << "<p>(first " << kMaxRunRows << " of " << by_run.size() << " runs)</p>\n";
  }
  h << "<p>Latencies in ms. Goodput counts completed requests meeting every SLO limit per simulated second; SLO "
       "attainment is those requests over all requests. Written by servesim "
    << SERVESIM_VERSION << ".</p>\n</body></html>\n";
  write_file(dir / "index.html", h.str());
  return images;
}

}  // namespace servesim::experiments
