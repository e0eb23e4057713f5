#pragma once
// Opening an input file the same way in every reader: once, as a regular file only, within a size
// cap, and refused with a message a person can act on (where the file was looked for, what it is
// instead: a directory, a named pipe, a device, a compressed or SQLite file).
//
// Why regular files only: a named pipe blocks the open until a writer appears and can be read only
// once, and a device such as /dev/zero never ends; both hung or exhausted memory before. The open is
// non-blocking, so even a pipe without a writer is refused at once.

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace servesim::core {

// Caps on what a reader takes into memory whole. Streaming readers (traces) cap each line instead.
inline constexpr uint64_t kMaxConfigBytes = uint64_t{16} << 20;     // run configurations, experiments
inline constexpr uint64_t kMaxDataFileBytes = uint64_t{1} << 30;    // profiles, measured tables
inline constexpr uint64_t kUnlimitedBytes = UINT64_MAX;              // streamed: traces

// The absolute, lexically normal form of `path` (against the working directory when relative).
std::string absolute_path(const std::string& path);

// "is a directory", "is a named pipe (FIFO)", "is a character device", ... for what `path` is when it
// is not a regular file; "" for a regular file; "no such file" when nothing is there.
std::string file_kind_problem(const std::string& path);

// What the first bytes of a file say it is when that is not text: "looks compressed (gzip); ...",
// "is an SQLite database", or "" (plain text, or nothing recognised).
std::string binary_format_problem(std::string_view head, const std::string& path);

// Why `path` cannot be read as `what` (one clause, without the path), checked with stat only:
// missing (naming where it was looked for unless that is how the message shows it, `shown`; default
// `path`), not a regular file, or larger than `max_bytes`; "" when it can be opened. For checks
// where the file is named (a configuration key) before a reader opens it.
std::string input_problem(const std::string& path, const std::string& what, uint64_t max_bytes = kUnlimitedBytes,
                          const std::string& shown = "");

// An input file, open for reading. Errors are core::InputError "<path>: <problem>" (no line), the path
// as given.
class InputFile {
 public:
  // `what` names the file's role ("the run configuration", "a trace file"). Refuses (InputError)
  // a missing file, anything but a regular file, a file larger than `max_bytes`, and a compressed or
  // SQLite file (its first bytes say so).
  static InputFile open(const std::string& path, const std::string& what, uint64_t max_bytes);

  InputFile(InputFile&& other) noexcept;
  InputFile& operator=(InputFile&& other) noexcept;
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  ~InputFile();

  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }
  // The whole file (it is at most the cap given to open(); one that grows past it is refused).
  std::string read_all();
  // Hands the descriptor to stdio ("rb"); this object no longer owns it.
  std::FILE* release_to_stdio();

 private:
  InputFile(std::string path, int fd, uint64_t size) : path_(std::move(path)), fd_(fd), size_(size) {}
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
  uint64_t max_bytes_ = kUnlimitedBytes;
};

// The whole of `path` as text: InputFile::open(path, what, max_bytes).read_all().
std::string read_input_file(const std::string& path, const std::string& what, uint64_t max_bytes = kMaxConfigBytes);

}  // namespace servesim::core
