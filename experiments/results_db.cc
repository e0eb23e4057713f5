#include "experiments/results_db.h"

#include <SQLiteCpp/SQLiteCpp.h>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <set>

#include "sim/core/crash_point.h"
#include "sim/core/error.h"

namespace servesim::experiments {
namespace {

// The tables a merge copies: every table of the database but `experiment` (points and
// point_settings by point, the others by run_id), so tables added to the run layout merge too.
std::vector<std::string> merged_tables(SQLite::Database& db, const std::string& schema) {
  std::vector<std::string> out;
  SQLite::Statement st(db, "SELECT name FROM " + schema +
                               ".sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
                               "AND name <> 'experiment' ORDER BY name");
  while (st.executeStep()) out.push_back(st.getColumn(0).getString());
  return out;
}

std::vector<std::string> columns(SQLite::Database& db, const std::string& schema, const std::string& table) {
  std::vector<std::string> out;
  SQLite::Statement st(db, "PRAGMA " + schema + ".table_info(" + table + ")");
  while (st.executeStep()) out.push_back(st.getColumn(1).getString());
  return out;
}

std::string column_list(const std::vector<std::string>& cols) {
  std::string out;
  for (const auto& c : cols) out += (out.empty() ? "" : ", ") + c;
  return out;
}

std::map<std::string, std::string> experiment_rows(SQLite::Database& db, const std::string& schema) {
  std::map<std::string, std::string> rows;
  SQLite::Statement st(db, "SELECT key, value FROM " + schema + ".experiment");
  while (st.executeStep()) rows[st.getColumn(0).getString()] = st.getColumn(1).getString();
  return rows;
}

ExperimentRecord record_from(const std::map<std::string, std::string>& rows) {
  ExperimentRecord r;
  auto get = [&](const char* key) {
    auto it = rows.find(key);
    return it == rows.end() ? std::string() : it->second;
  };
  r.identity = get("identity");
  r.kind = get("kind");
  r.name = get("name");
  r.source = get("source");
  const std::string points = get("points");
  r.points = points.empty() ? 0 : std::stoll(points);
  return r;
}

std::string describe(const ExperimentRecord& r) {
  return r.kind + " '" + r.name + "' (identity " + r.identity + ")";
}

}  // namespace

std::string experiment_schema() {
  return "CREATE TABLE IF NOT EXISTS experiment (\n"
         "  key TEXT PRIMARY KEY,\n"
         "  value TEXT NOT NULL\n"
         ");\n"
         "CREATE TABLE IF NOT EXISTS points (\n"
         "  point_index INTEGER PRIMARY KEY,\n"
         "  point_key TEXT NOT NULL UNIQUE,\n"
         "  run_id INTEGER NOT NULL UNIQUE REFERENCES runs(run_id),\n"
         "  seed INTEGER NOT NULL,\n"
         "  label TEXT NOT NULL,\n"
         "  configuration TEXT NOT NULL\n"
         ");\n"
         "CREATE TABLE IF NOT EXISTS point_settings (\n"
         "  point_index INTEGER NOT NULL REFERENCES points(point_index),\n"
         "  position INTEGER NOT NULL,\n"
         "  key TEXT NOT NULL,\n"
         "  value TEXT NOT NULL,\n"
         "  PRIMARY KEY (point_index, position)\n"
         ");\n";
}

RunFigures figures_of(const metrics::BufferSink& run) {
  const auto& s = run.summary();
  RunFigures f;
  f.run_id = run.info().run_id;
  f.requests_total = s.requests_total;
  f.requests_meeting_slo = s.requests_meeting_slo;
  f.output_tokens = s.output_tokens;
  f.sim_seconds = s.sim_seconds;
  f.slo_attainment = s.slo_attainment;
  f.goodput_req_s = s.goodput_req_s;
  f.throughput_req_s = s.throughput_req_s;
  f.throughput_output_tok_s = s.throughput_output_tok_s;
  f.gpu_hours = s.gpu_hours;
  f.cost_usd = s.cost_usd;
  f.cost_usd_per_mtok_output = s.cost_usd_per_mtok_output;
  f.ttft_ms_p90 = s.ttft_ms.p90;
  f.tpot_ms_p90 = s.tpot_ms.p90;
  f.window_requests = s.steady.window_requests;
  f.slo_attainment_window = s.steady.slo_attainment;
  f.arrival_window_s = s.arrival_window_s;
  f.goodput_req_s_window = s.goodput_req_s_window;
  f.throughput_output_tok_s_window = s.throughput_output_tok_s_window;
  f.throughput_output_tok_s_window_ci95 = s.steady.throughput_output_tok_s_ci95;
  f.cost_usd_per_mtok_output_window = s.cost_usd_per_mtok_output_window;
  f.ttft_ms_window_p90 = s.steady.ttft_ms.p90;
  f.tpot_ms_window_p90 = s.steady.tpot_ms.p90;
  f.stationary = s.steady.stationary;
  f.settled = s.steady.settled;
  f.in_system_trend_req_s = s.steady.in_system_trend_req_s;
  int64_t lo = std::numeric_limits<int64_t>::max(), hi = std::numeric_limits<int64_t>::min();
  for (const auto& [rec, m] : run.request_rows()) {
    lo = std::min(lo, rec.arrival.ns());
    hi = std::max(hi, rec.arrival.ns());
  }
  const size_t n = run.request_rows().size();
  if (n > 1 && hi > lo) f.offered_req_s = static_cast<double>(n - 1) / (static_cast<double>(hi - lo) / 1e9);
  return f;
}

ExperimentRecord read_experiment(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) throw core::InputError(path, 0, "", "no such results database");
  try {
    SQLite::Database db(path, SQLite::OPEN_READWRITE);  // read-write: a killed writer's journal rolls back
    db.exec("PRAGMA busy_timeout = 60000");
    if (!db.tableExists("experiment")) return {};
    return record_from(experiment_rows(db, "main"));
  } catch (const SQLite::Exception& e) {
    throw core::Error(path + ": cannot read it as a results database: " + e.what());
  }
}

ResultsDb::ResultsDb(const std::string& path, const ExperimentRecord& experiment) : path_(path) {
  sink_ = std::make_unique<metrics::SqliteSink>(path);
  SQLite::Database& db = sink_->database();
  try {
    SQLite::Transaction tx(db);
    db.exec(experiment_schema());
    const auto rows = experiment_rows(db, "main");
    if (rows.empty()) {
      const int64_t runs = db.execAndGet("SELECT COUNT(*) FROM runs").getInt64();
      if (runs > 0)
        throw core::Error(path + ": holds " + std::to_string(runs) +
                          " runs that are not part of an experiment (written by servesim run?); "
                          "write the experiment to a new database with --db");
      SQLite::Statement ins(db, "INSERT INTO experiment (key, value) VALUES (?, ?)");
      const std::pair<const char*, std::string> values[] = {{"identity", experiment.identity},
                                                            {"kind", experiment.kind},
                                                            {"name", experiment.name},
                                                            {"points", std::to_string(experiment.points)},
                                                            {"source", experiment.source}};
      for (const auto& [k, v] : values) {
        ins.bind(1, k);
        ins.bind(2, v);
        ins.exec();
        ins.reset();
      }
    } else {
      const ExperimentRecord have = record_from(rows);
      if (have.identity != experiment.identity || have.kind != experiment.kind)
        throw core::Error(path + ": holds the results of " + describe(have) + ", not of " + describe(experiment) +
                          (have.name == experiment.name && have.kind == experiment.kind
                               ? " (its points resolve to other runs now: a setting, or the content of a file the "
                                 "runs read, changed since)"
                               : "") +
                          "; results of different experiments are never mixed: use another --db");
    }
    const int64_t orphans =
        db.execAndGet("SELECT COUNT(*) FROM runs WHERE run_id NOT IN (SELECT run_id FROM points)").getInt64();
    if (orphans > 0)
      throw core::Error(path + ": holds " + std::to_string(orphans) +
                        " runs that are not points of the experiment (written by servesim run?); use another --db");
    tx.commit();
    SQLite::Statement st(db, "SELECT point_key, point_index FROM points");
    while (st.executeStep()) done_[st.getColumn(0).getString()] = st.getColumn(1).getInt64();
  } catch (const core::Error&) {
    throw;
  } catch (const std::exception& e) {
    throw core::Error(path + ": cannot prepare the experiment tables: " + e.what());
  }
}

ResultsDb::~ResultsDb() = default;

void ResultsDb::put_experiment_value(const std::string& key, const std::string& value) {
  try {
    SQLite::Database& db = sink_->database();
    SQLite::Statement st(db, "INSERT OR REPLACE INTO experiment (key, value) VALUES (?, ?)");
    st.bind(1, key);
    st.bind(2, value);
    st.exec();
  } catch (const std::exception& e) {
    throw core::Error(path_ + ": cannot store " + key + ": " + e.what());
  }
}

int64_t ResultsDb::next_point_index() const {
  int64_t next = 0;
  for (const auto& [key, index] : done_) next = std::max(next, index + 1);
  return next;
}

void ResultsDb::commit(const Point& point, const metrics::BufferSink& run) {
  if (run.info().run_id != point.index + 1)
    throw core::Error("internal: point " + std::to_string(point.index) + " ran as run " +
                      std::to_string(run.info().run_id));
  sink_->set_before_commit([&](SQLite::Database& db, int64_t run_id) {
    SQLite::Statement ins(db, "INSERT INTO points (point_index, point_key, run_id, seed, label, configuration) "
                              "VALUES (?, ?, ?, ?, ?, ?)");
    ins.bind(1, point.index);
    ins.bind(2, point.key);
    ins.bind(3, run_id);
    ins.bind(4, static_cast<int64_t>(point.seed));
    ins.bind(5, point.label());
    ins.bind(6, point.configuration());
    ins.exec();
    SQLite::Statement set(db, "INSERT INTO point_settings (point_index, position, key, value) VALUES (?, ?, ?, ?)");
    for (size_t i = 0; i < point.settings.size(); ++i) {
      set.bind(1, point.index);
      set.bind(2, static_cast<int64_t>(i));
      set.bind(3, point.settings[i].key);
      set.bind(4, point.settings[i].value);
      set.exec();
      set.reset();
    }
  });
  run.replay(*sink_);
  sink_->set_before_commit(nullptr);
  done_[point.key] = point.index;
  core::crash_point("sweep.point_committed");
}

RunFigures ResultsDb::figures(int64_t point_index) const {
  SQLite::Database& db = sink_->database();
  RunFigures f;
  try {
    SQLite::Statement st(db,
                         "SELECT run_id, requests_total, requests_meeting_slo, output_tokens, sim_seconds, "
                         "slo_attainment, goodput_req_s, throughput_req_s, throughput_output_tok_s, cost_usd, "
                         "cost_usd_per_mtok_output, ttft_ms_p90, tpot_ms_p90, gpu_hours, window_requests, "
                         "slo_attainment_window, arrival_window_s, goodput_req_s_window, throughput_output_tok_s_window, "
                         "throughput_output_tok_s_window_ci95, cost_usd_per_mtok_output_window, ttft_ms_window_p90, "
                         "tpot_ms_window_p90, stationary, in_system_trend_req_s, settled FROM runs WHERE run_id = ?");
    st.bind(1, point_index + 1);
    if (!st.executeStep()) throw core::Error("no run for point " + std::to_string(point_index));
    f.run_id = st.getColumn(0).getInt64();
    f.requests_total = static_cast<uint64_t>(st.getColumn(1).getInt64());
    f.requests_meeting_slo = static_cast<uint64_t>(st.getColumn(2).getInt64());
    f.output_tokens = st.getColumn(3).getInt64();
    f.sim_seconds = st.getColumn(4).getDouble();
    f.slo_attainment = st.getColumn(5).getDouble();
    f.goodput_req_s = st.getColumn(6).getDouble();
    f.throughput_req_s = st.getColumn(7).getDouble();
    f.throughput_output_tok_s = st.getColumn(8).getDouble();
    f.cost_usd = st.getColumn(9).getDouble();
    f.cost_usd_per_mtok_output = st.getColumn(10).getDouble();
    f.ttft_ms_p90 = st.getColumn(11).getDouble();
    f.tpot_ms_p90 = st.getColumn(12).getDouble();
    f.gpu_hours = st.getColumn(13).getDouble();
    f.window_requests = static_cast<uint64_t>(st.getColumn(14).getInt64());
    f.slo_attainment_window = st.getColumn(15).getDouble();
    f.arrival_window_s = st.getColumn(16).getDouble();
    f.goodput_req_s_window = st.getColumn(17).getDouble();
    f.throughput_output_tok_s_window = st.getColumn(18).getDouble();
    // NULL: unknown (a window too short for its batches).
    f.throughput_output_tok_s_window_ci95 =
        st.getColumn(19).isNull() ? std::numeric_limits<double>::quiet_NaN() : st.getColumn(19).getDouble();
    f.cost_usd_per_mtok_output_window = st.getColumn(20).getDouble();
    f.ttft_ms_window_p90 = st.getColumn(21).getDouble();
    f.tpot_ms_window_p90 = st.getColumn(22).getDouble();
    f.stationary = st.getColumn(23).getInt64() != 0;
    f.in_system_trend_req_s = st.getColumn(24).getDouble();
    f.settled = st.getColumn(25).getInt64() != 0;
    SQLite::Statement arr(db, "SELECT COUNT(*), MIN(arrival_ns), MAX(arrival_ns) FROM requests WHERE run_id = ?");
    arr.bind(1, point_index + 1);
    arr.executeStep();
    const int64_t n = arr.getColumn(0).getInt64();
    if (n > 1) {
      const double span = static_cast<double>(arr.getColumn(2).getInt64() - arr.getColumn(1).getInt64()) / 1e9;
      if (span > 0) f.offered_req_s = static_cast<double>(n - 1) / span;
    }
  } catch (const core::Error& e) {
    throw core::Error(path_ + ": " + e.what());
  } catch (const std::exception& e) {
    throw core::Error(path_ + ": cannot read the run of point " + std::to_string(point_index) + ": " + e.what());
  }
  return f;
}

MergeStats merge_databases(const std::string& out, const std::vector<std::string>& inputs) {
  if (inputs.empty()) throw core::Error("merge needs at least one input database");
  MergeStats stats;
  std::error_code ec;
  ExperimentRecord first;
  std::string first_path;
  for (const auto& in : inputs) {
    if (std::filesystem::exists(out, ec) && std::filesystem::equivalent(out, in, ec))
      throw core::Error(in + ": is the output database itself; name it once, as OUT");
    ExperimentRecord r = read_experiment(in);
    if (r.identity.empty())
      throw core::Error(in + ": is not an experiment database (no experiment table; written by servesim run?)");
    if (first.identity.empty()) {
      first = r;
      first_path = in;
    } else if (r.identity != first.identity || r.kind != first.kind) {
      throw core::Error(in + ": holds " + describe(r) + ", but " + first_path + " holds " + describe(first) +
                        "; only shards of one experiment merge");
    }
  }
  if (std::filesystem::exists(out, ec)) {
    ExperimentRecord have = read_experiment(out);
    if (!have.identity.empty() && (have.identity != first.identity || have.kind != first.kind))
      throw core::Error(out + ": holds " + describe(have) + ", but the inputs hold " + describe(first) +
                        "; merge into another file");
  }
  ResultsDb db(out, first);
  SQLite::Database& main = db.database();
  stats.inputs = static_cast<int64_t>(inputs.size());
  for (const auto& in : inputs) {
    try {
      SQLite::Statement attach(main, "ATTACH DATABASE ? AS src");
      attach.bind(1, in);
      attach.exec();
    } catch (const std::exception& e) {
      throw core::Error(in + ": cannot open it for merging: " + e.what());
    }
    try {
      // The fleet tables come with the first run that has fleet dynamics: a database may lack them.
      const auto has = [](const std::vector<std::string>& v, const char* t) {
        return std::find(v.begin(), v.end(), t) != v.end();
      };
      if (has(merged_tables(main, "src"), "fleet_events") && !has(merged_tables(main, "main"), "fleet_events"))
        main.exec(metrics::fleet_schema());
      // So does class_stats with the first run that has request classes.
      if (has(merged_tables(main, "src"), "class_stats") && !has(merged_tables(main, "main"), "class_stats")) {
        main.exec(metrics::class_schema());
        if (main.execAndGet("PRAGMA main.user_version").getInt() < 7) main.exec("PRAGMA main.user_version = 7");
      }
      // And the requests' class column (schema version 7): rows of runs without classes hold NULL.
      {
        const auto src_cols = columns(main, "src", "requests"), main_cols = columns(main, "main", "requests");
        if (has(src_cols, "class") && !has(main_cols, "class")) {
          main.exec("ALTER TABLE main.requests ADD COLUMN class TEXT");
          if (main.execAndGet("PRAGMA main.user_version").getInt() < 7) main.exec("PRAGMA main.user_version = 7");
        }
      }
      std::vector<std::string> tables;
      for (const std::string& t : merged_tables(main, "main"))
        if (has(merged_tables(main, "src"), t.c_str()) ||
            (t != "fleet_events" && t != "fleet_metrics" && t != "class_stats"))
          tables.push_back(t);
      if (merged_tables(main, "src") != tables)
        throw core::Error(in + ": holds the tables (" + column_list(merged_tables(main, "src")) + "), " + out +
                          " holds (" + column_list(tables) + "): written by another servesim version");
      for (const std::string& table : tables) {
        auto mine = columns(main, "main", table), theirs = columns(main, "src", table);
        std::set<std::string> a(mine.begin(), mine.end()), b(theirs.begin(), theirs.end());
        if (table == "requests" && !b.count("class")) a.erase("class");  // a shard without classes
        if (a != b)
          throw core::Error(in + ": its table '" + table + "' has columns (" + column_list(theirs) + "), " + out +
                            " has (" + column_list(mine) + "): written by another servesim version");
      }
      SQLite::Transaction tx(main);
      const int64_t conflicts =
          main.execAndGet("SELECT COUNT(*) FROM src.points s JOIN main.points m ON s.point_index = m.point_index "
                          "WHERE s.point_key <> m.point_key OR s.run_id <> m.run_id")
              .getInt64();
      if (conflicts > 0)
        throw core::Error(in + ": " + std::to_string(conflicts) + " of its points have another configuration than " +
                          "the same points in " + out + "; the databases contradict each other");
      main.exec("DROP TABLE IF EXISTS temp.new_points");
      main.exec(
          "CREATE TEMP TABLE new_points AS SELECT point_index, run_id FROM src.points "
          "WHERE point_key NOT IN (SELECT point_key FROM main.points) ORDER BY point_index");
      const int64_t added = main.execAndGet("SELECT COUNT(*) FROM temp.new_points").getInt64();
      const int64_t theirs = main.execAndGet("SELECT COUNT(*) FROM src.points").getInt64();
      for (const std::string& std_table : tables) {
        auto table_columns = columns(main, "main", std_table);
        if (std_table == "requests" && !has(columns(main, "src", "requests"), "class"))
          table_columns.erase(std::remove(table_columns.begin(), table_columns.end(), "class"), table_columns.end());
        const std::string cols = column_list(table_columns);
        std::string where, order;
        if (std_table == "points" || std_table == "point_settings") {
          where = "point_index IN (SELECT point_index FROM temp.new_points)";
          order = std_table == "points" ? "point_index" : "point_index, position";
        } else {
          if (std::find(table_columns.begin(), table_columns.end(), "run_id") == table_columns.end())
            throw core::Error(out + ": table '" + std_table + "' has no run_id column; cannot merge it");
          where = "run_id IN (SELECT run_id FROM temp.new_points)";
          order = std_table == "runs" ? "run_id" : "run_id, rowid";
        }
        main.exec("INSERT INTO main." + std_table + " (" + cols + ") SELECT " + cols + " FROM src." + std_table +
                  " WHERE " + where + " ORDER BY " + order);
      }
      main.exec("DROP TABLE temp.new_points");
      tx.commit();
      stats.points_added += added;
      stats.points_already += theirs - added;
    } catch (const core::Error&) {
      main.exec("DETACH DATABASE src");
      throw;
    } catch (const std::exception& e) {
      main.exec("DETACH DATABASE src");
      throw core::Error(in + ": cannot merge it into " + out + ": " + e.what());
    }
    main.exec("DETACH DATABASE src");
  }
  stats.points_total = main.execAndGet("SELECT COUNT(*) FROM points").getInt64();
  stats.points_expected = first.points;
  return stats;
}

}  // namespace servesim::experiments
