// The libFuzzer entry point of one fuzz target; the build names the target (-DSERVESIM_FUZZ_TARGET).
// An input that breaks the oracle, or lets any exception escape, aborts with a one-line reason:
// libFuzzer then saves it as crash-<sha1> (see scripts/fuzz.sh).

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>
#include <typeinfo>

#include "tests/fuzz/targets.h"

#ifndef SERVESIM_FUZZ_TARGET
#error "build with -DSERVESIM_FUZZ_TARGET=\"<name>\" (tests/fuzz/meson.build does)"
#endif

namespace {

// A private directory for the scratch file the reader targets write each input to, removed at exit.
class Scratch {
 public:
  Scratch() {
    std::error_code ec;
    const std::filesystem::path base =
        std::filesystem::is_directory("/dev/shm", ec) ? "/dev/shm" : std::filesystem::temp_directory_path();
    std::string tmpl = (base / "servesim-fuzz-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) {
      std::perror("servesim fuzz: mkdtemp");
      std::abort();
    }
    dir_ = tmpl;
    file_ = dir_ + "/input";
  }
  ~Scratch() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  const std::string& file() const { return file_; }

 private:
  std::string dir_, file_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const servesim::testing::FuzzTarget* target = servesim::testing::find_fuzz_target(SERVESIM_FUZZ_TARGET);
  static const Scratch scratch;
  if (!target) {
    std::fprintf(stderr, "servesim fuzz: no target named '%s'\n", SERVESIM_FUZZ_TARGET);
    std::abort();
  }
  try {
    target->run(std::string_view(reinterpret_cast<const char*>(data), size), scratch.file());
  } catch (const servesim::testing::OracleFailure& e) {
    std::fprintf(stderr, "\nservesim fuzz [%s]: ORACLE FAILURE: %s\n", target->name, e.what());
    std::abort();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "\nservesim fuzz [%s]: an exception escaped (%s): %s\n", target->name, typeid(e).name(),
                 e.what());
    std::abort();
  }
  return 0;
}
