#pragma once
// The interface of every workload: a stream of requests in arrival order. A workload knows nothing
// of how it will be served. Sources stream: they never hold a whole trace in memory.
//
// Most sources are open loop: their arrival times are fixed in advance and the cluster reads one
// request ahead. A closed-loop source (clients that send their next request when the previous one
// has ended, or load stages that wait for a stage to drain) listens to completions: the cluster
// reports the moment each request ends for its client (request_done) and takes a request with
// next() only when due() says one is due now.

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "sim/core/params.h"
#include "sim/core/request_class.h"
#include "sim/core/time.h"

namespace servesim::traces {

struct RequestSpec {
  core::Time arrival;                 // offset from the start of the workload
  int64_t prompt_tokens = 0;          // > 0
  int64_t output_tokens = 0;          // > 0
  std::vector<uint64_t> block_hashes; // prefix block ids (Mooncake hash_ids); empty when unknown
  int64_t hashed_tokens = 0;          // tokens block_hashes cover (the last block may be partial);
                                      // 0 = the prompt (Mooncake); generators may cover the output too
  uint64_t session = 0;               // conversation/session id; 0 when unknown
  uint32_t stage = 0;                 // load stage that sends it (workloads with stages); 0 otherwise
  double repetition = -1;             // how often its output repeats n-grams of its context, in
                                      // [0, 1] (prompt-lookup drafting); < 0 when unknown
  int32_t request_class = 0;          // index into classes() (0 without classes); a trace reader
                                      // sets -1 when the row names none (the source draws one)
};

class ArrivalSource {
 public:
  virtual ~ArrivalSource() = default;
  // Writes the next request (arrival times never decrease) and returns true; false at the end (a
  // closed-loop source: when no request is due). Malformed input throws core::InputError naming
  // the file, the line and the field.
  virtual bool next(RequestSpec& out) = 0;
  // Tokens covered by one entry of block_hashes (512 for Mooncake traces); 0 when there are none.
  virtual int64_t hash_block_tokens() const { return 0; }
  // The clients' time-out: a request whose client has not received its last token this long after
  // sending it fails (the client gives up; the engine aborts it). nullopt: clients wait forever.
  virtual std::optional<core::Duration> client_timeout() const { return std::nullopt; }

  // ---- closed loop ----
  // True when requests depend on completions. The cluster then never reads ahead: it asks due()
  // after every change, calls next() once per request at the time due() gave, and reports every
  // request's end through request_done().
  virtual bool closed_loop() const { return false; }
  // The send time of the earliest request known now (never before the current simulated time);
  // nullopt while none is: every client waits for a request in flight, or the workload is over.
  virtual std::optional<core::Time> due() { return std::nullopt; }
  // Request `id` (the id-th request next() gave, from 0) ended for its client at `t` (>= the current
  // simulated time): its last token received, given up (time-out), or refused (rejected).
  virtual void request_done(uint64_t id, core::Time t) {
    (void)id;
    (void)t;
  }
  // The workload's request classes ([[workload.classes]]); empty without classes. Every request's
  // RequestSpec::request_class indexes this list.
  virtual const core::RequestClasses& classes() const {
    static const core::RequestClasses none;
    return none;
  }
  // About how long the arrivals span in simulated seconds (after rate_scale), known up front for
  // generators (what a run's outputs must be sized for); 0 when unknown (a trace).
  virtual double expected_span_s() const { return 0; }
};

// Family "workloads". Factory arguments: the run's seed (used when the workload sets no seed).
using WorkloadRegistry = core::Registry<ArrivalSource, uint64_t>;
WorkloadRegistry& workload_registry();

}  // namespace servesim::traces
