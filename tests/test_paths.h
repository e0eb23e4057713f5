#pragma once
// Paths handed to the tests by meson (tests/meson.build), never derived from the working directory.

#include <cstdlib>
#include <filesystem>
#include <string>

namespace servesim::testing {

inline std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}
// ../shared beside the project: real traces and reference data (read-only, third-party).
inline std::string shared_dir() { return env_or_empty("SERVESIM_SHARED_DIR"); }
inline std::string source_dir() { return env_or_empty("SERVESIM_SOURCE_DIR"); }
inline std::string servesim_bin() { return env_or_empty("SERVESIM_BIN"); }
inline std::string shared_file(const std::string& rel) { return shared_dir() + "/" + rel; }

// A fresh, empty directory under the system temp dir, removed when the object dies.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "servesim-test-XXXXXX").string();
    char* made = ::mkdtemp(tmpl.data());
    path_ = made ? made : tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace servesim::testing
