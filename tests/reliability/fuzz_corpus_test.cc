// Replays every input of every fuzz target's corpus (tests/fuzz/corpus/<target>/: hand-written seeds
// and what libFuzzer kept) through the same oracle the fuzzer uses, in the ordinary test build and in
// the sanitizer build, so an input that once found a bug keeps guarding against it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/fuzz/targets.h"
#include "tests/test_paths.h"

namespace servesim::testing {
namespace {

namespace fs = std::filesystem;

class FuzzCorpusTest : public ::testing::TestWithParam<std::string> {};

TEST_P(FuzzCorpusTest, EveryCorpusInputPassesTheOracle) {
  const FuzzTarget* target = find_fuzz_target(GetParam());
  ASSERT_NE(target, nullptr);
  const fs::path dir = fs::path(source_dir()) / "tests" / "fuzz" / "corpus" / GetParam();
  ASSERT_TRUE(fs::is_directory(dir)) << dir;
  TempDir scratch;
  size_t inputs = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream data;
    data << in.rdbuf();
    try {
      target->run(data.str(), scratch.file("input"));
    } catch (const std::exception& e) {
      ADD_FAILURE() << entry.path() << ": " << e.what();
    }
    ++inputs;
  }
  EXPECT_GE(inputs, 3u) << "a corpus of hand-written seeds is expected in " << dir;
}

INSTANTIATE_TEST_SUITE_P(AllTargets, FuzzCorpusTest, ::testing::ValuesIn([] {
                           std::vector<std::string> names;
                           for (const auto& t : fuzz_targets()) names.push_back(t.name);
                           return names;
                         }()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace servesim::testing
