#include "traces/line_reader.h"

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "sim/core/error.h"
#include "sim/core/input_file.h"

namespace servesim::traces {

namespace {
constexpr size_t kInitialBuffer = size_t{1} << 20;
// A line this long is not a trace line (a binary file, or one without newlines): refuse it rather
// than grow without bound.
constexpr size_t kMaxLine = size_t{64} << 20;
}  // namespace

LineReader::LineReader(std::string path) : path_(std::move(path)) {
  // Opened once, a regular file only (a named pipe or a device is refused, never waited on).
  file_.reset(core::InputFile::open(path_, "a trace file", core::kUnlimitedBytes).release_to_stdio());
  buf_.resize(kInitialBuffer);
}

bool LineReader::fill() {
  if (eof_) return false;
  if (begin_ > 0) {
    std::memmove(buf_.data(), buf_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  if (end_ == buf_.size()) {
    if (buf_.size() >= kMaxLine)
      throw core::InputError(
          path_, line_ + 1, "",
          "line longer than " + std::to_string(kMaxLine >> 20) + " MiB; is this a text trace file?");
    buf_.resize(buf_.size() * 2);
  }
  const size_t got = std::fread(buf_.data() + end_, 1, buf_.size() - end_, file_.get());
  end_ += got;
  if (got == 0) {
    if (std::ferror(file_.get()))
      throw core::Error(path_ + ": read error after line " + std::to_string(line_) + ": " +
                        std::strerror(errno));
    eof_ = true;
    return false;
  }
  return true;
}

bool LineReader::next(std::string_view& line) {
  size_t scanned = begin_;  // bytes before this offset hold no newline
  for (;;) {
    const char* start = buf_.data() + begin_;
    const void* nl = std::memchr(buf_.data() + scanned, '\n', end_ - scanned);
    size_t len;
    size_t consumed;
    if (nl) {
      len = static_cast<size_t>(static_cast<const char*>(nl) - start);
      consumed = len + 1;
    } else {
      const size_t before = begin_;
      scanned = end_;
      if (fill()) {
        scanned -= before;  // fill() moved the tail to the front of the buffer
        continue;
      }
      if (begin_ == end_) return false;
      start = buf_.data() + begin_;
      len = end_ - begin_;  // last line without a terminator
      consumed = len;
    }
    begin_ += consumed;
    ++line_;
    if (len > 0 && start[len - 1] == '\r') --len;
    if (line_ == 1 && len >= 3 && std::memcmp(start, "\xEF\xBB\xBF", 3) == 0) {
      start += 3;
      len -= 3;
    }
    line = std::string_view(start, len);
    return true;
  }
}

bool is_blank(std::string_view line) {
  for (char c : line)
    if (c != ' ' && c != '\t' && c != '\r') return false;
  return true;
}

}  // namespace servesim::traces
