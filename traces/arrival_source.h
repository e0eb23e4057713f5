#pragma once
// The interface of every workload: a stream of requests in arrival order. A workload knows nothing
// of how it will be served. Sources stream: they never hold a whole trace in memory.

#include <cstdint>
#include <memory>
#include <vector>

#include "sim/core/params.h"
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
  double repetition = -1;             // how often its output repeats n-grams of its context, in
                                      // [0, 1] (prompt-lookup drafting); < 0 when unknown
};

class ArrivalSource {
 public:
  virtual ~ArrivalSource() = default;
  // Writes the next request (arrival times never decrease) and returns true; false at the end.
  // Malformed input throws core::InputError naming the file, the line and the field.
  virtual bool next(RequestSpec& out) = 0;
  // Tokens covered by one entry of block_hashes (512 for Mooncake traces); 0 when there are none.
  virtual int64_t hash_block_tokens() const { return 0; }
};

// Family "workloads". Factory arguments: the run's seed (used when the workload sets no seed).
using WorkloadRegistry = core::Registry<ArrivalSource, uint64_t>;
WorkloadRegistry& workload_registry();

}  // namespace servesim::traces
