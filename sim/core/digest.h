#pragma once
// Content digests (SHA-256) of the files a run reads, so that a run's identity covers what the files
// hold rather than where they lie: a changed trace or model config.json is a different run, and the
// same files reached through another path or working directory are the same run.

#include <cstdint>
#include <string>
#include <string_view>

namespace servesim::core {

// Streaming SHA-256 (FIPS 180-4). The same digest as `sha256sum FILE`. On x86-64 CPUs with the
// SHA extensions the blocks are compressed with them (several times faster); `cpu_extensions`
// false forces the portable code, which gives the same digest (tests compare the two).
class Sha256 {
 public:
  explicit Sha256(bool cpu_extensions = true);
  static bool cpu_extensions_available();
  void update(const void* data, size_t size);
  void update(std::string_view s) { update(s.data(), s.size()); }
  // The digest as 64 lower-case hex digits; the object is spent afterwards.
  std::string hex();

 private:
  void blocks(const unsigned char* p, size_t n);  // n whole 64-byte blocks
  uint32_t h_[8];
  unsigned char buf_[64];
  size_t used_ = 0;
  uint64_t length_ = 0;
  bool hardware_ = false;
};

std::string sha256_hex(std::string_view data);

// What a file was when it was digested: enough to tell that it changed since.
struct FileVersion {
  uint64_t device = 0, inode = 0, size = 0;
  int64_t mtime_ns = 0, ctime_ns = 0;
  bool operator==(const FileVersion&) const = default;
  auto operator<=>(const FileVersion&) const = default;
};

struct FileDigest {
  std::string digest;  // "sha256:<64 hex digits>"
  FileVersion version;
};

// The content digest of `path` (a regular file, read once by streaming; core::InputFile's checks
// and messages, `what` naming its role). Remembered per file version (device, inode, size,
// modification and change times) for the life of the process, so that the points of a sweep or a
// capacity search that read one trace digest it once; thread-safe. A file changed in the last
// two seconds is digested afresh every time (its times may not yet tell a rewrite apart).
FileDigest file_digest(const std::string& path, const std::string& what);

// The file's version now; a default FileVersion when it cannot be stat'ed.
FileVersion file_version(const std::string& path);

// Whether a cache keyed by this version may remember what it read: false for a file changed in the
// last two seconds (git's "racy clean" rule: file times are coarse, a clock tick or seconds on some
// file systems, so a rewrite of the same size right after a read could leave the version as it is).
bool version_settled(const FileVersion& v);

}  // namespace servesim::core
