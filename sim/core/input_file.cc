#include "sim/core/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "sim/core/error.h"
#include "sim/core/format.h"

namespace servesim::core {
namespace {

std::string kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "is a directory";
  if (S_ISFIFO(mode)) return "is a named pipe (FIFO)";
  if (S_ISCHR(mode)) return "is a character device";
  if (S_ISBLK(mode)) return "is a block device";
  if (S_ISSOCK(mode)) return "is a socket";
  if (!S_ISREG(mode)) return "is not a regular file";
  return "";
}

std::string bytes_text(uint64_t n) {
  if (n >= (uint64_t{1} << 30)) return format_double(static_cast<double>(n >> 20) / 1024.0) + " GiB";
  if (n >= (uint64_t{1} << 20)) return format_double(static_cast<double>(n >> 10) / 1024.0) + " MiB";
  return std::to_string(n) + " bytes";
}

// "no such file (looked for /abs/x.csv)", naming the first missing directory when there is one.
// `shown` is how the path appears in the message (as the user wrote it).
std::string missing(const std::string& path, const std::string& shown) {
  const std::string abs = absolute_path(path);
  std::string out = "no such file";
  if (abs != shown) out += " (looked for " + abs + ")";
  std::error_code ec;
  std::filesystem::path dir = std::filesystem::path(abs).parent_path();
  std::filesystem::path first_missing;
  while (!dir.empty() && dir != dir.parent_path() && !std::filesystem::exists(dir, ec)) {
    first_missing = dir;
    dir = dir.parent_path();
  }
  if (!first_missing.empty()) out += "; the directory " + first_missing.string() + " does not exist";
  return out;
}

std::string not_regular(const std::string& kind, const std::string& what) {
  std::string out = kind + ", not a regular file: servesim reads " + what + " from regular files only";
  if (kind.find("pipe") != std::string::npos) out += " (a pipe blocks until written and reads only once); copy it to a file";
  return out;
}

std::string too_large(uint64_t size, uint64_t max_bytes, const std::string& what) {
  return "is " + bytes_text(size) + ", more than the " + bytes_text(max_bytes) + " servesim reads as " + what +
         "; is this the right file?";
}

}  // namespace

std::string absolute_path(const std::string& path) {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::absolute(path, ec);
  if (ec) return path;
  return p.lexically_normal().string();
}

std::string file_kind_problem(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return errno == ENOENT || errno == ENOTDIR ? "no such file" : std::strerror(errno);
  return kind_of(st.st_mode);
}

std::string binary_format_problem(std::string_view head, const std::string& path) {
  auto starts = [&](std::string_view magic) { return head.substr(0, magic.size()) == magic; };
  auto compressed = [&](const char* format, const std::string& command) {
    return "looks compressed (" + std::string(format) + "): decompress it first (" + command + " " + path + ")";
  };
  if (starts("\x1f\x8b")) return compressed("gzip", "gunzip -k");
  if (starts("BZh") && head.size() >= 4 && head[3] >= '1' && head[3] <= '9') return compressed("bzip2", "bunzip2 -k");
  if (starts(std::string_view("\xfd" "7zXZ\x00", 6))) return compressed("xz", "unxz -k");
  if (starts("\x28\xb5\x2f\xfd")) return compressed("zstd", "unzstd");
  if (starts("\x04\x22\x4d\x18")) return compressed("lz4", "unlz4");
  if (starts(std::string_view("PK\x03\x04", 4))) return compressed("a zip archive", "unzip");
  if (starts("7z\xbc\xaf\x27\x1c")) return compressed("a 7-zip archive", "7z x");
  if (starts(std::string_view("SQLite format 3\x00", 16))) return "is an SQLite database, not a text file";
  return "";
}

std::string input_problem(const std::string& path, const std::string& what, uint64_t max_bytes,
                          const std::string& shown) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return missing(path, shown.empty() ? path : shown);
    return std::string("cannot read it: ") + std::strerror(errno);
  }
  if (const std::string kind = kind_of(st.st_mode); !kind.empty()) {
    if (S_ISDIR(st.st_mode)) return kind + ", expected " + what;
    return not_regular(kind, what);
  }
  if (static_cast<uint64_t>(st.st_size) > max_bytes) return too_large(static_cast<uint64_t>(st.st_size), max_bytes, what);
  return "";
}

InputFile InputFile::open(const std::string& path, const std::string& what, uint64_t max_bytes) {
  if (path.empty()) throw Error("an empty path given for " + what);
  // Non-blocking: opening a named pipe without a writer would otherwise wait forever.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT || err == ENOTDIR) throw InputError(path, 0, "", missing(path, path));
    if (err == EISDIR) throw InputError(path, 0, "", "is a directory, expected " + what);
    throw InputError(path, 0, "", "cannot open " + what + ": " + std::strerror(err));
  }
  InputFile file(path, fd, 0);
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw InputError(path, 0, "", "cannot read " + what + ": " + std::strerror(errno));
  if (const std::string kind = kind_of(st.st_mode); !kind.empty()) {
    if (S_ISDIR(st.st_mode)) throw InputError(path, 0, "", kind + ", expected " + what);
    throw InputError(path, 0, "", not_regular(kind, what));
  }
  file.size_ = static_cast<uint64_t>(st.st_size);
  file.max_bytes_ = max_bytes;
  if (file.size_ > max_bytes) throw InputError(path, 0, "", too_large(file.size_, max_bytes, what));
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  char head[16];
  const ssize_t got = ::pread(fd, head, sizeof head, 0);
  if (got > 0) {
    if (const std::string problem = binary_format_problem(std::string_view(head, static_cast<size_t>(got)), path);
        !problem.empty())
      throw InputError(path, 1, "", problem + "; expected " + what);  // what its first bytes say
  }
  return file;
}

InputFile::InputFile(InputFile&& other) noexcept
    : path_(std::move(other.path_)), fd_(other.fd_), size_(other.size_), max_bytes_(other.max_bytes_) {
  other.fd_ = -1;
}

InputFile& InputFile::operator=(InputFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = other.fd_;
    size_ = other.size_;
    max_bytes_ = other.max_bytes_;
    other.fd_ = -1;
  }
  return *this;
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

std::string InputFile::read_all() {
  std::string out;
  out.reserve(static_cast<size_t>(size_));
  char buf[1 << 16];
  for (;;) {
    const ssize_t got = ::read(fd_, buf, sizeof buf);
    if (got < 0) {
      if (errno == EINTR) continue;
      throw InputError(path_, 0, "", std::string("read error: ") + std::strerror(errno));
    }
    if (got == 0) break;
    out.append(buf, static_cast<size_t>(got));
    // The file grew past the cap after it was opened: stop rather than read without end.
    if (out.size() > max_bytes_) throw InputError(path_, 0, "", too_large(out.size(), max_bytes_, "this input"));
  }
  return out;
}

std::FILE* InputFile::release_to_stdio() {
  std::FILE* f = ::fdopen(fd_, "rb");
  if (!f) throw InputError(path_, 0, "", std::string("cannot read: ") + std::strerror(errno));
  fd_ = -1;
  return f;
}

std::string read_input_file(const std::string& path, const std::string& what, uint64_t max_bytes) {
  return InputFile::open(path, what, max_bytes).read_all();
}

}  // namespace servesim::core
