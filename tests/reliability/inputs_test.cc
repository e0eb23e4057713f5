// Every input file is opened once, as a regular file only, within a size cap (issue 14), through the
// real binary: each reader (run configuration, experiment file and its base, both trace formats, an
// empirical length file, a model config.json, a calibration profile) is given each kind of thing that
// is not a readable text file of its kind, and must refuse it at once, with a one-paragraph message
// that names the path and says what it is (and never hang on a pipe or read a device without end).
#include <gtest/gtest.h>

#include <SQLiteCpp/SQLiteCpp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "tests/reliability/process.h"
#include "tests/test_paths.h"

namespace servesim::testing {
namespace {

namespace fs = std::filesystem;

void spit(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

const std::string kGen = "[workload]\nkind = \"poisson\"\nrate = 5\nmax_requests = 10\n";
const std::string kLengths =
    "[workload.prompt]\nkind = \"fixed\"\nvalue = 10\n[workload.output]\nkind = \"fixed\"\nvalue = 5\n";
const std::string kModelGpu = "[model]\nkind = \"llama-3-8b\"\n[gpu]\nkind = \"h100-sxm\"\n";

struct Reader {
  std::string name;
  // Files to write (the one under test is "input"), and the command.
  std::function<void(const fs::path& dir)> setup;
  std::vector<std::string> args;
  uint64_t cap = 0;  // the size cap servesim applies (0: streamed, no cap to test)
};

std::vector<Reader> readers() {
  auto config = [](const std::string& text) {
    return [text](const fs::path& d) { spit(d / "run.toml", text); };
  };
  return {
      {"run configuration", [](const fs::path&) {}, {"run", "input", "--no-db"}, uint64_t{16} << 20},
      {"experiment file", [](const fs::path&) {}, {"sweep", "input", "--db", "x.db"}, uint64_t{16} << 20},
      {"an experiment's base",
       [](const fs::path& d) { spit(d / "exp.toml", "base = \"input\"\n"); },
       {"sweep", "exp.toml", "--db", "x.db"},
       uint64_t{16} << 20},
      {"Azure trace", config("[workload]\nkind = \"azure_csv\"\npath = \"input\"\n" + kModelGpu),
       {"run", "run.toml", "--no-db"}, 0},
      {"Mooncake trace", config("[workload]\nkind = \"mooncake_jsonl\"\npath = \"input\"\n" + kModelGpu),
       {"run", "run.toml", "--no-db"}, 0},
      {"empirical lengths",
       config(kGen + "[workload.prompt]\nkind = \"empirical\"\nfield = \"prompt\"\npath = \"input\"\n"
                     "[workload.output]\nkind = \"fixed\"\nvalue = 5\n" + kModelGpu),
       {"run", "run.toml", "--no-db"}, 0},
      {"model config.json",
       config(kGen + kLengths + "[model]\nkind = \"hf_config\"\npath = \"input\"\n[gpu]\nkind = \"h100-sxm\"\n"),
       {"run", "run.toml", "--no-db"}, uint64_t{16} << 20},
      {"calibration profile",
       config(kGen + kLengths + kModelGpu + "[cost_model]\nkind = \"roofline\"\ncalibration = \"input\"\n"),
       {"run", "run.toml", "--no-db"}, uint64_t{1} << 30},
  };
}

struct Thing {
  std::string name;
  std::string needle;  // what the message must say
  std::function<void(const fs::path& input)> make;
};

std::vector<Thing> things() {
  auto bytes = [](std::string b) { return [b](const fs::path& p) { spit(p, b); }; };
  return {
      {"nothing", "no such file", [](const fs::path&) {}},
      {"a directory", "is a directory", [](const fs::path& p) { fs::create_directories(p); }},
      {"a named pipe without a writer", "is a named pipe",
       [](const fs::path& p) { ASSERT_EQ(::mkfifo(p.c_str(), 0600), 0); }},
      {"/dev/zero", "is a character device", [](const fs::path& p) { fs::create_symlink("/dev/zero", p); }},
      {"/dev/null", "is a character device", [](const fs::path& p) { fs::create_symlink("/dev/null", p); }},
      {"a link to nowhere", "no such file", [](const fs::path& p) { fs::create_symlink("nowhere/at/all", p); }},
      {"gzip", "looks compressed (gzip)", bytes(std::string("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03xyz", 13))},
      {"zstd", "looks compressed (zstd)", bytes(std::string("\x28\xb5\x2f\xfd\x00\x58", 6))},
      {"xz", "looks compressed (xz)", bytes(std::string("\xfd" "7zXZ\x00\x00\x04", 8))},
      {"bzip2", "looks compressed (bzip2)", bytes("BZh91AY&SY")},
      {"zip", "looks compressed (a zip archive)", bytes(std::string("PK\x03\x04\x14\x00", 6))},
      {"an SQLite database", "is an SQLite database",
       [](const fs::path& p) {
         SQLite::Database db(p.string(), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
         db.exec("CREATE TABLE t (x)");
       }},
  };
}

TEST(InputsTest, EveryReaderRefusesWhatIsNotARegularTextFileAtOnce) {
  ASSERT_FALSE(servesim_bin().empty());
  int cases = 0;
  for (const Reader& reader : readers()) {
    for (const Thing& thing : things()) {
      const std::string what = reader.name + " given " + thing.name;
      TempDir dir;
      const fs::path root = dir.path();
      reader.setup(root);
      thing.make(root / "input");
      std::vector<std::string> argv = {servesim_bin()};
      argv.insert(argv.end(), reader.args.begin(), reader.args.end());
      const ProcessResult r = run_process(argv, root.string(), 20);
      ++cases;
      EXPECT_FALSE(r.timed_out) << what;
      EXPECT_EQ(r.signal, 0) << what;
      EXPECT_NE(r.exit_code, 0) << what;
      EXPECT_EQ(r.err.rfind("servesim: ", 0), 0u) << what << ": " << r.err;
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << what << ": " << r.err;
      EXPECT_NE(r.err.find("input"), std::string::npos) << what << ": the path is not named: " << r.err;
      EXPECT_NE(r.err.find(thing.needle), std::string::npos) << what << ": " << r.err;
      EXPECT_EQ(r.err.find("bad_alloc"), std::string::npos) << what;
      EXPECT_FALSE(fs::exists(root / "x.db")) << what << ": wrote a database";
    }
  }
  EXPECT_EQ(cases, 96);
}

// A file larger than its reader's cap is refused by its size, before it is read (a sparse file: the
// size costs no disk).
TEST(InputsTest, EveryReaderThatReadsWholeFilesCapsTheirSize) {
  for (const Reader& reader : readers()) {
    if (reader.cap == 0) continue;
    SCOPED_TRACE(reader.name);
    TempDir dir;
    const fs::path root = dir.path();
    reader.setup(root);
    spit(root / "input", "# a comment\n");
    fs::resize_file(root / "input", reader.cap + 1);
    std::vector<std::string> argv = {servesim_bin()};
    argv.insert(argv.end(), reader.args.begin(), reader.args.end());
    const ProcessResult r = run_process(argv, root.string(), 20);
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("input: is "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("is this the right file?"), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace servesim::testing
