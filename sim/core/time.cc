#include "sim/core/time.h"

#include <string>

#include "sim/core/error.h"
#include "sim/core/format.h"

namespace servesim::core {

void clock_overflow(double seconds, const char* what) {
  throw Error(std::string(what) + " of " + format_double(seconds) +
              " s is beyond the simulated clock (int64 nanoseconds: at most 292 years); the values that set it "
              "(arrival rates, time windows, hardware speeds, overheads) are out of proportion");
}

}  // namespace servesim::core
