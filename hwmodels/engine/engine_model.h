#pragma once
// The serving engine around the GPU kernels: what a request pays between the client and the
// engine's queue (HTTP server, tokenisation), what each token pays on its way back (detokenising,
// streaming), the host work of every iteration (scheduling, preparing inputs, sampling) and whether
// it overlaps the GPU, and which iterations replay CUDA graphs. Pure, like a cost model: the
// replica asks it how to launch a batch and how long the iteration takes around the GPU time the
// cost model gives; the cluster asks it the client-side delays.
//
// Kinds (family "engines"): `vllm-v1` (vLLM's V1 engine: API server process, engine core busy loop,
// piecewise CUDA graphs for every batch up to the largest captured size and full graphs for
// decode-only batches) and `none` (no engine: the GPU time alone, every kernel launched eagerly
// with no host floor). Every parameter can be overridden in [engine], which is also how another
// engine is described (docs/engine.md). A calibration profile may carry fitted values
// ([overhead], [engine.<kind>]); keys written in [engine] win over it.

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "hwmodels/calibration_profile.h"
#include "hwmodels/cost_model.h"
#include "sim/core/params.h"

namespace servesim::hwmodels {

enum class CudaGraphMode : uint8_t {
  kNone,              // every kernel launched by the host
  kFullDecode,        // decode-only batches up to the largest size replay one captured graph
  kPiecewise,         // every batch up to the largest size runs piecewise graphs (attention eager)
  kFullAndPiecewise,  // full graphs for decode-only batches, piecewise for the rest (vLLM V1)
};

struct EngineModel {
  std::string name;
  // Client <-> engine.
  double api_server_s = 0;            // the client's send -> the engine's waiting queue
  double tokenize_s_per_token = 0;    // per prompt token, on the same path
  double stream_s = 0;                // an iteration's end -> the client has its tokens
  double first_token_s = 0;           // extra before the first token reaches the client
  // Host work of one iteration.
  double schedule_s = 0;              // fixed: scheduler, input preparation, sampling, outputs
  double decode_schedule_s = 0;       // the same for decode-only iterations
  double schedule_s_per_seq = 0;      // per sequence in the iteration
  double layer_s = 0;                 // per layer, in iterations not replayed as one full graph
  double decode_layer_s = 0;          // the same for decode-only iterations
  bool async_scheduling = false;      // the host prepares iteration k+1 while the GPU runs k
  // Per-iteration time nothing overlaps: sampling and logits handling after the model's kernels,
  // and the sampled tokens' copy to the host that the next iteration waits for.
  double sample_s = 0;
  double sample_s_per_seq = 0;
  // CUDA graphs.
  CudaGraphMode graphs = CudaGraphMode::kNone;
  int64_t max_graph_tokens = 512;     // the largest captured batch (tokens)
  // Attention data-parallel ranks of the replica (expert parallelism): each rank runs its own
  // scheduler and graphs on its share of the batch (busiest_rank), in parallel with the others.
  int64_t data_parallel = 1;

  // The client's send -> the engine's queue, for a prompt of `prompt_tokens` tokens.
  double ingress_seconds(int64_t prompt_tokens) const {
    return api_server_s + tokenize_s_per_token * static_cast<double>(prompt_tokens);
  }
  // How the iteration is launched: sets shape.launch and shape.graph_tokens (the busiest rank's
  // padded size with data_parallel ranks).
  void prepare(BatchShape& shape) const;
  // Host seconds of the iteration (layers = the model's).
  double host_seconds(const BatchShape& shape, int64_t layers) const;
  // The iteration's duration around `gpu_s` of kernels: host + GPU, or with async scheduling the
  // larger of the two unless the replica was idle (nothing to overlap the host work with); then
  // the sampling time, which nothing overlaps.
  double iteration_seconds(double gpu_s, const BatchShape& shape, int64_t layers, bool after_idle) const;

  // The per-iteration terms around the GPU time: host_seconds() and the sampling time.
  struct IterationTerms {
    double host_s = 0;
    double sample_s = 0;
  };
  // prepare() and the iteration's terms in one pass, the replica's hot path: the same values as
  // prepare(), host_seconds() and iteration_seconds(). Decode-only batches without speculative
  // drafts (most of a run's iterations) depend on their size alone, so their launch and terms are
  // memoised by (decode_seqs, layers). The memo belongs to this object and is not copied with it:
  // set the parameters before the first launch() (a simulation builds its engines once and never
  // changes them; one simulation uses an engine from one thread).
  IterationTerms launch(BatchShape& shape, int64_t layers) const {
    if (shape.prefill_seqs == 0 && shape.prefill_tokens == 0 && shape.prefill_logits == 0 &&
        shape.decode_extra_tokens == 0 && static_cast<uint64_t>(shape.decode_seqs) < memo_.size) {
      const DecodeTerms& m = memo_.by_seqs[static_cast<size_t>(shape.decode_seqs)];
      if (m.layers == layers) {
        shape.launch = m.launch;
        shape.graph_tokens = m.graph_tokens;
        return m.terms;
      }
    }
    return launch_and_remember(shape, layers);
  }
  // iteration_seconds() from launch()'s terms.
  double iteration_seconds(double gpu_s, const IterationTerms& t, bool after_idle) const {
    if (async_scheduling && !after_idle) return std::max(gpu_s, t.host_s) + t.sample_s;
    return gpu_s + t.host_s + t.sample_s;
  }

 private:
  struct DecodeTerms {
    int64_t layers = -1;  // -1: not yet computed
    LaunchMode launch = LaunchMode::kEager;
    int64_t graph_tokens = 0;
    IterationTerms terms;
  };
  // A member whose copies start empty: a copied engine may be given other parameters.
  struct DecodeMemo {
    std::vector<DecodeTerms> by_seqs;
    uint64_t size = 0;  // by_seqs.size(), kept to spare the hot path a division
    DecodeMemo() = default;
    DecodeMemo(const DecodeMemo&) {}
    DecodeMemo& operator=(const DecodeMemo&) {
      by_seqs.clear();
      size = 0;
      return *this;
    }
  };
  IterationTerms launch_and_remember(BatchShape& shape, int64_t layers) const;
  static constexpr int64_t kMemoDecodeSeqs = 1 << 16;
  mutable DecodeMemo memo_;
};

// vLLM's CUDA-graph capture sizes: a batch of b tokens runs the graph captured for the next size in
// 1, 2, 4, 8, 16, 24, ... (multiples of 8).
int64_t cuda_graph_batch(int64_t b);

std::string_view cuda_graph_mode_name(CudaGraphMode mode);

// Family "engines". Factory argument: the calibration profile of the GPU (may be null), whose
// [overhead] and [engine.<kind>] values replace the preset's defaults.
using EngineRegistry = core::Registry<EngineModel, const CalibrationProfile*>;
EngineRegistry& engine_registry();

}  // namespace servesim::hwmodels
