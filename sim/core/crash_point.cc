#include "sim/core/crash_point.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

namespace servesim::core {
namespace {

struct Armed {
  std::string name;
  int64_t at = 0;                  // the hit that kills
  std::atomic<int64_t> hits{0};
};

struct CrashPoints {
  std::vector<Armed> points;
  CrashPoints() {
    const char* spec = std::getenv("SERVESIM_CRASH_AT");
    if (!spec) return;
    std::string s(spec);
    // Parse "name:N,name:N"; a malformed entry is ignored rather than thrown (this is a test hook
    // evaluated in a static initialiser), but an entry that parses always takes effect.
    size_t begin = 0;
    std::vector<std::pair<std::string, int64_t>> parsed;
    while (begin <= s.size()) {
      const size_t end = std::min(s.find(',', begin), s.size());
      const std::string item = s.substr(begin, end - begin);
      const size_t colon = item.rfind(':');
      if (colon != std::string::npos && colon > 0 && colon + 1 < item.size()) {
        char* stop = nullptr;
        const long long n = std::strtoll(item.c_str() + colon + 1, &stop, 10);
        if (stop && *stop == '\0' && n >= 1) parsed.emplace_back(item.substr(0, colon), n);
      }
      begin = end + 1;
    }
    points = std::vector<Armed>(parsed.size());
    for (size_t i = 0; i < parsed.size(); ++i) {
      points[i].name = parsed[i].first;
      points[i].at = parsed[i].second;
    }
  }
};

CrashPoints& crash_points() {
  static CrashPoints p;
  return p;
}

}  // namespace

bool crash_points_armed() { return !crash_points().points.empty(); }

void crash_point(std::string_view name) {
  CrashPoints& p = crash_points();
  if (p.points.empty()) return;
  for (Armed& a : p.points) {
    if (a.name != name) continue;
    if (a.hits.fetch_add(1) + 1 == a.at) {
      // What `kill -9` does: nothing after this line runs, nothing is flushed or rolled back.
      ::kill(::getpid(), SIGKILL);
      ::pause();
    }
  }
}

}  // namespace servesim::core
