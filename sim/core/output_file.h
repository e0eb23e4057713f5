#pragma once
// Writing results so that they are never lost or silently replaced:
//
//  - PathPlan: the files one command reads and writes, checked before anything is written, so that
//    no output overwrites an input or another output of the same command (`--timeline r.db
//    --db r.db`, `--timeline run.toml`). Paths are compared by what they are on disk (device and
//    inode: symbolic and hard links, `./x` and `x`), or by their canonical form when not there yet.
//  - AtomicFile: an output written to a temporary file beside its target and renamed over it only
//    when it is complete, so a failure (a full disk, a kill) leaves the old file as it was; an
//    existing file of another kind (a database where a timeline goes) is never replaced.

#include <cstdint>
#include <fstream>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace servesim::core {

class PathPlan {
 public:
  // `role` names the file in messages: "the configuration", "'workload.path'", "--db".
  void input(const std::string& path, const std::string& role);
  void output(const std::string& path, const std::string& role);
  // An output directory (--csv DIR): the files it will hold are outputs, and the directory itself
  // must not be an input or another output.
  void output_files(const std::string& dir, const std::vector<std::string>& names, const std::string& role);
  // core::UsageError naming both roles when an output is an input or another output.
  void check() const;

 private:
  struct Entry {
    std::string path;
    std::string role;
    bool output = false;
  };
  std::vector<Entry> entries_;
};

// How many of a file's first bytes a KindTest sees.
inline constexpr size_t kHeadBytes = 64;

// True when `path` exists and is something servesim may replace as `what`: a regular file whose
// first kHeadBytes bytes satisfy `is_kind` (or an empty file). Throws core::Error for a directory, a device,
// a pipe, or a file of another kind; false when nothing is there.
using KindTest = std::function<bool(std::string_view head)>;
bool check_replaceable(const std::string& path, const std::string& what, const KindTest& is_kind);

// "starts with `prefix`" as a KindTest.
KindTest starts_with(std::string prefix);

class AtomicFile {
 public:
  // Checks `path` with check_replaceable and opens a temporary file in its directory. `what` names
  // the file in messages ("the timeline (--timeline)").
  AtomicFile(std::string path, std::string what, const KindTest& is_kind);
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();  // removes the temporary file unless published

  std::ostream& stream() { return out_; }
  const std::string& path() const { return path_; }
  // Flushes and syncs the temporary file; throws core::Error when that fails (a full disk): the
  // target is untouched.
  void finish();
  // Renames the finished temporary file over the target (finish() first when not done).
  void publish();

 private:
  std::string path_, what_, tmp_;
  std::ofstream out_;
  bool finished_ = false, published_ = false;
};

// Writes `text` to `path` through an AtomicFile.
void write_file_atomically(const std::string& path, const std::string& what, const KindTest& is_kind,
                           std::string_view text);

// An exclusive advisory lock (flock) on a directory, held for the object's life: processes that
// write the same output directory take turns.
class DirectoryLock {
 public:
  explicit DirectoryLock(const std::string& dir);
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;
  ~DirectoryLock();

 private:
  int fd_ = -1;
};

}  // namespace servesim::core
