#include "sim/core/output_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "sim/core/error.h"
#include "sim/core/input_file.h"

namespace servesim::core {
namespace fs = std::filesystem;
namespace {

// What a path is for comparisons: (device, inode) when it exists, else its canonical text.
struct Identity {
  bool exists = false;
  dev_t device = 0;
  ino_t inode = 0;
  std::string canonical;
  bool same(const Identity& o) const {
    if (exists && o.exists) return device == o.device && inode == o.inode;
    return canonical == o.canonical;
  }
};

Identity identity_of(const std::string& path) {
  Identity id;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    id.exists = true;
    id.device = st.st_dev;
    id.inode = st.st_ino;
  }
  std::error_code ec;
  fs::path canonical = fs::weakly_canonical(fs::absolute(path, ec), ec);
  id.canonical = ec ? absolute_path(path) : canonical.lexically_normal().string();
  return id;
}

// The first bytes of a file, escaped for a message.
std::string head_text(std::string_view head) {
  std::string out;
  for (unsigned char c : head.substr(0, 24)) {
    if (c >= 0x20 && c < 0x7f && c != '\'') {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  return out;
}

}  // namespace

void PathPlan::input(const std::string& path, const std::string& role) {
  if (!path.empty()) entries_.push_back({path, role, false});
}

void PathPlan::output(const std::string& path, const std::string& role) {
  if (!path.empty()) entries_.push_back({path, role, true});
}

void PathPlan::output_files(const std::string& dir, const std::vector<std::string>& names, const std::string& role) {
  if (dir.empty()) return;
  entries_.push_back({dir, role, true});
  for (const auto& name : names) entries_.push_back({(fs::path(dir) / name).string(), role + " (" + name + ")", true});
}

void PathPlan::check() const {
  std::vector<Identity> ids;
  ids.reserve(entries_.size());
  for (const auto& e : entries_) ids.push_back(identity_of(e.path));
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (!entries_[i].output) continue;
    for (size_t j = 0; j < entries_.size(); ++j) {
      if (i == j || (entries_[j].output && j > i) || !ids[i].same(ids[j])) continue;
      // An output directory and the files in it share a prefix, never an identity; outputs of one
      // role (a directory's files) are distinct by name.
      const Entry& out = entries_[i];
      const Entry& other = entries_[j];
      throw UsageError(out.role + " " + out.path + ": is also " + other.role +
                       (other.path == out.path ? "" : " (" + other.path + ")") +
                       (other.output ? "" : ", an input of this command") +
                       "; an output never overwrites an input or another output of the same command: choose "
                       "another path");
    }
  }
}

bool check_replaceable(const std::string& path, const std::string& what, const KindTest& is_kind) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return false;
    if (errno == ENOTDIR) throw Error(path + ": cannot write " + what + ": a component of the path is not a directory");
    throw Error(path + ": cannot write " + what + ": " + std::strerror(errno));
  }
  if (S_ISLNK(st.st_mode) && ::stat(path.c_str(), &st) != 0) return false;  // a dangling link: nothing to lose
  if (S_ISDIR(st.st_mode)) throw Error(path + ": is a directory, expected " + what);
  if (!S_ISREG(st.st_mode))
    throw Error(path + ": " + file_kind_problem(path) + ", not a regular file: servesim writes " + what +
                " only to regular files (it would replace it)");
  if (st.st_size == 0) return true;
  char head[kHeadBytes];
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  ssize_t got = 0;
  if (fd >= 0) {
    got = ::pread(fd, head, sizeof head, 0);
    ::close(fd);
  }
  const std::string_view h(head, got > 0 ? static_cast<size_t>(got) : 0);
  if (!is_kind(h)) {
    std::string kind = binary_format_problem(h, path);
    if (kind.rfind("is ", 0) == 0) kind = "; it " + kind.substr(0, kind.find(','));
    else kind = "; it starts with '" + head_text(h) + "'";
    throw Error(path + ": exists and is not " + what + kind +
                "; servesim never replaces a file of another kind: choose another path or remove it");
  }
  return true;
}

KindTest starts_with(std::string prefix) {
  // check_replaceable shows a test the first kHeadBytes bytes: a longer prefix is compared that far.
  return [prefix = std::move(prefix)](std::string_view head) {
    const size_t n = std::min(prefix.size(), kHeadBytes);
    return head.size() >= n && head.substr(0, n) == std::string_view(prefix).substr(0, n);
  };
}

AtomicFile::AtomicFile(std::string path, std::string what, const KindTest& is_kind)
    : path_(std::move(path)), what_(std::move(what)) {
  const bool exists = check_replaceable(path_, what_, is_kind);
  const fs::path target(path_);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::string tmpl = (dir / ("." + target.filename().string() + ".tmp-XXXXXX")).string();
  const int fd = ::mkstemp(tmpl.data());
  if (fd < 0)
    throw Error(path_ + ": cannot write " + what_ + " (is the directory there and writable?): " + std::strerror(errno));
  tmp_ = tmpl;
  // mkstemp makes the file private (0600); give it the mode the target has, or the usual one.
  struct stat st {};
  if (exists && ::stat(path_.c_str(), &st) == 0) {
    ::fchmod(fd, st.st_mode & 07777);
  } else {
    const mode_t mask = ::umask(0);
    ::umask(mask);
    ::fchmod(fd, 0666 & ~mask);
  }
  ::close(fd);
  out_.open(tmp_, std::ios::binary | std::ios::trunc);
  if (!out_) throw Error(path_ + ": cannot write " + what_ + " (" + tmp_ + ")");
}

AtomicFile::~AtomicFile() {
  if (published_) return;
  if (out_.is_open()) out_.close();
  if (!tmp_.empty()) ::unlink(tmp_.c_str());
}

void AtomicFile::finish() {
  if (finished_) return;
  out_.flush();
  const bool ok = static_cast<bool>(out_);
  out_.close();
  if (!ok || out_.fail())
    throw Error(path_ + ": writing " + what_ + " failed (disk full?); the file was left as it was");
  const int fd = ::open(tmp_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ::fsync(fd) != 0) {
    const int err = errno;
    if (fd >= 0) ::close(fd);
    throw Error(path_ + ": writing " + what_ + " failed: " + std::strerror(err) + "; the file was left as it was");
  }
  ::close(fd);
  finished_ = true;
}

void AtomicFile::publish() {
  finish();
  if (::rename(tmp_.c_str(), path_.c_str()) != 0)
    throw Error(path_ + ": cannot put " + what_ + " in place: " + std::strerror(errno));
  published_ = true;
}

void write_file_atomically(const std::string& path, const std::string& what, const KindTest& is_kind,
                           std::string_view text) {
  AtomicFile f(path, what, is_kind);
  f.stream().write(text.data(), static_cast<std::streamsize>(text.size()));
  f.publish();
}

DirectoryLock::DirectoryLock(const std::string& dir) {
  fd_ = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd_ < 0) throw Error(dir + ": cannot open the directory to lock it: " + std::strerror(errno));
  while (::flock(fd_, LOCK_EX) != 0) {
    if (errno == EINTR) continue;
    const int err = errno;
    ::close(fd_);
    fd_ = -1;
    throw Error(dir + ": cannot lock the directory: " + std::strerror(err));
  }
}

DirectoryLock::~DirectoryLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the lock
}

}  // namespace servesim::core
