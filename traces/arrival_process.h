#pragma once
// When a composed workload sends its requests (family "arrivals"), apart from what each request
// carries (its lengths and prefix hashes: the workload kind, composed_source.h). Kinds: open-loop
// timers (poisson, gamma, constant, poisson_fixed_count, offline), load stages run one after another
// (stages), and clients that each wait for their previous request (closed_loop).
//
// A process hands out sends in time order. One whose sends depend on when requests end (listens())
// may have none to give for a while: it gets each request's end through request_done() and then
// has more. This is how closed-loop clients and stages that wait for the previous stage to drain
// are expressed.

#include <cstdint>
#include <optional>
#include <string>

#include "sim/core/params.h"
#include "sim/core/time.h"

namespace servesim::traces {

struct Send {
  core::Time time;     // never before the previous send's
  uint32_t stage = 0;  // index of the load stage that sends it (0 without stages)
};

class ArrivalProcess {
 public:
  virtual ~ArrivalProcess() = default;
  // The next send if one is known now; nullopt at the end, or, for a process that listens(), until
  // a request in flight ends. Calling it again without take() gives the same send.
  virtual std::optional<Send> peek() = 0;
  // The send peek() gave is made; it is request `id` (0, 1, 2, ... in send order).
  virtual void take(uint64_t id) = 0;
  // Whether sends depend on when requests end for their clients.
  virtual bool listens() const { return false; }
  // Request `id` ended for its client at `t` (never before the previous send).
  virtual void request_done(uint64_t id, core::Time t) {
    (void)id;
    (void)t;
  }
};

// Family "arrivals". Factory arguments: the workload's seed.
using ArrivalRegistry = core::Registry<ArrivalProcess, uint64_t>;
ArrivalRegistry& arrival_registry();

// The declaration of a composed workload's `arrival` section.
core::ParamSpec arrival_section_spec();

}  // namespace servesim::traces
