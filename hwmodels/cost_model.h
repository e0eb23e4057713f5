#pragma once
// The step cost model: a pure function from the shape of one iteration to its duration, FLOPs and
// bytes. It sees no clock and no scheduler.

#include <cstdint>

#include "hwmodels/gpu_spec.h"
#include "hwmodels/model_spec.h"
#include "sim/core/params.h"

namespace servesim::hwmodels {

// How the kernels of an iteration are launched (the engine decides: EngineModel::prepare).
enum class LaunchMode : uint8_t {
  kEager,           // each kernel launched by the host: none can take less than the launch time
  kPiecewiseGraph,  // graph pieces between the attention kernels (launched eagerly), padded rows
  kFullGraph,       // one captured graph for the whole step, padded rows, one launch
};

// One iteration of one replica, in aggregate. Prefill chunks: a chunk of c new tokens whose sequence
// already has p tokens in the KV cache attends to p + c keys (causally among the c).
struct BatchShape {
  int64_t prefill_seqs = 0;             // sequences with a prefill chunk this iteration
  int64_t prefill_tokens = 0;           // sum of c over chunks
  int64_t prefill_logits = 0;           // chunks that complete their prompt (need the LM head)
  int64_t prefill_context_tokens = 0;   // sum of p over chunks (KV already cached, read by attention)
  int64_t prefill_attention_pairs = 0;  // sum over chunks of c*p + c*(c+1)/2 (query-key pairs)
  int64_t decode_seqs = 0;              // decoding sequences, one new token each
  int64_t decode_context_tokens = 0;    // sum over decodes of the keys attended (context incl. new token)
  LaunchMode launch = LaunchMode::kEager;
  int64_t graph_tokens = 0;             // with a graph: the captured size the tokens are padded to
  // Hybrid and sparse attention (ModelSpec::attention_limits; all 0 for a model without such
  // layers): the sums above with each query's keys capped, at the window W for sliding-window
  // layers and at the top-k K for sparse layers. A query at position x (1-based) attends to
  // min(x, W) keys; a chunk after p cached tokens reads min(p, W - 1) of them from the cache.
  int64_t prefill_window_pairs = 0;           // sum over chunks' queries of min(x, W)
  int64_t prefill_window_context_tokens = 0;  // sum over chunks of min(p, W - 1)
  int64_t prefill_sparse_pairs = 0;           // sum over chunks' queries of min(x, K)
  int64_t decode_window_context_tokens = 0;   // sum over decodes of min(context, W)
  int64_t decode_sparse_context_tokens = 0;   // sum over decodes of min(context, K)

  // Speculative decoding (policies/decoding/, docs/models.md). A decode that verifies e draft tokens
  // processes 1 + e tokens: each extra one is a row of every linear layer and one more query of the
  // decode attention kernel, which reads the sequence's cached KV once for all of its queries.
  int64_t decode_extra_tokens = 0;      // sum over decodes of e
  int64_t decode_extra_pairs = 0;       // the query-key pairs they add: sum of e c + e (e + 1) / 2, c the decode's context
  int64_t decode_extra_window_pairs = 0;  // the same under the window cap (capped_pairs(c, e, W))
  int64_t decode_extra_sparse_pairs = 0;  // and under the top-k cap
  bool decode_extra_logits = true;      // they need logits (verification); a drafter catching up needs the last only
  // The drafter's passes in this iteration, after verification (a draft model, head or MTP module,
  // whose weights are not the target's: the target's cost model ignores these fields and
  // SpeculativeCostModel adds them). Pass 1 runs the drafter over what the target processed (its
  // prefill chunks, and each decode's accepted tokens); passes 2..draft_passes are decodes of one
  // token for each of draft_seqs sequences.
  int64_t draft_passes = 0;             // 0: no drafter runs
  int64_t draft_seqs = 0;               // sequences proposed for
  int64_t draft_context_tokens = 0;     // sum over them of the keys pass 2 attends
  int64_t draft_catchup_tokens = 0;     // pass 1: tokens beyond one per decode (accepted drafts)
  int64_t draft_catchup_pairs = 0;      // pass 1: the query-key pairs they add

  int64_t tokens() const { return prefill_tokens + decode_seqs + decode_extra_tokens; }
  bool empty() const { return prefill_tokens == 0 && decode_seqs == 0; }
};

// The part of a step the busiest of `ranks` data-parallel attention ranks runs (expert parallelism:
// each rank has its own requests): ceil(seqs / ranks) of the prefill chunks and of the decodes, with
// the mean tokens, cached context, query-key pairs (capped ones too) and logits of those sequences
// (whole tokens, rounded up). The launch fields are kept. ranks = 1 gives the shape itself.
BatchShape busiest_rank(const BatchShape& s, int64_t ranks);

// Expert parallelism's dispatch and combine all-to-alls in one step (all zero without EP). The cost
// model costs the intra-node share analytically and the cross-node share at the uncontended
// scale-out rate; a cluster with a network moves `scaleout_bytes` per GPU as flows on its topology
// and re-times the step with all_to_all_step_seconds() (sim/cluster: Network::start_exchange).
struct AllToAllTime {
  double compute_s = 0;       // the rest of the step
  double fixed_s = 0;         // per-collective latencies and kernel overheads, all MoE layers
  double nvlink_s = 0;        // intra-node bytes at the NVLink rate
  double scaleout_s = 0;      // cross-node bytes at the uncontended scale-out rate
  double scaleout_bytes = 0;  // per GPU, each phase's heavier direction at the busiest GPU, all MoE layers
  bool overlapped = false;    // two-batch overlap: the step takes max(compute, comm), not the sum
};
// The step's seconds when its cross-node traffic takes `scaleout_s`: NVLink and the network run at
// once (comm = fixed + max(nvlink, scale-out)); the comm adds to the compute or, overlapped, hides
// behind it.
double all_to_all_step_seconds(const AllToAllTime& a, double scaleout_s);
// Sum over the queries at positions prior + 1 .. prior + tokens of min(position, cap): the
// query-key pairs of a chunk whose queries each attend to at most `cap` keys.
int64_t capped_pairs(int64_t prior, int64_t tokens, int64_t cap);
// Adds one prefill chunk of `tokens` new tokens after `prior` cached ones (`completes`: it finishes
// the prompt, so the LM head runs for it), with the capped sums the limits ask for.
void add_prefill_chunk(BatchShape& shape, const AttentionLimits& limits, int64_t prior, int64_t tokens,
                       bool completes);
// Adds `seqs` decodes whose attention reads `context` keys each (their context incl. the new token).
void add_decodes(BatchShape& shape, const AttentionLimits& limits, int64_t seqs, int64_t context);

struct StepCost {
  double seconds = 0;  // wall time of the iteration on one GPU of the replica
  double flops = 0;    // useful FLOPs, whole replica (TP group, or every GPU of an EP replica)
  double bytes = 0;    // HBM bytes moved, whole replica
  // GPU-seconds the useful FLOPs would take at the tensor-core peak of the precision each ran at
  // (fp8 GEMMs at the fp8 peak, attention and unquantised GEMMs at the 16-bit peak): the
  // denominator-free half of MFU, so that MFU = peak_flop_seconds / (seconds x GPUs) never
  // compares fp8 work with the 16-bit peak.
  double peak_flop_seconds = 0;
  AllToAllTime all_to_all;  // expert parallelism only
};

class StepCostModel {
 public:
  virtual ~StepCostModel() = default;
  virtual StepCost step(const BatchShape& shape) const = 0;
  // The steps of `count` decode-only iterations of one batch, as a replica's run of them asks
  // (Replica::decode_window): out[j] = step(shape with decode_context_tokens + j x stride), the same
  // bits, for j = 0 .. count - 1 (every other field as in `shape`). This one asks step() each time;
  // a model may compute them together (RooflineCostModel: the memo looked up once).
  virtual void decode_steps(const BatchShape& shape, int64_t stride, int count, StepCost* out) const;
  static constexpr int kMaxDecodeSteps = 8;  // the most a replica asks decode_steps() for at once
  virtual const ModelSpec& model() const = 0;
  virtual const GpuSpec& gpu() const = 0;
  virtual int64_t tensor_parallel() const = 0;
  // GPUs of one replica: the TP group, or all the GPUs of an expert-parallel replica.
  virtual int64_t gpus() const { return tensor_parallel(); }
};

struct CalibrationProfile;
struct ExpertParallelism;

// Family "cost_models". Factory arguments: model, GPU, tensor-parallel degree (already validated to
// divide the model's heads), the calibration profile the run selected for the GPU (null: none;
// hwmodels::selected_calibration), and the replica's expert parallelism (degree 1: none; already
// validated with ep_problem).
using CostModelRegistry = core::Registry<StepCostModel, const ModelSpec&, const GpuSpec&, int64_t,
                                         const CalibrationProfile*, const ExpertParallelism&>;
CostModelRegistry& cost_model_registry();

}  // namespace servesim::hwmodels
