#pragma once
// A buffered reader of physical lines, for streaming trace files of any size in constant memory.
// std::getline costs a copy and a stream sentry per line; this hands out views into one large
// buffer instead, which is what lets a 10M-line trace load in seconds.

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace servesim::traces {

// True when the line holds nothing but spaces, tabs and stray carriage returns (the readers skip
// such lines).
bool is_blank(std::string_view line);

class LineReader {
 public:
  // Opens `path`; a core::Error naming the path and the reason when it cannot be read.
  explicit LineReader(std::string path);
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // The next physical line without its terminator ("\n" or "\r\n"), and without a UTF-8 byte-order
  // mark on the first line; false at the end of the file. The view lives until the next call.
  bool next(std::string_view& line);
  // The same, skipping blank lines (is_blank): the next line that holds data.
  bool next_data_line(std::string_view& line) {
    while (next(line))
      if (!is_blank(line)) return true;
    return false;
  }
  // 1-based number of the line last returned by next().
  int64_t line_number() const { return line_; }
  const std::string& path() const { return path_; }

 private:
  bool fill();  // reads more bytes after the unconsumed tail; false when nothing more could be read

  struct Closer {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  std::string path_;
  std::unique_ptr<std::FILE, Closer> file_;
  std::vector<char> buf_;
  size_t begin_ = 0;  // first unconsumed byte
  size_t end_ = 0;    // one past the last byte read
  bool eof_ = false;
  int64_t line_ = 0;
};


}  // namespace servesim::traces
