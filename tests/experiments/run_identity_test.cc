// A run's identity (config_hash, a sweep point's key) covers the content of every file the run reads
// and nothing of where the files lie (issues 11 and 14): every path parameter of every kind is tried
// with several files of equal and of different content, placed and named in several ways.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "experiments/run.h"
#include "hwmodels/calibration_profile.h"
#include "sim/core/config.h"
#include "sim/core/digest.h"
#include "sim/core/params.h"
#include "sim/core/rng.h"
#include "tests/reliability/process.h"
#include "tests/test_paths.h"

namespace servesim::experiments {
namespace {

namespace fs = std::filesystem;
using servesim::testing::TempDir;

void spit(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

const char* kModelGpu = "[model]\nkind = \"llama-3-8b\"\n[gpu]\nkind = \"h100-sxm\"\n";
const char* kLengths = "[workload.prompt]\nkind = \"fixed\"\nvalue = 10\n[workload.output]\nkind = \"fixed\"\nvalue = 5\n";

// A run configuration that names `path` under each path parameter servesim has. The list must name
// every one: a new path parameter fails PathParametersAreAllCovered until it is added here.
std::map<std::string, std::string> configs_naming(const std::string& path) {
  const std::string q = "\"" + path + "\"";
  const std::string generator = "[workload]\nkind = \"poisson\"\nrate = 5\nmax_requests = 10\n";
  return {
      {"workloads/azure_csv/path", "[workload]\nkind = \"azure_csv\"\npath = " + q + "\n" + kModelGpu},
      {"workloads/mooncake_jsonl/path", "[workload]\nkind = \"mooncake_jsonl\"\npath = " + q + "\n" + kModelGpu},
      {"length_distributions/empirical/path",
       generator + "[workload.prompt]\nkind = \"empirical\"\nfield = \"prompt\"\npath = " + q +
           "\n[workload.output]\nkind = \"fixed\"\nvalue = 5\n" + kModelGpu},
      {"models/hf_config/path",
       generator + kLengths + "[model]\nkind = \"hf_config\"\npath = " + q + "\n[gpu]\nkind = \"h100-sxm\"\n"},
      {"rate_profiles/table/path",
       generator + "[workload.rate_profile]\nkind = \"table\"\npath = " + q + "\n" + kLengths + kModelGpu},
      {"cost_models/roofline/calibration",
       generator + kLengths + kModelGpu + "[cost_model]\nkind = \"roofline\"\ncalibration = " + q + "\n"},
  };
}

TEST(RunIdentityTest, PathParametersAreAllCovered) {
  std::set<std::string> declared;
  for (const core::KindFamily* family : core::all_families())
    for (const core::KindInfo* kind : family->kinds())
      for (const core::ParamSpec& spec : kind->params)
        if (spec.type == core::ParamType::kPath) declared.insert(family->name() + "/" + kind->name + "/" + spec.name);
  std::set<std::string> covered;
  for (const auto& [name, text] : configs_naming("x")) covered.insert(name);
  EXPECT_EQ(declared, covered);
}

std::string hash_of(const std::string& text, const std::string& base_dir) {
  return config_hash(core::parse_config(text, "run.toml", run_schema(), {}, base_dir));
}

TEST(RunIdentityTest, TheHashFollowsEveryFilesContentAndNotWhereItLies) {
  TempDir dir;
  const fs::path root = dir.path();
  core::Rng rng(14, "identity");
  for (int trial = 0; trial < 8; ++trial) {
    // A file of random content, and variants of it one byte apart, longer and shorter.
    std::string content;
    const int64_t size = 1 + rng.uniform_int(5000);
    for (int64_t i = 0; i < size; ++i) content += static_cast<char>('a' + rng.uniform_int(26));
    std::vector<std::string> others = {content + "\n", content.substr(0, content.size() - 1) + "#", "",
                                       content.substr(1)};
    const fs::path here = root / ("t" + std::to_string(trial)) / "data.txt";
    spit(here, content);
    spit(root / "elsewhere" / ("copy" + std::to_string(trial) + ".txt"), content);
    fs::create_symlink(here, root / ("link" + std::to_string(trial)));
    for (const auto& [param, unused] : configs_naming("x")) {
      SCOPED_TRACE(param + ", trial " + std::to_string(trial));
      // The same bytes named five ways: relative, absolute, through a symbolic link, a copy elsewhere,
      // and relative to another configuration directory.
      const std::string t = "t" + std::to_string(trial);
      const std::vector<std::pair<std::string, std::string>> same = {
          {t + "/data.txt", root.string()},
          {here.string(), "/"},
          {"link" + std::to_string(trial), root.string()},
          {"../elsewhere/copy" + std::to_string(trial) + ".txt", (root / t).string()},
          {"data.txt", (root / t).string()},
      };
      std::set<std::string> hashes;
      for (const auto& [path, base] : same) hashes.insert(hash_of(configs_naming(path).at(param), base));
      EXPECT_EQ(hashes.size(), 1u);
      for (size_t k = 0; k < others.size(); ++k) {
        const fs::path other = root / ("o" + std::to_string(trial)) / ("v" + std::to_string(k) + ".txt");
        spit(other, others[k]);
        const std::string h = hash_of(configs_naming(other.string()).at(param), "/");
        EXPECT_EQ(hashes.count(h), 0u) << "variant " << k << " hashes like the original";
        hashes.insert(h);
      }
    }
  }
}

TEST(RunIdentityTest, AConfigurationWithoutFilesHashesItsResolvedText) {
  for (const char* text : {"[workload]\nkind = \"poisson\"\nrate = 5\nmax_requests = 10\n",
                           "seed = 7\n[workload]\nkind = \"gamma\"\nrate = 2\ncv = 3\nwindow_end_s = 30\n"}) {
    const core::Params p = core::parse_config(std::string(text) + kLengths + kModelGpu, "run.toml", run_schema());
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(core::fnv1a64(p.to_toml())));
    EXPECT_EQ(config_hash(p), buf);
  }
}

TEST(RunIdentityTest, TheDigestIsSha256OfTheContent) {
  // FIPS 180-4 test vectors, and a file streamed in pieces larger and smaller than a block.
  EXPECT_EQ(core::sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(core::sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(core::sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(core::sha256_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  TempDir dir;
  spit(fs::path(dir.path()) / "a", std::string(3 << 20, 'a') + "tail");
  core::Sha256 pieces;
  const std::string whole = std::string(3 << 20, 'a') + "tail";
  for (size_t at = 0, step = 1; at < whole.size(); at += step, step = step * 3 % 1000 + 1)
    pieces.update(std::string_view(whole).substr(at, step));
  const std::string expected = pieces.hex();
  EXPECT_EQ(core::sha256_hex(whole), expected);
  EXPECT_EQ(core::file_digest(dir.file("a"), "a test file").digest, "sha256:" + expected);
}

// The portable compression and the CPU's SHA extensions (where present) give the same digests:
// the FIPS vectors through the portable code, and random data of every length around the block
// boundaries, fed in random pieces, through both.
TEST(RunIdentityTest, PortableAndHardwareDigestsAgree) {
  auto portable = [](std::string_view data) {
    core::Sha256 h(false);
    h.update(data);
    return h.hex();
  };
  EXPECT_EQ(portable(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(portable("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(portable("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(portable(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  core::Rng rng(18, "sha");
  std::string data;
  for (int i = 0; i < 5000; ++i) data += static_cast<char>(rng.uniform_int(256));
  for (size_t size = 0; size < data.size(); size += size < 300 ? 1 : 97) {
    const std::string_view d = std::string_view(data).substr(0, size);
    core::Sha256 h;
    for (size_t at = 0; at < size;) {
      const size_t take = std::min<size_t>(size - at, static_cast<size_t>(1 + rng.uniform_int(200)));
      h.update(d.substr(at, take));
      at += take;
    }
    ASSERT_EQ(h.hex(), portable(d)) << size << " bytes";
  }
}

// The digest of a file is remembered per version of the file: a change of content is seen whether
// it changes the size, the modification time, or neither (the inode's change time then does),
// and threads digesting one file at once all get its digest. (Whether an answer came from the
// cache is not asserted; every answer must be the content's digest.)
TEST(RunIdentityTest, TheDigestCacheSeesEveryChangeOfAFile) {
  TempDir dir;
  const fs::path f = fs::path(dir.path()) / "trace.csv";
  const std::string name = f.string();
  auto digest = [&] { return core::file_digest(name, "a test file").digest; };
  spit(f, "a,b\n1,2\n");
  EXPECT_EQ(digest(), "sha256:" + core::sha256_hex("a,b\n1,2\n"));
  EXPECT_EQ(digest(), "sha256:" + core::sha256_hex("a,b\n1,2\n"));  // from the cache
  // Another size, and a modification time an hour earlier.
  spit(f, "a,b\n1,2\n3,4\n");
  const auto then = fs::last_write_time(f) - std::chrono::hours(1);  // another time, in the past
  fs::last_write_time(f, then);
  EXPECT_EQ(digest(), "sha256:" + core::sha256_hex("a,b\n1,2\n3,4\n"));
  // The same size, the modification time set back to what the cache saw.
  spit(f, "a,b\n1,2\n5,6\n");
  fs::last_write_time(f, then);
  EXPECT_EQ(digest(), "sha256:" + core::sha256_hex("a,b\n1,2\n5,6\n"));
  // Replaced by another file (another inode) of the same size and time.
  const fs::path other = fs::path(dir.path()) / "other.csv";
  spit(other, "a,b\n1,2\n7,8\n");
  fs::last_write_time(other, then);
  fs::rename(other, f);
  EXPECT_EQ(digest(), "sha256:" + core::sha256_hex("a,b\n1,2\n7,8\n"));
  // A file old enough to be remembered (changed more than two seconds ago), then rewritten with
  // the same size and its modification time set back: the change time tells the cache.
  spit(f, "a,b\n1,2\n9,9\n");
  fs::last_write_time(f, then);
  std::this_thread::sleep_for(std::chrono::milliseconds(2100));
  EXPECT_EQ(digest(), "sha256:" + core::sha256_hex("a,b\n1,2\n9,9\n"));
  EXPECT_EQ(digest(), "sha256:" + core::sha256_hex("a,b\n1,2\n9,9\n"));
  spit(f, "a,b\n1,2\n0,0\n");
  fs::last_write_time(f, then);
  EXPECT_EQ(digest(), "sha256:" + core::sha256_hex("a,b\n1,2\n0,0\n"));
  // A larger file (many blocks), digested by several threads at once (the runs of a sweep).
  std::string big;
  for (int i = 0; i < 20000; ++i) big += std::to_string(i) + ",x\n";
  spit(f, big);
  const std::string expected = "sha256:" + core::sha256_hex(big);
  std::vector<std::string> got(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < got.size(); ++t) threads.emplace_back([&, t] { got[t] = digest(); });
  for (auto& t : threads) t.join();
  for (const auto& g : got) EXPECT_EQ(g, expected);
}

// The issue's case, through the binary: a sweep whose base names a config.json of 32 layers, then the
// same file with 48. The re-run must not find its points "already in the database".
TEST(RunIdentityTest, ASweepReRunAfterAFileChangedIsNotServedStaleResults) {
  TempDir dir;
  const fs::path root = dir.path();
  const std::string model = servesim::testing::source_dir() + "/tests/hwmodels/testdata/hf/Meta-Llama-3-8B/config.json";
  std::ifstream in(model);
  std::stringstream text;
  text << in.rdbuf();
  std::string json = text.str();
  spit(root / "models" / "config.json", json);
  spit(root / "run.toml", "[workload]\nkind = \"poisson\"\nrate = 5\nmax_requests = 20\n" + std::string(kLengths) +
                              "[model]\nkind = \"hf_config\"\npath = \"models/config.json\"\n[gpu]\nkind = \"h100-sxm\"\n");
  spit(root / "exp.toml", "base = \"run.toml\"\n[[axis]]\nkey = \"workload.rate\"\nvalues = [5.0, 10.0]\n");
  const std::string bin = servesim::testing::servesim_bin();
  auto run = [&](const std::vector<std::string>& args, const fs::path& cwd) {
    std::vector<std::string> argv = {bin};
    argv.insert(argv.end(), args.begin(), args.end());
    return servesim::testing::run_process(argv, cwd.string(), 60);
  };
  ASSERT_EQ(run({"sweep", "exp.toml", "--db", "sweep.db", "-q"}, root).exit_code, 0);
  const auto again = run({"sweep", "exp.toml", "--db", "sweep.db", "-q"}, root);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.out.find("2 already in sweep.db, ran 0"), std::string::npos) << again.out;

  const auto at = json.find("\"num_hidden_layers\": 32");
  ASSERT_NE(at, std::string::npos);
  json.replace(at, 23, "\"num_hidden_layers\": 48");
  spit(root / "models" / "config.json", json);
  const auto changed = run({"sweep", "exp.toml", "--db", "sweep.db", "-q"}, root);
  EXPECT_NE(changed.exit_code, 0) << changed.out;
  EXPECT_EQ(changed.out.find("already in"), std::string::npos) << changed.out;
  EXPECT_NE(changed.err.find("sweep.db: holds the results of"), std::string::npos) << changed.err;
  ASSERT_EQ(run({"sweep", "exp.toml", "--db", "new.db", "-q"}, root).exit_code, 0);

  // A single run's hash, from two working directories and through a copy: the same.
  std::set<std::string> hashes;
  spit(root / "copy" / "models" / "config.json", json);
  spit(root / "copy" / "run.toml", "");
  fs::copy_file(root / "run.toml", root / "copy" / "run.toml", fs::copy_options::overwrite_existing);
  for (const auto& [cwd, config] : std::vector<std::pair<fs::path, std::string>>{
           {root, "run.toml"}, {root / "models", "../run.toml"}, {"/", (root / "run.toml").string()},
           {root, "copy/run.toml"}}) {
    const auto r = run({"run", config, "--no-db", "--json"}, cwd);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    hashes.insert(nlohmann::json::parse(r.out).at("config_hash").get<std::string>());
  }
  EXPECT_EQ(hashes.size(), 1u);
}

}  // namespace
// A binary moved away from its build directory or installation finds no shipped calibration profile:
// it runs with the constant efficiencies (as the user may mean it) but says so on stderr, once;
// it does not when the profile is found, or when [cost_model] calibration = "none" chooses that.
TEST(RunIdentityTest, ABinaryThatFindsNoShippedProfileWarnsAndRunsUncalibrated) {
  TempDir dir;
  const fs::path root = dir.path();
  const fs::path moved = root / "servesim";
  fs::copy_file(servesim::testing::servesim_bin(), moved);
  fs::permissions(moved, fs::perms::owner_all);
  const std::string config = servesim::testing::source_dir() + "/experiments/quickstart.toml";
  auto run = [&](const std::string& bin, std::vector<std::string> extra_args, std::vector<std::string> env) {
    std::vector<std::string> argv = {bin, "run", config, "--no-db", "--json", "--set", "workload.max_requests=50"};
    argv.insert(argv.end(), extra_args.begin(), extra_args.end());
    return servesim::testing::run_process(argv, root.string(), 120, -1, env);
  };
  const auto lost = run(moved.string(), {}, {"SERVESIM_PROFILE_DIR="});
  ASSERT_EQ(lost.exit_code, 0) << lost.err;
  EXPECT_NE(lost.err.find("warning: the shipped calibration profile of h100-sxm was not found"), std::string::npos)
      << lost.err;
  // Where it looked: beside the binary's directory, as a build directory inside the source tree.
  EXPECT_NE(lost.err.find((root.parent_path() / "calibration" / "profiles").string()), std::string::npos) << lost.err;
  EXPECT_TRUE(nlohmann::json::parse(lost.out)["pools"][0]["calibration"].is_null()) << lost.out;
  // The same binary told where the profiles are, and one that says "none": no warning.
  const auto found = run(moved.string(), {}, {"SERVESIM_PROFILE_DIR=" + servesim::testing::source_dir() +
                                                  "/calibration/profiles"});
  ASSERT_EQ(found.exit_code, 0) << found.err;
  EXPECT_EQ(found.err.find("warning"), std::string::npos) << found.err;
  EXPECT_TRUE(nlohmann::json::parse(found.out)["pools"][0]["calibration"].is_string()) << found.out;
  const auto none = run(moved.string(), {"--set", "cost_model.calibration=none"}, {"SERVESIM_PROFILE_DIR="});
  ASSERT_EQ(none.exit_code, 0) << none.err;
  EXPECT_EQ(none.err.find("warning"), std::string::npos) << none.err;
  // And the list of GPUs that have a shipped profile is the files that ship.
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(servesim::testing::source_dir() + "/calibration/profiles")) {
    if (e.path().extension() != ".toml") continue;
    ++files;
    EXPECT_TRUE(hwmodels::has_shipped_profile(e.path().stem().string())) << e.path();
  }
  EXPECT_EQ(files, 2u);
  EXPECT_FALSE(hwmodels::has_shipped_profile("b200"));
}

}  // namespace servesim::experiments
