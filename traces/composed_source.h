#pragma once
// A workload composed of an arrival process ([workload.arrival], family "arrivals": when requests
// are sent) and request content (the workload kind: what each request is). The same content can be
// sent Poisson, evenly spaced, with a fixed count, offline, in stages or by closed-loop clients.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sim/core/params.h"
#include "traces/arrival_process.h"
#include "traces/arrival_source.h"
#include "traces/rate_profile.h"
#include "traces/request_classes.h"

namespace servesim::traces {

// What the n-th request (0, 1, 2, ... in send order) carries: lengths, prefix hashes, session.
class RequestContent {
 public:
  virtual ~RequestContent() = default;
  // Fills everything of `out` but the arrival and the stage.
  virtual void fill(uint64_t n, RequestSpec& out) = 0;
  virtual int64_t hash_block_tokens() const { return 0; }
};

// `own`, then the parameters every composed kind shares: the arrival section, max_requests, seed,
// client_timeout_s, repetition, classes, rate_profile (open-loop arrival processes only: the sends
// are time-changed through it, rate_profile.h).
std::vector<core::ParamSpec> composed_params(std::vector<core::ParamSpec> own);

class ComposedSource final : public ArrivalSource {
 public:
  // Reads the arrival section, max_requests and client_timeout_s of `p`.
  ComposedSource(const core::Params& p, uint64_t seed, std::unique_ptr<RequestContent> content);

  bool next(RequestSpec& out) override;
  int64_t hash_block_tokens() const override { return content_->hash_block_tokens(); }
  std::optional<core::Duration> client_timeout() const override { return client_timeout_; }
  bool closed_loop() const override { return process_->listens(); }
  std::optional<core::Time> due() override;
  void request_done(uint64_t id, core::Time t) override { process_->request_done(id, t); }
  const core::RequestClasses& classes() const override { return classes_.classes(); }

 private:
  std::unique_ptr<ArrivalProcess> process_;
  std::unique_ptr<RequestContent> content_;
  int64_t max_requests_ = 0;
  std::optional<core::Duration> client_timeout_;
  double repetition_ = -1;  // every request's RequestSpec::repetition
  uint64_t sent_ = 0;
  std::unique_ptr<RateProfile> profile_;  // null: none
  int64_t last_shaped_ns_ = 0;
  std::string who_;  // names the arrivals in the profile's errors
  ClassAssigner classes_;  // draws each request's class ([[workload.classes]]) on stream "classes"
};

}  // namespace servesim::traces
