#include "sim/metrics/csv_sink.h"

#include <cmath>
#include <unistd.h>

#include <filesystem>
#include <set>
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
  if (std::isnan(v)) return "";  // unknown (NamedValue::nullable), as NULL in SQLite
  return integer ? std::to_string(static_cast<int64_t>(v)) : core::format_double(v);
}

namespace {

// requests.csv's columns; a directory that holds a run with request classes has one more, `class`
// (the class's name; empty in the rows of runs without classes).
constexpr const char* kRequestsHeader =
    "run_id,request_id,replica,outcome,prompt_tokens,output_tokens,arrival_ns,first_token_ns,"
    "finish_ns,ttft_ms,tpot_ms,e2e_ms,preemptions,meets_slo,cached_tokens,decode_replica,kv_transfer_bytes,"
    "engine_first_token_ns,engine_finish_ns,stage";
constexpr const char* kClassColumn = ",class";

std::string runs_header() {
  std::string header = "run_id,config_hash,seed,version,config";
  for (const auto& v : flatten(RunSummary{})) header += "," + v.name;
  return header;
}

// The run_id a record starts with, or -1 when it does not start with digits and a comma.
int64_t leading_id(std::string_view line) {
  size_t end = 0;
  int64_t id = 0;
  while (end < line.size() && end < 18 && line[end] >= '0' && line[end] <= '9') id = id * 10 + (line[end++] - '0');
  return end == 0 || end >= line.size() || line[end] != ',' ? -1 : id;
}

// The records of runs.csv (a record may span lines inside a quoted field), with their run ids.
std::vector<std::pair<int64_t, std::string>> read_runs(const fs::path& path, const std::string& header) {
  std::vector<std::pair<int64_t, std::string>> records;
  std::ifstream in(path, std::ios::binary);
  if (!in) return records;
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string text = buf.str();
  if (text.empty()) return records;
  const size_t first_nl = text.find('\n');
  if (text.substr(0, first_nl) != header)
    throw core::Error(path.string() + ": has other columns than this version writes (or is not a servesim runs.csv); "
                      "use another --csv directory");
  size_t start = first_nl == std::string::npos ? text.size() : first_nl + 1;
  bool quoted = false;
  for (size_t i = start; i < text.size(); ++i) {
    if (text[i] == '"') quoted = !quoted;
    if (text[i] != '\n' || quoted) continue;
    const std::string record = text.substr(start, i + 1 - start);
    const int64_t id = leading_id(record);
    if (id < 0) throw core::Error(path.string() + ": a record does not start with a run_id; use another --csv directory");
    records.emplace_back(id, record);
    start = i + 1;
  }
  if (start < text.size())  // a last record without its newline: a run that was never whole
    throw core::Error(path.string() + ": ends in the middle of a record; use another --csv directory");
  return records;
}

}  // namespace

const std::vector<std::string>& CsvSink::file_names() {
  static const std::vector<std::string> names = {"runs.csv",          "requests.csv",      "replica_timeseries.csv",
                                                 "replica_stats.csv", "fleet_events.csv",  "fleet_metrics.csv",
                                                 "class_stats.csv"};
  return names;
}

CsvSink::CsvSink(std::string dir) : dir_(std::move(dir)) {
  std::error_code ec;
  if (fs::exists(dir_, ec) && !fs::is_directory(dir_, ec))
    throw core::Error(dir_ + ": exists and is not a directory (--csv expects a directory)");
  fs::create_directories(dir_, ec);
  if (ec) throw core::Error(dir_ + ": cannot create the CSV directory: " + ec.message());
}

CsvSink::~CsvSink() {
  // An unfinished run leaves nothing: drop the staged rows (the AtomicFiles drop their temporaries).
  std::error_code ec;
  for (Table* t : {&requests_, &samples_, &replica_stats_}) {
    if (t->out.is_open()) t->out.close();
    if (!t->staged.empty()) fs::remove(t->staged, ec);
  }
}

void CsvSink::open_table(Table& t, const std::string& name, const std::string& header) {
  t.name = name;
  t.header = header;
  // A private name: several processes may stage into one directory at once.
  std::string tmpl = (fs::path(dir_) / ("." + name + ".staged-XXXXXX")).string();
  const int fd = ::mkstemp(tmpl.data());
  if (fd < 0) throw core::Error((fs::path(dir_) / name).string() + ": cannot write (is the directory writable?)");
  ::close(fd);
  t.staged = tmpl;
  t.out.open(t.staged, std::ios::binary | std::ios::trunc);
  if (!t.out) throw core::Error(t.staged + ": cannot write (is the directory writable?)");
}

void CsvSink::begin_run(RunInfo& info) {
  info_ = info;
  next_request_ = 0;
  pending_requests_.clear();
  open_table(requests_, "requests.csv", kRequestsHeader);
  open_table(samples_, "replica_timeseries.csv",
             "run_id,replica,time_ns,queued,running,kv_blocks_used,kv_blocks_total");
  std::string stats_header = "run_id,replica,role,gpu";
  for (const auto& v : flatten(ReplicaStats{})) stats_header += "," + v.name;
  open_table(replica_stats_, "replica_stats.csv", stats_header);
  runs_.name = "runs.csv";
  runs_.header = runs_header();
  fleet_events_.name = "fleet_events.csv";
  fleet_events_.header = "run_id,time_ns,kind,replica,request_id,value";
  fleet_metrics_.name = "fleet_metrics.csv";
  fleet_metrics_.header = "run_id,name,value";
  class_stats_.name = "class_stats.csv";
  class_stats_.header = "run_id,class,tenant";
  for (const auto& v : flatten(ClassSummary{})) class_stats_.header += "," + v.name;
  fleet_event_rows_.clear();
  open_ = true;
  staged_ = false;
}

void CsvSink::write_request(const std::string& row) { requests_.out << row; }

void CsvSink::add_request(const core::RequestRecord& r, const RequestMetrics& m) {
  std::ostringstream o;
  const bool completed = r.outcome == core::RequestOutcome::kCompleted;
  o << r.id << ',' << r.replica << ',' << core::outcome_name(r.outcome) << ',' << r.prompt_tokens << ','
    << r.output_tokens << ',' << r.arrival.ns() << ',';
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
  o << ',' << r.stage;
  if (!info_.class_names.empty()) {
    if (r.request_class >= info_.class_names.size())
      throw core::Error("internal: request " + std::to_string(r.id) + " has class " + std::to_string(r.request_class) +
                        " of " + std::to_string(info_.class_names.size()));
    o << ',' << info_.class_names[r.request_class];  // names hold no comma, quote or control character
  }
  o << '\n';
  // Rows in request-id order: hold this one until every earlier request has finished.
  if (r.id != next_request_) {
    pending_requests_.emplace(r.id, o.str());
    return;
  }
  write_request(o.str());
  ++next_request_;
  for (auto it = pending_requests_.begin(); it != pending_requests_.end() && it->first == next_request_;
       it = pending_requests_.erase(it), ++next_request_)
    write_request(it->second);
}

void CsvSink::add_sample(const ReplicaSample& s) {
  samples_.out << s.replica << ',' << s.time_ns << ',' << s.queued << ',' << s.running << ',' << s.kv_blocks_used
               << ',' << s.kv_blocks_total << '\n';
}

void CsvSink::add_fleet_event(const core::FleetEvent& e) {
  // The database's columns: request_id only for a rerouted or retried request (and a slowed link's number).
  const bool request = e.kind == core::FleetEventKind::kRequestRerouted || e.kind == core::FleetEventKind::kRequestRetried ||
                       e.kind == core::FleetEventKind::kLinkSpeed;
  fleet_event_rows_ += std::to_string(e.time.ns()) + ',' + std::string(core::fleet_event_name(e.kind)) + ',' +
                       std::to_string(e.replica) + ',' + (request ? std::to_string(e.request) : std::string()) + ',' +
                       core::format_double(e.value) + '\n';
}

void CsvSink::stage_optional(Table& t, const std::string& rows, const std::set<int64_t>& ids) {
  const fs::path target = fs::path(dir_) / t.name;
  std::error_code ec;
  if (rows.empty() && !fs::exists(target, ec)) return;
  const std::string header = t.header;
  t.next = std::make_unique<core::AtomicFile>(target.string(), "a servesim " + t.name, [header](std::string_view head) {
    return head.substr(0, std::min(head.size(), header.size())) == header.substr(0, head.size());
  });
  std::ostream& out = t.next->stream();
  out << header << '\n';
  std::ifstream old(target, std::ios::binary);
  std::string line;
  if (old && std::getline(old, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line != header)
      throw core::Error(target.string() + ": has other columns than this version writes; use another --csv directory");
    while (std::getline(old, line))
      if (ids.count(leading_id(line))) out << line << '\n';
  }
  const std::string prefix = std::to_string(info_.run_id) + ",";
  for (size_t at = 0; at < rows.size();) {
    const size_t nl = rows.find('\n', at);
    out << prefix << rows.substr(at, nl + 1 - at);
    at = nl + 1;
  }
  t.next->finish();
}

void CsvSink::add_replica_stats(const ReplicaStats& r) {
  auto& o = replica_stats_.out;
  o << r.replica << ',' << csv_field(r.role) << ',' << csv_field(r.gpu);
  for (const auto& v : flatten(r)) o << ',' << number(v.value, v.integer);
  o << '\n';
}

void CsvSink::stage(const RunSummary& summary) {
  if (!open_) throw core::Error("internal: CSV run staged before it began");
  if (staged_) return;
  // Ids a run never reported (a sink fed by hand) leave no gap that holds rows back for ever.
  for (const auto& [id, row] : pending_requests_) write_request(row);
  pending_requests_.clear();
  for (Table* t : {&requests_, &samples_, &replica_stats_}) {
    t->out.close();
    if (!t->out) throw core::Error(t->staged + ": write failed (disk full?)");
  }
  // From here to end_run the directory is ours: the run's number and every file's new content are
  // decided against what the files hold now.
  lock_ = std::make_unique<core::DirectoryLock>(dir_);
  const auto runs = read_runs(fs::path(dir_) / runs_.name, runs_.header);
  std::set<int64_t> ids;
  int64_t max_id = 0;
  for (const auto& [id, record] : runs) {
    ids.insert(id);
    max_id = std::max(max_id, id);
  }
  if (info_.run_id == 0) {
    info_.run_id = max_id + 1;
  } else if (ids.count(info_.run_id)) {
    throw core::Error((fs::path(dir_) / runs_.name).string() + ": already holds run " +
                      std::to_string(info_.run_id) +
                      ": the CSV directory goes with another results database (with --db, the database numbers "
                      "the CSV rows); use a CSV directory of its own for this database");
  }
  const std::string prefix = std::to_string(info_.run_id) + ",";

  for (Table* t : {&requests_, &samples_, &replica_stats_}) {
    const fs::path target = fs::path(dir_) / t->name;
    const std::string header = t->header;
    t->next = std::make_unique<core::AtomicFile>(
        target.string(), "a servesim " + t->name, [header](std::string_view head) {
          return head.substr(0, std::min(head.size(), header.size())) == header.substr(0, head.size());
        });
    std::ifstream old(target, std::ios::binary);
    std::string line, old_header;
    const bool has_old = old && std::getline(old, old_header);
    if (has_old && !old_header.empty() && old_header.back() == '\r') old_header.pop_back();
    // requests.csv gains the class column with the first run that has classes; rows without a class
    // (earlier runs, or this one) get an empty field there.
    const bool requests = t == &requests_;
    const bool old_class = requests && has_old && old_header == header + kClassColumn;
    const bool class_column = requests && (old_class || !info_.class_names.empty());
    const std::string old_pad = class_column && !old_class ? "," : "";
    const std::string new_pad = class_column && info_.class_names.empty() ? "," : "";
    std::ostream& out = t->next->stream();
    out << header << (class_column ? kClassColumn : "") << '\n';
    if (has_old) {
      if (old_header != header && !old_class)
        throw core::Error(target.string() + ": has other columns than this version writes; use another --csv directory");
      // Rows of runs runs.csv names; others are left over from a process killed while publishing.
      while (std::getline(old, line))
        if (ids.count(leading_id(line))) out << line << old_pad << '\n';
    }
    std::ifstream staged(t->staged, std::ios::binary);
    while (std::getline(staged, line)) out << prefix << line << new_pad << '\n';
    t->next->finish();
  }
  std::string metrics, classes;
  for (const auto& v : summary.fleet) metrics += csv_field(v.name) + ',' + number(v.value, v.integer) + '\n';
  for (const ClassSummary& c : summary.classes) {
    classes += csv_field(c.name) + ',' + csv_field(c.tenant);
    for (const auto& v : flatten(c)) classes += ',' + number(v.value, v.integer);
    classes += '\n';
  }
  stage_optional(fleet_events_, fleet_event_rows_, ids);
  stage_optional(fleet_metrics_, metrics, ids);
  stage_optional(class_stats_, classes, ids);
  std::ostringstream row;
  row << info_.run_id << ',' << info_.config_hash << ',' << info_.seed << ',' << csv_field(info_.version) << ','
      << csv_field(info_.config_toml);
  for (const auto& v : flatten(summary)) row << ',' << number(v.value, v.integer);
  runs_.next = std::make_unique<core::AtomicFile>((fs::path(dir_) / runs_.name).string(), "a servesim runs.csv",
                                                  [](std::string_view) { return true; });  // read_runs checked it
  std::ostream& out = runs_.next->stream();
  out << runs_.header << '\n';
  for (const auto& [id, record] : runs) out << record;
  out << row.str() << '\n';
  runs_.next->finish();
  staged_ = true;
}

void CsvSink::end_run(const RunSummary& summary) {
  stage(summary);
  // The run becomes visible when runs.csv names it: its rows first.
  for (Table* t : {&requests_, &samples_, &replica_stats_, &fleet_events_, &fleet_metrics_, &class_stats_, &runs_}) {
    if (!t->next) continue;  // an optional table this run does not write
    core::crash_point("csv.before_rename");
    t->next->publish();
    core::crash_point("csv.renamed");
    t->next.reset();
  }
  std::error_code ec;
  for (Table* t : {&requests_, &samples_, &replica_stats_}) {
    fs::remove(t->staged, ec);
    t->staged.clear();
  }
  lock_.reset();
  open_ = false;
}

}  // namespace servesim::metrics
