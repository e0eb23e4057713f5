#pragma once
// Speculative decoding, the policy side the replica calls (implementations and their registry in
// policies/decoding/). The mechanism is the replica's: each iteration its decodes verify the draft
// tokens proposed for them in the previous one (1 + drafts tokens each, reserved in the KV cache and
// counted in the scheduler's token budget), emit 1 + the accepted drafts (never past the request's
// output), free the KV of the rejected ones, and get new drafts. The policy says how many drafts to
// propose, for whom, how many the target accepts, and what the drafter's passes are.

#include <cstdint>

#include "sim/cluster/request.h"
#include "sim/core/rng.h"

namespace servesim::sim {

class Speculator {
 public:
  virtual ~Speculator() = default;
  // Draft tokens per sequence an iteration proposes when `batch` requests hold KV on the replica
  // (fixed, or a schedule by batch size as engines adapt it); 0 = no speculation this iteration.
  virtual int64_t draft_tokens(int64_t batch) const = 0;
  // The most draft tokens any iteration proposes (the KV a request may reserve beyond its tokens).
  virtual int64_t max_draft_tokens() const = 0;
  // Drafts proposed for request `r` when the iteration proposes `k` (0..k; a prompt lookup that
  // finds no match proposes none).
  virtual int64_t propose(const Request& r, int64_t k, core::Rng& rng) const = 0;
  // How many of the `drafts` (>= 1) draft tokens the target accepts: the longest accepted prefix.
  virtual int64_t accept(const Request& r, int64_t drafts, core::Rng& rng) const = 0;
  // Whether a model drafts (draft model, head, MTP: passes to cost) or not (n-gram lookup).
  virtual bool drafter_runs() const = 0;
  // Whether the drafter's first pass re-reads each decode's accepted tokens (a head or MTP module
  // needs the target's hidden states of every accepted position; a draft model has its own).
  virtual bool catches_up() const = 0;
};

}  // namespace servesim::sim
