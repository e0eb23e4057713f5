// Results are never lost or silently replaced (issue 14), through the real binary:
//  - no output overwrites an input or another output of the same command, however the path is
//    spelt (./x, a/../x, absolute, a symbolic or a hard link): every pair of roles is tried;
//  - an existing file of another kind is never replaced (each output x each foreign kind);
//  - a write that fails (a full disk, simulated with RLIMIT_FSIZE) leaves every output as it was,
//    and a re-run then adds the run exactly once;
//  - concurrent runs into one CSV directory neither repeat run ids nor lose rows (assertions that
//    hold for every interleaving);
//  - databases: a single run never goes into a sweep's database, nothing goes into another
//    program's SQLite file (run or merge), an earlier servesim database is adopted.
#include <gtest/gtest.h>

#include <SQLiteCpp/SQLiteCpp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/reliability/process.h"
#include "tests/test_paths.h"

namespace servesim::testing {
namespace {

namespace fs = std::filesystem;

constexpr double kTimeoutS = 60;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void spit(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

std::string config(int requests = 200) {
  return "seed = 3\n[workload]\nkind = \"azure_csv\"\npath = \"trace.csv\"\nmax_requests = " + std::to_string(requests) +
         "\n[model]\nkind = \"llama-3-8b\"\n[gpu]\nkind = \"h100-sxm\"\n[output]\nsample_interval_ms = 0\n";
}

std::string trace(int rows) {
  std::string s = "TIMESTAMP,ContextTokens,GeneratedTokens\n";
  for (int i = 0; i < rows; ++i) {
    char line[96];
    std::snprintf(line, sizeof line, "2023-11-16 18:%02d:%02d.%03d0000,%d,%d\n", i / 6000 % 60, i / 100 % 60, i % 100 * 10,
                  100 + i % 700, 20 + i % 90);
    s += line;
  }
  return s;
}

ProcessResult servesim(const std::vector<std::string>& args, const fs::path& cwd, uint64_t file_size_limit = 0) {
  std::vector<std::string> argv = {servesim_bin()};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_process(argv, cwd.string(), kTimeoutS, -1, {}, file_size_limit);
}

int64_t query(const fs::path& db, const std::string& sql) {
  SQLite::Database d(db.string());
  return d.execAndGet(sql).getInt64();
}

// Every regular file under `dir` with its bytes (what "left as it was" compares).
std::map<std::string, std::string> snapshot(const fs::path& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_symlink() || !e.is_regular_file()) continue;
    files[fs::relative(e.path(), dir).string()] = slurp(e.path());
  }
  return files;
}

// A directory with a configuration, its trace, and outputs of one earlier run: results.db, t.json
// (a timeline) and csv/.
struct Workspace {
  TempDir dir;
  fs::path root() const { return dir.path(); }
  Workspace(int requests = 200) {
    spit(root() / "run.toml", config(requests));
    spit(root() / "trace.csv", trace(2000));
    fs::create_directories(root() / "sub");
    const ProcessResult r =
        servesim({"run", "run.toml", "--db", "results.db", "--csv", "csv", "--timeline", "t.json", "--json"}, root());
    EXPECT_EQ(r.exit_code, 0) << r.err;
  }
};

void expect_refused_cleanly(const ProcessResult& r, const std::map<std::string, std::string>& before,
                            const fs::path& dir, const std::string& what) {
  EXPECT_FALSE(r.timed_out) << what;
  EXPECT_NE(r.exit_code, 0) << what;
  EXPECT_EQ(r.err.rfind("servesim: ", 0), 0u) << what << ": " << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << what << ": not one paragraph: " << r.err;
  EXPECT_TRUE(r.out.empty()) << what << ": " << r.out;
  const auto after = snapshot(dir);
  for (const auto& [name, bytes] : before) {
    auto it = after.find(name);
    ASSERT_NE(it, after.end()) << what << ": " << name << " is gone";
    EXPECT_TRUE(it->second == bytes) << what << ": " << name << " changed";
  }
  for (const auto& [name, bytes] : after)
    EXPECT_TRUE(before.count(name)) << what << ": left a new file " << name;
}

// ---- no output overwrites an input or another output ------------------------------------------------

// The spellings of one file, relative to the workspace (the last two are links made on demand).
std::vector<std::string> spellings(const fs::path& root, const std::string& name) {
  std::vector<std::string> out = {name, "./" + name, "sub/../" + name, (root / name).string()};
  const std::string flat = fs::path(name).filename().string();
  fs::create_symlink(root / name, root / ("symlink-" + flat));
  out.push_back("symlink-" + flat);
  if (fs::is_regular_file(root / name)) {
    fs::create_hard_link(root / name, root / ("hardlink-" + flat));
    out.push_back("hardlink-" + flat);
  }
  return out;
}

struct Role {
  std::string name;         // as the message names it
  std::string file;         // the file it is in the workspace
  bool output;
  // The arguments that make `path` this role's file (outputs only).
  std::function<std::vector<std::string>(const std::string& path)> args;
};

TEST(OutputsTest, NoOutputOverwritesAnInputOrAnotherOutputHoweverThePathIsSpelt) {
  ASSERT_FALSE(servesim_bin().empty());
  const std::vector<Role> roles = {
      {"the configuration", "run.toml", false, nullptr},
      {"'workload.path'", "trace.csv", false, nullptr},
      {"--db", "results.db", true, [](const std::string& p) { return std::vector<std::string>{"--db", p}; }},
      {"--timeline", "t.json", true, [](const std::string& p) { return std::vector<std::string>{"--timeline", p}; }},
      {"--csv", "csv", true, [](const std::string& p) { return std::vector<std::string>{"--csv", p}; }},
      {"--csv (requests.csv)", "csv/requests.csv", true, nullptr},
  };
  // The outputs a case names besides the one under test, at their own files.
  auto defaults = [](const std::string& except) {
    std::vector<std::string> a;
    if (except != "--db") a.insert(a.end(), {"--db", "results.db"});
    if (except != "--timeline") a.insert(a.end(), {"--timeline", "t.json"});
    if (except != "--csv") a.insert(a.end(), {"--csv", "csv"});
    return a;
  };
  int cases = 0;
  for (const Role& out : roles) {
    if (!out.args) continue;
    for (const Role& other : roles) {
      if (&other == &out || (out.name == "--csv" && other.name.rfind("--csv", 0) == 0)) continue;
      Workspace w;
      const auto before = snapshot(w.root());
      for (const std::string& spelling : spellings(w.root(), other.file)) {
        const auto before_case = snapshot(w.root());
        std::vector<std::string> args = {"run", "run.toml"};
        const auto more = defaults(out.name);
        args.insert(args.end(), more.begin(), more.end());
        const auto own = out.args(spelling);
        args.insert(args.end(), own.begin(), own.end());
        const std::string what = out.name + " " + spelling + " over " + other.name;
        const ProcessResult r = servesim(args, w.root());
        expect_refused_cleanly(r, before_case, w.root(), what);
        EXPECT_EQ(r.exit_code, 2) << what << ": " << r.err;
        EXPECT_NE(r.err.find(out.name.substr(0, out.name.find(' '))), std::string::npos) << what << ": " << r.err;
        EXPECT_NE(r.err.find("an output never overwrites"), std::string::npos) << what << ": " << r.err;
        ++cases;
      }
      for (const auto& [name, bytes] : before) EXPECT_TRUE(slurp(w.root() / name) == bytes) << name;
    }
  }
  EXPECT_GE(cases, 60);
}

// Every other command that writes files: an output over an input, and an output over a file of
// another kind, refused before anything is written.
TEST(OutputsTest, EveryCommandThatWritesFilesChecksItsOutputs) {
  Workspace w;
  spit(w.root() / "exp.toml", "base = \"run.toml\"\n[set]\nslo.ttft_ms = 2000\n[[axis]]\nkey = \"scheduler.max_num_seqs\"\n"
                               "values = [64, 128]\n");
  spit(w.root() / "report" / "index.html", "<!DOCTYPE html>\n<html><head><title>my site</title></head></html>\n");
  spit(w.root() / "report" / "plots.gp", "# my own plot script\n");
  spit(w.root() / "jobs" / "sweep.sbatch", "#!/bin/bash\n#SBATCH --job-name=mine\nmy_job\n");
  spit(w.root() / "notes.toml", "# my notes\n");
  const std::vector<std::vector<std::string>> cases = {
      {"sweep", "exp.toml", "--db", "exp.toml"},
      {"sweep", "exp.toml", "--db", "./run.toml"},
      {"sweep", "exp.toml", "--db", "sub/../trace.csv"},
      {"capacity", "exp.toml", "--db", "run.toml"},
      {"capacity", "exp.toml", "--db", "trace.csv"},
      {"report", "results.db", "--out", "report", "--no-plots"},
      {"report", "results.db", "--out", "results.db", "--no-plots"},
      {"slurm", "exp.toml", "--tasks", "2", "--dir", "jobs"},
      {"fit", "--from-step-latencies", "trace.csv", "--out", "trace.csv"},
      {"fit", "--from-step-latencies", "steps.csv", "--base", "notes.toml", "--out", "notes.toml"},
      {"merge", "results.db", "results.db"},
  };
  for (const auto& args : cases) {
    std::string what;
    for (const auto& a : args) what += a + " ";
    const auto before = snapshot(w.root());
    const ProcessResult r = servesim(args, w.root());
    expect_refused_cleanly(r, before, w.root(), what);
  }
}

// ---- an existing file of another kind is never replaced ---------------------------------------------

std::string gzip_bytes() { return std::string("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\x4b\x4c\x4a\x06\x00", 15); }

TEST(OutputsTest, AFileOfAnotherKindIsNeverReplaced) {
  Workspace w;
  struct Foreign {
    std::string name;
    std::function<void(const fs::path&)> make;
  };
  const std::vector<Foreign> kinds = {
      {"text", [](const fs::path& p) { spit(p, "notes I keep\n"); }},
      {"gzip", [](const fs::path& p) { spit(p, gzip_bytes()); }},
      {"json of another tool", [](const fs::path& p) { spit(p, "{\"traceEvents\": []}\n"); }},
      {"another program's SQLite database",
       [](const fs::path& p) {
         SQLite::Database db(p.string(), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
         db.exec("CREATE TABLE invoices (id INTEGER, amount REAL); INSERT INTO invoices VALUES (1, 9.5)");
       }},
      {"an SQLite database of another application",
       [](const fs::path& p) {
         SQLite::Database db(p.string(), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
         db.exec("PRAGMA application_id = 1234; CREATE TABLE runs (x)");
       }},
      {"a servesim results database", [&](const fs::path& p) { fs::copy_file(w.root() / "results.db", p); }},
      {"a servesim timeline", [&](const fs::path& p) { fs::copy_file(w.root() / "t.json", p); }},
      {"a directory", [](const fs::path& p) { fs::create_directories(p / "inside"); spit(p / "inside" / "x", "x"); }},
      {"a named pipe", [](const fs::path& p) { ASSERT_EQ(::mkfifo(p.c_str(), 0600), 0); }},
  };
  struct Target {
    std::string flag;
    std::string expected_kind;  // the foreign kind that is in fact this output's own
    std::function<std::vector<std::string>(const std::string&)> args;
    std::string file;  // where the foreign file goes, relative to the workspace
  };
  const std::vector<Target> targets = {
      {"--db", "a servesim results database", [](const std::string& f) { return std::vector<std::string>{"--db", f}; },
       "other.db"},
      {"--timeline", "a servesim timeline",
       [](const std::string& f) { return std::vector<std::string>{"--no-db", "--timeline", f}; }, "other.json"},
      {"--csv (runs.csv)", "", [](const std::string&) { return std::vector<std::string>{"--no-db", "--csv", "out"}; },
       "out/runs.csv"},
      {"--csv (requests.csv)", "",
       [](const std::string&) { return std::vector<std::string>{"--no-db", "--csv", "out"}; }, "out/requests.csv"},
  };
  int cases = 0;
  for (const Target& t : targets) {
    for (const Foreign& k : kinds) {
      if (k.name == t.expected_kind) continue;
      if (t.flag.rfind("--csv", 0) == 0 && (k.name == "a directory" || k.name == "a named pipe")) continue;
      const std::string what = t.flag + " over " + k.name;
      const fs::path file = w.root() / t.file;
      fs::create_directories(file.parent_path());
      k.make(file);
      const auto before = snapshot(w.root());
      std::vector<std::string> args = {"run", "run.toml"};
      const auto own = t.args(t.file);
      args.insert(args.end(), own.begin(), own.end());
      const ProcessResult r = servesim(args, w.root());
      expect_refused_cleanly(r, before, w.root(), what);
      EXPECT_NE(r.err.find(t.flag.rfind("--csv", 0) == 0 ? fs::path(t.file).filename().string() : t.file),
                std::string::npos)
          << what << ": " << r.err;
      fs::remove_all(file);
      fs::remove_all(w.root() / "out");
      ++cases;
    }
  }
  EXPECT_GE(cases, 30);
}

// ---- a failed write leaves every output as it was; a re-run adds the run once -----------------------

TEST(OutputsTest, AFullDiskLeavesEveryOutputAsItWasAndAReRunAddsTheRunOnce) {
  Workspace w(2000);  // a timeline of a few MB, a database of a few hundred KB
  const auto before = snapshot(w.root());
  const int64_t runs_before = query(w.root() / "results.db", "SELECT COUNT(*) FROM runs");
  const uint64_t db_size = fs::file_size(w.root() / "results.db");
  const uint64_t timeline_size = fs::file_size(w.root() / "t.json");
  ASSERT_GT(timeline_size, 3 * db_size);
  // Room for the database's growth, not for the timeline: the timeline write fails, as on a full disk.
  const uint64_t limit = 2 * db_size + (uint64_t{256} << 10);
  ASSERT_LT(limit, timeline_size);
  const std::vector<std::string> args = {"run", "run.toml", "--db", "results.db", "--timeline", "t.json", "--json"};
  const ProcessResult failed = servesim(args, w.root(), limit);
  expect_refused_cleanly(failed, before, w.root(), "timeline over the file size limit");
  EXPECT_EQ(failed.exit_code, 1) << failed.err;
  EXPECT_NE(failed.err.find("t.json"), std::string::npos) << failed.err;
  EXPECT_EQ(query(w.root() / "results.db", "SELECT COUNT(*) FROM runs"), runs_before);

  const ProcessResult again = servesim(args, w.root());
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(query(w.root() / "results.db", "SELECT COUNT(*) FROM runs"), runs_before + 1);
  EXPECT_EQ(query(w.root() / "results.db", "SELECT COUNT(DISTINCT config_hash) FROM runs"), 1);

  // The CSV files: each is replaced whole or not at all.
  const uint64_t requests_size = fs::file_size(w.root() / "csv" / "requests.csv");
  const auto before_csv = snapshot(w.root());
  const ProcessResult csv_failed =
      servesim({"run", "run.toml", "--no-db", "--csv", "csv", "--json"}, w.root(), requests_size + 1024);
  expect_refused_cleanly(csv_failed, before_csv, w.root(), "CSV over the file size limit");
}

// ---- concurrent runs into one CSV directory -------------------------------------------------------------

TEST(OutputsTest, ConcurrentRunsIntoOneCsvDirectoryNeitherRepeatIdsNorLoseRows) {
  TempDir dir;
  spit(fs::path(dir.path()) / "run.toml", config(150));
  spit(fs::path(dir.path()) / "trace.csv", trace(2000));
  constexpr int kProcesses = 6;
  std::vector<std::future<ProcessResult>> runs;
  for (int i = 0; i < kProcesses; ++i)
    runs.push_back(std::async(std::launch::async, [&, i] {
      return servesim({"run", "run.toml", "--no-db", "--csv", "csv", "--set", "seed=" + std::to_string(i + 1),
                       "--set", "workload.max_requests=" + std::to_string(100 + 10 * i), "--json"},
                      dir.path());
    }));
  for (auto& f : runs) {
    const ProcessResult r = f.get();
    EXPECT_EQ(r.exit_code, 0) << r.err;
  }
  // Whatever the order the processes ran in: ids 1..6 once each, every run's rows, in request order.
  std::map<int64_t, int64_t> requests_per_run;
  std::map<int64_t, int64_t> last_request;
  std::istringstream requests(slurp(fs::path(dir.path()) / "csv" / "requests.csv"));
  std::string line;
  std::getline(requests, line);
  while (std::getline(requests, line)) {
    const int64_t run = std::stoll(line.substr(0, line.find(',')));
    const int64_t id = std::stoll(line.substr(line.find(',') + 1));
    if (requests_per_run.count(run)) EXPECT_EQ(id, last_request[run] + 1) << "run " << run;
    else EXPECT_EQ(id, 0) << "run " << run;
    last_request[run] = id;
    ++requests_per_run[run];
  }
  std::set<int64_t> ids;
  std::multiset<int64_t> sizes;
  std::istringstream runs_csv(slurp(fs::path(dir.path()) / "csv" / "runs.csv"));
  std::getline(runs_csv, line);
  const std::string header = line;
  int records = 0;
  for (std::string record; std::getline(runs_csv, record);) {
    // Records span lines (the configuration is quoted): a record starts with "<id>,<16 hex>,".
    const size_t comma = record.find(',');
    if (comma == std::string::npos || comma == 0 || record.find_first_not_of("0123456789") != comma) continue;
    if (record.size() < comma + 18 || record[comma + 17] != ',') continue;
    ids.insert(std::stoll(record.substr(0, comma)));
    ++records;
  }
  EXPECT_EQ(records, kProcesses);
  EXPECT_EQ(ids, (std::set<int64_t>{1, 2, 3, 4, 5, 6}));
  for (const auto& [run, n] : requests_per_run) sizes.insert(n);
  EXPECT_EQ(sizes, (std::multiset<int64_t>{100, 110, 120, 130, 140, 150}));
  for (const auto& e : fs::directory_iterator(fs::path(dir.path()) / "csv"))
    EXPECT_NE(e.path().filename().string().front(), '.') << "left " << e.path();
}

// ---- databases: ids and ownership -----------------------------------------------------------------------

TEST(OutputsTest, ASingleRunNeverTakesANumberASweepNeeds) {
  TempDir dir;
  const fs::path root = dir.path();
  spit(root / "run.toml", config(50));
  spit(root / "trace.csv", trace(200));
  spit(root / "exp.toml",
       "base = \"run.toml\"\n[[axis]]\nkey = \"workload.rate_scale\"\nvalues = [1.0, 2.0, 4.0, 8.0]\n");
  ASSERT_EQ(servesim({"sweep", "exp.toml", "--db", "sweep.db", "--shard", "0/2", "-q"}, root).exit_code, 0);
  const std::string bytes = slurp(root / "sweep.db");
  const ProcessResult r = servesim({"run", "run.toml", "--db", "sweep.db"}, root);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("holds the results of an experiment"), std::string::npos) << r.err;
  EXPECT_TRUE(slurp(root / "sweep.db") == bytes);
  // The sweep resumes: the other shard's points, then every point, each run numbered after its point.
  const ProcessResult rest = servesim({"sweep", "exp.toml", "--db", "sweep.db", "-q"}, root);
  ASSERT_EQ(rest.exit_code, 0) << rest.err;
  EXPECT_EQ(query(root / "sweep.db", "SELECT COUNT(*) FROM points WHERE run_id = point_index + 1"), 4);
}

TEST(OutputsTest, NothingGoesIntoAnotherProgramsDatabaseAndAnEarlierServesimDatabaseIsAdopted) {
  TempDir dir;
  const fs::path root = dir.path();
  spit(root / "run.toml", config(50));
  spit(root / "trace.csv", trace(200));
  spit(root / "exp.toml", "base = \"run.toml\"\n[[axis]]\nkey = \"workload.rate_scale\"\nvalues = [1.0, 2.0]\n");
  spit(root / "cap.toml", "base = \"run.toml\"\n[set]\nslo.ttft_ms = 2000\n[[axis]]\nkey = \"scheduler.max_num_seqs\"\nvalues = [64, 128]\n");
  ASSERT_EQ(servesim({"sweep", "exp.toml", "--db", "sweep.db", "-q"}, root).exit_code, 0);
  {
    SQLite::Database db((root / "app.db").string(), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    db.exec("CREATE TABLE notes (body TEXT); INSERT INTO notes VALUES ('keep me')");
  }
  const auto before = snapshot(root);
  for (const auto& args : std::vector<std::vector<std::string>>{{"run", "run.toml", "--db", "app.db"},
                                                                {"merge", "app.db", "sweep.db"},
                                                                {"sweep", "exp.toml", "--db", "app.db", "-q"},
                                                                {"capacity", "cap.toml", "--db", "app.db"}}) {
    const ProcessResult r = servesim(args, root);
    expect_refused_cleanly(r, before, root, args[0] + " into another program's database");
    EXPECT_NE(r.err.find("app.db: is an SQLite database servesim did not write"), std::string::npos) << r.err;
  }
  // A database an earlier version wrote (no application_id) is servesim's: it is adopted and marked.
  ASSERT_EQ(servesim({"run", "run.toml", "--db", "old.db"}, root).exit_code, 0);
  {
    SQLite::Database db((root / "old.db").string(), SQLite::OPEN_READWRITE);
    db.exec("PRAGMA application_id = 0");
  }
  const ProcessResult adopt = servesim({"run", "run.toml", "--db", "old.db", "--set", "seed=9"}, root);
  ASSERT_EQ(adopt.exit_code, 0) << adopt.err;
  EXPECT_EQ(query(root / "old.db", "SELECT COUNT(*) FROM runs"), 2);
  EXPECT_EQ(query(root / "old.db", "PRAGMA application_id"), 0x73727673);
}

}  // namespace
}  // namespace servesim::testing
