#include "traces/line_reader.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "sim/core/error.h"
#include "tests/test_paths.h"
#include "tests/traces/trace_test_util.h"

namespace servesim::traces {
namespace {

using servesim::testing::TempDir;
using servesim::traces::testing::write_file;

std::vector<std::string> lines_of(const std::string& path) {
  LineReader reader(path);
  std::vector<std::string> out;
  std::string_view line;
  while (reader.next(line)) {
    out.emplace_back(line);
    EXPECT_EQ(reader.line_number(), static_cast<int64_t>(out.size()));
  }
  return out;
}

TEST(TraceLineReaderTest, TerminatorsBomAndLastLine) {
  TempDir dir;
  const std::string path = dir.file("t.txt");
  write_file(path,
             "\xEF\xBB\xBF"
             "a\r\nb\n\r\n\nlast");
  EXPECT_EQ(lines_of(path), (std::vector<std::string>{"a", "b", "", "", "last"}));
  write_file(path, "x\xEF\xBB\xBF\n\xEF\xBB\xBFy\n");  // only a leading BOM is dropped
  EXPECT_EQ(lines_of(path), (std::vector<std::string>{"x\xEF\xBB\xBF", "\xEF\xBB\xBFy"}));
  write_file(path, "");
  EXPECT_TRUE(lines_of(path).empty());
  write_file(path, "\n");
  EXPECT_EQ(lines_of(path), (std::vector<std::string>{""}));
}

TEST(TraceLineReaderTest, LinesAcrossBufferBoundariesAndLongLines) {
  TempDir dir;
  const std::string path = dir.file("t.txt");
  std::vector<std::string> expected;
  std::string text;
  core::Rng rng(3, "lines");
  for (int i = 0; i < 20000; ++i) {
    std::string line(rng.uniform_int(300), static_cast<char>('a' + i % 26));
    if (i == 7000) line = std::string(3 << 20, 'z');  // longer than the initial buffer
    expected.push_back(line);
    text += line + (i % 3 == 0 ? "\r\n" : "\n");
  }
  write_file(path, text);
  EXPECT_EQ(lines_of(path), expected);
}

TEST(TraceLineReaderTest, UnreadablePaths) {
  TempDir dir;
  EXPECT_THROW(LineReader{dir.file("missing")}, core::Error);
  try {
    LineReader reader(dir.file("missing"));
  } catch (const core::Error& e) {
    EXPECT_NE(std::string(e.what()).find(dir.file("missing")), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("no such file"), std::string::npos) << e.what();
  }
  EXPECT_THROW(LineReader{dir.path()}, core::Error);
}

// Only regular files: a named pipe would block the open (and a second open) until written, a device
// never ends. Each is refused at once, with what it is.
TEST(TraceLineReaderTest, RefusesEveryKindOfFileButARegularOne) {
  TempDir dir;
  ASSERT_EQ(::mkfifo(dir.file("pipe").c_str(), 0600), 0);
  const std::pair<std::string, std::string> cases[] = {
      {dir.path(), "is a directory"},
      {dir.file("pipe"), "is a named pipe (FIFO)"},
      {"/dev/zero", "is a character device"},
      {"/dev/null", "is a character device"},
      {dir.file("missing"), "no such file"},
  };
  for (const auto& [path, needle] : cases) {
    try {
      LineReader reader(path);
      ADD_FAILURE() << path << " was accepted";
    } catch (const core::Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind(path, 0), 0u) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace servesim::traces
