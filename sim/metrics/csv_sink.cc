#include "sim/metrics/csv_sink.h"

#include <filesystem>
#include <sstream>

#include "sim/core/crash_point.h"
#include "sim/core/error.h"
#include "sim/core/format.h"

namespace servesim::metrics {
namespace fs = std::filesystem;

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += (c == '"') ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

static std::string number(double v, bool integer) {
  return integer ? std::to_string(static_cast<int64_t>(v)) : core::format_double(v);
}

CsvSink::CsvSink(std::string dir) : dir_(std::move(dir)) {
  std::error_code ec;
  if (fs::exists(dir_, ec) && !fs::is_directory(dir_, ec))
    throw core::Error(dir_ + ": exists and is not a directory (--csv expects a directory)");
  fs::create_directories(dir_, ec);
  if (ec) throw core::Error(dir_ + ": cannot create the CSV directory: " + ec.message());
}

CsvSink::~CsvSink() {
  // An unfinished run leaves nothing: drop the staged rows.
  std::error_code ec;
  for (Table* t : {&requests_, &samples_, &replica_stats_}) {
    if (t->out.is_open()) t->out.close();
    if (!t->staged.empty()) fs::remove(t->staged, ec);
  }
}

void CsvSink::open_table(Table& t, const std::string& name, const std::string& header) {
  t.name = name;
  t.header = header;
  t.staged = (fs::path(dir_) / ("." + name + ".staged")).string();
  t.out.open(t.staged, std::ios::binary | std::ios::trunc);
  if (!t.out) throw core::Error(t.staged + ": cannot write (is the directory writable?)");
}

void CsvSink::begin_run(RunInfo& info) {
  if (info.run_id == 0) {
    // Number after the runs already in runs.csv (records may span lines inside quoted fields).
    const fs::path runs = fs::path(dir_) / "runs.csv";
    std::ifstream in(runs, std::ios::binary);
    std::stringstream buf;
    buf << in.rdbuf();
    const std::string text = buf.str();
    int64_t max_id = 0;
    bool header = true, quoted = false, at_start = true;
    for (size_t i = 0; i < text.size(); ++i) {
      const char c = text[i];
      if (at_start && !header) {
        size_t end = i;
        while (end < text.size() && text[end] >= '0' && text[end] <= '9') ++end;
        if (end == i || end >= text.size() || text[end] != ',')
          throw core::Error(runs.string() + ": a record does not start with a run_id; use another --csv directory");
        max_id = std::max<int64_t>(max_id, std::stoll(text.substr(i, end - i)));
      }
      at_start = false;
      if (c == '"') quoted = !quoted;
      if (c == '\n' && !quoted) {
        header = false;
        at_start = true;
      }
    }
    // A run killed while publishing may have left rows in the other files under a number runs.csv
    // does not name: number after those too, so that they are never mistaken for this run's.
    for (const char* name : {"requests.csv", "replica_timeseries.csv", "replica_stats.csv"}) {
      std::ifstream rows(fs::path(dir_) / name);
      std::string line;
      std::getline(rows, line);  // header
      while (std::getline(rows, line)) {
        const size_t comma = line.find(',');
        if (comma == 0 || comma == std::string::npos) continue;
        int64_t id = 0;
        for (size_t i = 0; i < comma && i < 18 && line[i] >= '0' && line[i] <= '9'; ++i) id = id * 10 + (line[i] - '0');
        max_id = std::max(max_id, id);
      }
    }
    info.run_id = max_id + 1;
  }
  info_ = info;
  open_table(requests_, "requests.csv",
             "run_id,request_id,replica,outcome,prompt_tokens,output_tokens,arrival_ns,first_token_ns,"
             "finish_ns,ttft_ms,tpot_ms,e2e_ms,preemptions,meets_slo,cached_tokens,decode_replica,kv_transfer_bytes,"
             "engine_first_token_ns,engine_finish_ns,stage");
  open_table(samples_, "replica_timeseries.csv",
             "run_id,replica,time_ns,queued,running,kv_blocks_used,kv_blocks_total");
  std::string stats_header = "run_id,replica,role,gpu";
  for (const auto& v : flatten(ReplicaStats{})) stats_header += "," + v.name;
  open_table(replica_stats_, "replica_stats.csv", stats_header);
  open_ = true;
}

void CsvSink::add_request(const core::RequestRecord& r, const RequestMetrics& m) {
  auto& o = requests_.out;
  const bool completed = r.outcome == core::RequestOutcome::kCompleted;
  o << info_.run_id << ',' << r.id << ',' << r.replica << ',' << core::outcome_name(r.outcome) << ','
    << r.prompt_tokens << ',' << r.output_tokens << ',' << r.arrival.ns() << ',';
  const bool timed_out = r.outcome == core::RequestOutcome::kTimedOut;
  if (completed) {
    o << r.client_first_token.ns() << ',' << r.client_finish.ns() << ',' << core::format_double(m.ttft_ms) << ','
      << (m.tpot_ms ? core::format_double(*m.tpot_ms) : std::string()) << ',' << core::format_double(m.e2e_ms);
  } else if (timed_out) {
    o << ',' << r.client_finish.ns() << ",,,";  // when the client gave up; no latencies
  } else {
    o << ",,,,";
  }
  o << ',' << r.preemptions << ',' << (m.meets_slo ? 1 : 0) << ',' << r.cached_tokens << ',' << r.decode_replica
    << ',' << core::format_double(r.kv_transfer_bytes) << ',';
  if (completed) o << r.first_token.ns() << ',' << r.finish.ns();
  else if (timed_out) o << ',' << r.finish.ns();
  else o << ',';
  o << ',' << r.stage << '\n';
}

void CsvSink::add_sample(const ReplicaSample& s) {
  samples_.out << info_.run_id << ',' << s.replica << ',' << s.time_ns << ',' << s.queued << ',' << s.running
               << ',' << s.kv_blocks_used << ',' << s.kv_blocks_total << '\n';
}

void CsvSink::add_replica_stats(const ReplicaStats& r) {
  auto& o = replica_stats_.out;
  o << info_.run_id << ',' << r.replica << ',' << csv_field(r.role) << ',' << csv_field(r.gpu);
  for (const auto& v : flatten(r)) o << ',' << number(v.value, v.integer);
  o << '\n';
}

void CsvSink::publish(Table& t, const std::string& extra_rows) {
  const fs::path target = fs::path(dir_) / t.name;
  const fs::path tmp = fs::path(dir_) / ("." + t.name + ".tmp");
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  if (!out) throw core::Error(tmp.string() + ": cannot write");
  std::ifstream old(target, std::ios::binary);
  if (old) {
    std::string first;
    std::getline(old, first);
    if (first != t.header)
      throw core::Error(target.string() + ": has other columns than this version writes; use another --csv directory");
    out << first << '\n';
    // Inserting an empty stream buffer sets failbit: copy only when rows follow the header.
    if (old.peek() != std::ifstream::traits_type::eof()) out << old.rdbuf();
  } else {
    out << t.header << '\n';
  }
  if (t.out.is_open()) {
    t.out.close();
    std::ifstream staged(t.staged, std::ios::binary);
    if (staged.peek() != std::ifstream::traits_type::eof()) out << staged.rdbuf();
  }
  out << extra_rows;
  out.close();
  if (!out) throw core::Error(tmp.string() + ": write failed (disk full?)");
  std::error_code ec;
  core::crash_point("csv.before_rename");
  fs::rename(tmp, target, ec);
  if (ec) throw core::Error(target.string() + ": cannot replace: " + ec.message());
  core::crash_point("csv.renamed");
  if (!t.staged.empty()) fs::remove(t.staged, ec);
  t.staged.clear();
}

void CsvSink::end_run(const RunSummary& summary) {
  if (!open_) throw core::Error("internal: CSV run ended before it began");
  const auto values = flatten(summary);
  std::string header = "run_id,config_hash,seed,version,config";
  for (const auto& v : values) header += "," + v.name;
  std::ostringstream row;
  row << info_.run_id << ',' << info_.config_hash << ',' << info_.seed << ',' << csv_field(info_.version) << ','
      << csv_field(info_.config_toml);
  for (const auto& v : values) row << ',' << number(v.value, v.integer);
  row << '\n';
  Table runs;
  runs.name = "runs.csv";
  runs.header = header;
  // The run becomes visible when runs.csv names it: publish its rows first.
  publish(requests_, "");
  publish(samples_, "");
  publish(replica_stats_, "");
  publish(runs, row.str());
  open_ = false;
}

}  // namespace servesim::metrics
