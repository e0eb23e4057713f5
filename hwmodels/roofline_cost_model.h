#pragma once
// The roofline step cost model: each operator of an iteration takes
//   max(FLOPs / (peak x compute efficiency), bytes / (bandwidth x memory efficiency)) + kernel overhead
// on one GPU of the tensor-parallel group, summed over the operators of every layer, plus attention,
// the LM head, the TP all-reduces and the engine's per-iteration and per-layer overheads. The
// operator list mirrors the kernels a vLLM-style engine runs for a Llama block (with MoE experts and
// MLA projections where the model has them); names follow the Vidur operator profiles
// (shared/reference-data/operator-profiles) so a calibration can replace one operator at a time.
//
// Efficiencies are constants ([cost_model] parameters) unless a calibration profile gives them as
// tables over shape (calibration_profile.h): GEMM compute efficiency over rows and weight size,
// memory efficiency over bytes, per-family elementwise curves, attention curves, all-reduce
// alpha-beta per GPU count, launch costs and engine overheads. A key written in [cost_model]
// overrides the profile.

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hwmodels/calibration_profile.h"
#include "hwmodels/cost_model.h"
#include "hwmodels/expert_parallel.h"
#include "hwmodels/recycled_rows.h"

namespace servesim::hwmodels {

// The [cost_model] kind = "roofline" parameters, in the units their names carry. Defaults and the
// evidence behind them: roofline_cost_model.cc.
struct RooflineParams {
  double compute_efficiency = 0.75;            // fraction of peak FLOP/s a GEMM reaches
  double memory_efficiency = 0.85;             // fraction of HBM bandwidth a weight-streaming GEMM reaches
  double elementwise_efficiency = 0.5;         // fraction of HBM bandwidth of norms, RoPE, SiLU, adds
  double attention_compute_efficiency = 0.6;   // fraction of peak a FlashAttention-style kernel reaches
  double attention_memory_efficiency = 0.7;    // fraction of HBM bandwidth reading a paged KV cache
  double kernel_overhead_us = 2.0;             // fixed time every kernel costs, however small
  std::optional<double> gemm_kernel_overhead_us;  // the same for GEMMs; unset: kernel_overhead_us
  double allreduce_latency_us = 10.0;          // fixed time of one TP all-reduce
  double interconnect_efficiency = 0.65;       // fraction of NVLink bandwidth an all-reduce reaches
  double eager_launch_us = 0.0;                // CPU time to launch one kernel without CUDA graphs
  double graph_launch_us = 10.0;               // one CUDA graph (or graph piece) replay
};

// Which efficiencies come from the profile's tables (the rest from RooflineParams): a table is used
// when the profile has it and the [cost_model] key it replaces was not written.
struct ProfileUse {
  bool gemm_compute = true, gemm_memory = true, elementwise = true, attention_compute = true,
       attention_memory = true, all_reduce = true;
};

std::vector<core::ParamSpec> roofline_param_specs();
RooflineParams roofline_params_from(const core::Params& params);
// Puts the profile's launch costs and engine overheads into `params`, except for the [cost_model]
// keys `given` says the user wrote; returns which of the profile's tables the model should use.
ProfileUse apply_profile_scalars(const CalibrationProfile& profile, RooflineParams& params,
                                 const std::function<bool(std::string_view key)>& given);

// One operator's share of an iteration (per GPU seconds; FLOPs and bytes for the whole TP group),
// summed over its `count` executions (num_layers for per-layer operators, twice that for the two
// residual adds).
struct OperatorCost {
  std::string_view name;
  int64_t count = 0;
  double seconds = 0;
  double flops = 0;
  double bytes = 0;
  double peak_flop_seconds = 0;  // its FLOPs at the peak of their precision, GPU-seconds (StepCost)
};

// What one execution of a row-linear operator is, per GPU: for fitting calibration profiles and
// validating them against measured operator tables.
struct OperatorShape {
  std::string_view name;
  bool gemm = false;             // a GEMM (compute and memory); else an elementwise kernel
  std::string_view family;       // elementwise: the profile's curve kind (rms_norm, rope, act, add, embedding)
  double weight_elements = 0;    // GEMM: N x K on this GPU
  double flops_per_row = 0;      // per GPU
  double weight_bytes = 0;       // per GPU, read once per execution
  double bytes_per_row = 0;      // per GPU
  double peak_flops = 0;         // the compute rate its FLOPs run at (GEMM)
};

class RooflineCostModel final : public StepCostModel {
 public:
  // Throws core::Error when tp_problem(model, tp) is not empty (callers check it first, to report
  // the problem at the config key that set tp). `profile` may be null (constant efficiencies).
  // With `ep` enabled (degree > 1, ep_problem() empty) the replica is ep.degree GPUs: attention,
  // dense MLPs and shared experts run on degree / tensor_parallel data-parallel ranks (tensor-parallel
  // inside each), the routed experts whole on every GPU, with dispatch and combine all-to-alls.
  RooflineCostModel(ModelSpec model, GpuSpec gpu, int64_t tensor_parallel, RooflineParams params = {},
                    const CalibrationProfile* profile = nullptr, ProfileUse use = {}, ExpertParallelism ep = {});

  StepCost step(const BatchShape& shape) const override;
  void decode_steps(const BatchShape& shape, int64_t stride, int count, StepCost* out) const override;
  const ModelSpec& model() const override { return model_; }
  const GpuSpec& gpu() const override { return gpu_; }
  int64_t tensor_parallel() const override { return tp_; }
  int64_t gpus() const override { return ep_.enabled() ? ep_.degree : tp_; }
  const ExpertParallelism& expert_parallelism() const { return ep_; }
  const ExpertPlacement& expert_placement() const { return placement_; }
  const RooflineParams& params() const { return params_; }
  bool calibrated() const { return calibrated_; }

  // The same iteration operator by operator (operators that do not run are left out); the
  // seconds, flops and bytes add up to step(shape). Allocates: for reports and calibration, not
  // for the event loop.
  std::vector<OperatorCost> breakdown(const BatchShape& shape) const;

  // Keeps the calibrated operators' seconds for rows = 0 .. kTabulatedRows - 1 as step() asks for
  // them, so it looks them up instead of taking logarithms again (the same function: results do not
  // change). The registry's factory does this for simulation runs; tools that build many
  // short-lived models need not.
  void precompute();

  // The row-linear operators of a dense block and the embedding and LM head, as shapes.
  std::vector<OperatorShape> operator_shapes() const;
  // GPU time of one execution of operator `name` on `rows` rows (efficiencies and kernel overhead,
  // no CPU launch floor): what a kernel profiler measures. nullopt for an unknown name.
  std::optional<double> operator_seconds(std::string_view name, double rows) const;

 private:
  // A GEMM or an elementwise kernel whose work is linear in the rows it processes. Per GPU; the
  // *_s fields are precomputed seconds so step() is a handful of multiply-adds per operator.
  struct LinearOp {
    std::string_view name;
    std::string_view family;           // elementwise curve kind; "" for GEMMs
    int64_t count = 0;                 // executions per iteration
    bool gemm = false;
    bool rows_include_prefill_context = false;  // MLA's kv_b_proj re-expands cached latents in prefill
    double fixed_s = 0;                // the kernel's fixed time (kernel_overhead_us, or the GEMM one)
    double row_floor_s = 0;            // one row's time in a kernel giving a row to a block (profile)
    double weight_s = 0;               // streaming the operator's weights once
    double memory_s_per_row = 0;       // activation bytes in and out, per row
    double compute_s_per_row = 0;      // FLOPs per row
    double group_flops_per_row = 0;    // useful FLOPs, whole TP group (replicated work not counted)
    double weight_bytes = 0;           // per GPU
    double bytes_per_row = 0;          // per GPU
    double weight_elements = 0;        // GEMM: N x K per GPU
    double flops_per_row = 0;          // per GPU
    double peak = 0;                   // compute rate at efficiency 1
    Curve compute_curve;               // efficiency over rows; empty: constant (folded into compute_s_per_row)
    Curve memory_curve;                // efficiency over bytes; empty: constant (folded into the *_s)
    // With curves and precompute(): the seconds for rows = 0, 1, 2, ..., filled as rows are asked
    // for (a run asks for few of them; negative = not computed yet). Its storage (kTabulatedRows
    // reserved) is recycled on the thread from one model to the next, never its contents
    // (recycled_rows.h).
    bool tabulated = false;
    mutable RecycledRows seconds_by_rows;
  };

  // Rows up to which calibrated operators' times are tabulated: beyond any engine's token budget
  // per iteration (vLLM's max_num_batched_tokens is a few thousand); larger steps compute directly.
  static constexpr size_t kTabulatedRows = 16384;

  // The routed experts of one MoE block: a grouped GEMM whose weights are read for the experts the
  // step activates, its activation and the weighted combine.
  struct MoeBlock {
    bool present = false;
    int64_t count = 0;                 // MoE blocks
    LinearOp gate;                     // router: hidden -> experts, replicated on every GPU
    LinearOp up, act, down, combine;   // per expert-row (token x k) costs; weight_s is one expert's
    double experts = 0, top_k = 0;
    double log_miss = 0;               // log(1 - k / E): an expert missed by one token
  };

  template <class Sink>
  StepCost evaluate(const BatchShape& shape, Sink&& sink) const;
  // One term of an iteration's sum: per-GPU seconds, whole-group FLOPs and bytes.
  struct Term {
    double seconds = 0, flops = 0, bytes = 0, peak_flop_seconds = 0;
  };
  // An attention kernel over `layers` layers (launch floor unless replayed in a graph).
  Term attention_term(bool graph, double layers, double pairs, double new_tokens, double keys_read,
                      double flops_per_pair, double group_flops_per_pair, double read_bytes_per_token,
                      double compute_rate, double memory_rate) const;
  // With speculative decoding each decode may carry extra query tokens (BatchShape::decode_extra_*).
  Term decode_attention_term(bool graph, double layers, int64_t decode_seqs, int64_t decode_context_tokens,
                             int64_t extra_tokens = 0, int64_t extra_pairs = 0) const;
  // The decode terms that depend on the contexts (full, window and sparse attention, the sparse
  // layers' indexer), in evaluate()'s order; `emit(name, layers, term)` for each present.
  template <class Emit>
  void decode_context_terms(bool graph, const BatchShape& s, Emit&& emit) const;
  static bool is_decode_context_term(std::string_view name);
  // The sparse layers' lightning indexer over `pairs` query-key pairs reading `keys_read` cached
  // index keys for `new_tokens` queries, streaming at `memory_rate`.
  Term indexer_term(bool graph, double pairs, double new_tokens, double keys_read, double memory_rate) const;
  // The linear-attention layers: recurrent decode of `seqs` sequences, or chunked prefill of
  // `tokens` tokens in `seqs` chunks.
  Term linear_attention_term(bool graph, bool prefill, double seqs, double tokens) const;
  double block_occupancy(double blocks) const;
  // step()'s memo of decode-only iterations, by batch size: evaluate()'s running sum of the terms
  // before the attention's, the terms after it, and what the attention's terms take from the batch
  // size alone (their value is recomputed from the context each time, with evaluate()'s operations).
  // The later terms are added in evaluate()'s order, so the sums have the same bits, with two
  // shortcuts that provably change none: a term's zero components are left out (the sums are of
  // non-negative terms from +0, never -0, and x + 0 = x), and when every FLOP (byte) count is an
  // integer no larger than 2^51 the later counts are added as one sum (every partial sum is then an
  // integer below 2^53, exact in any order).
  struct DecodeTerms {
    Term before;
    // The non-zero components, in order, then zeros up to a multiple of four (add_in_order).
    std::vector<double> after_seconds, after_peak;
    std::vector<double> after_flops, after_bytes;   // the same, used when the sums are not exact
    double after_flops_sum = 0, after_bytes_sum = 0;
    // The largest summed context at which the attention terms' FLOPs (bytes) are integers no larger
    // than 2^50 (every factor an integer and the product bounded), with the sums before and after
    // them integers no larger than 2^51; -1 when some is not.
    int64_t flops_exact_context = -1, bytes_exact_context = -1;
    double seqs = 0;                 // the batch size
    double q_o_bytes = 0;            // q_o_bytes_per_token_ x seqs
    double kv_write_bytes = 0;       // kv_write_bytes_per_token_ x seqs
    double launch_floor = 0;         // eager_launch_s_, or -inf under a full graph (no floor)
    bool occupancy_full = false;     // every context gives the analytic occupancy 1
    Curve decode_table_column;       // the decode table at x = seqs (Table2D::at_x); empty: analytic
    LaunchMode launch = LaunchMode::kEager;
    int64_t graph_tokens = 0;
    bool ready = false;
  };
  static constexpr int64_t kMemoDecodeSeqs = 8192;
  // step()'s memo of iterations without decodes (a scheduler that prefills apart, such as the
  // continuous one, runs one per arriving request), off under expert parallelism: direct-mapped on
  // the chunks' tokens and cached context, keyed by every field such a shape can have non-zero (the
  // rest must be their defaults: prefill_memo_key), so a hit is a shape step() has costed before and
  // returns what it returned (step() is a function of the shape alone: the same bits). Small
  // entries in a small table: the table is read at random, and a larger one (4,096 entries of whole
  // shapes) made S1 slower with fewer instructions. Allocated at the first such step; a miss
  // replaces the entry.
  using PrefillKey = std::array<int64_t, 10>;
  static bool prefill_memo_key(const BatchShape& s, PrefillKey& key);
  struct PrefillEntry {
    PrefillKey key{};  // key[0] = prefill_seqs: 0 while empty
    double seconds = 0, flops = 0, bytes = 0, peak_flop_seconds = 0;
  };
  static constexpr int kPrefillMemoBits = 11;
  mutable std::vector<PrefillEntry> prefill_memo_;
  mutable std::vector<DecodeTerms> decode_memo_;  // one simulation uses a model from one thread
  void fill_decode_memo(DecodeTerms& memo, const BatchShape& shape) const;
  // The memo of a decode-only shape step() memoises (primed for its launch), or null.
  [[gnu::always_inline]] inline DecodeTerms* decode_memo(const BatchShape& shape) const;
  // evaluate()'s running sums just after the attention terms, for a decode-only shape at summed
  // context `context`: the memo's terms before them plus the attention's.
  [[gnu::always_inline]] inline Term memo_through_attention(const DecodeTerms& memo, const BatchShape& shape,
                                                            int64_t context) const;
  // evaluate()'s running sums plus one more term, added as evaluate() adds it.
  [[gnu::always_inline]] static inline void add_term(Term& total, const Term& term);
  Term sparse_through_attention(const DecodeTerms& memo, const BatchShape& shape, int64_t context) const;
  // The step's FLOPs and bytes: the later counts added to those sums as evaluate() adds them.
  [[gnu::always_inline]] inline void memo_counts(const DecodeTerms& memo, int64_t context, double flops, double bytes,
                                                 StepCost& out) const;
  // step() of a decode-only shape with decode_context_tokens = `context`, from its memo.
  [[gnu::always_inline]] inline StepCost memo_step(const DecodeTerms& memo, const BatchShape& shape,
                                                   int64_t context) const;
  // decode_steps() for 2 <= count <= kLanes, the later terms added to kLanes sums at once.
  template <int kLanes>
  void memo_steps(const DecodeTerms& memo, const BatchShape& shape, int64_t stride, int count, StepCost* out) const;
  // The full or sliding-window layers' decode attention, what decode_attention_term multiplies by
  // the layers (same products, formed once).
  struct DecodeLayers {
    double layers = 0, layers_t = 0, layers_group_flops_per_pair = 0;
  };
  DecodeLayers full_decode_, window_decode_;
  double decode_peak_rate_ = 0;  // hbm_ x attn_decode_peak_eff_: the analytic rate at occupancy 1
  // decode_attention_term(full graph or not, layers, memo's batch, `context`) without speculative
  // tokens, from the memo's batch-size parts.
  [[gnu::always_inline]] inline Term memo_attention_term(const DecodeTerms& memo, const DecodeLayers& layers,
                                                         int64_t context) const;
  double linear_seconds(const LinearOp& op, double rows) const;
  double curve_seconds(const LinearOp& op, double rows) const;
  void tabulate(LinearOp& op) const;
  double moe_gemm_seconds(const LinearOp& op, double active_experts, double expert_rows) const;
  void apply_profile(LinearOp& op, const GemmTables* gemm) const;
  const LinearOp* find_linear(std::string_view name) const;

  ModelSpec model_;
  GpuSpec gpu_;
  int64_t tp_;
  RooflineParams params_;
  bool calibrated_ = false;
  const CalibrationProfile* profile_ = nullptr;  // only during construction
  ProfileUse use_;

  std::vector<LinearOp> pre_attention_ops_;   // norms, projections, rotary
  std::vector<LinearOp> post_attention_ops_;  // output projection, norm, dense MLP (dense blocks)
  MoeBlock moe_;
  std::vector<LinearOp> tail_ops_;            // residual adds
  LinearOp embedding_{};
  LinearOp final_norm_{};
  LinearOp lm_head_{};
  double kernel_s_ = 0;
  double eager_launch_s_ = 0;
  double graph_launch_s_ = 0;
  // Attention, per layer per GPU.
  double kv_bytes_per_token_ = 0;          // decode: the cache one token of context occupies
  double prefill_kv_bytes_per_token_ = 0;  // prefill: the keys and values it reads per key token
  double kv_write_bytes_per_token_ = 0;    // the cache written for a new token
  double q_o_bytes_per_token_ = 0;         // reading Q, writing O
  double attn_flops_per_pair_ = 0;         // prefill: 4 x head_dim x heads on this GPU
  double attn_group_flops_per_pair_ = 0;   // prefill: the same over all heads
  double decode_flops_per_pair_ = 0;       // decode (MLA's absorbed form differs from prefill)
  double decode_group_flops_per_pair_ = 0;
  double attn_compute_rate_ = 0;           // FLOP/s
  double attn_memory_rate_ = 0;            // bytes/s
  Curve attention_prefill_curve_;          // efficiency over mean chunk tokens; empty: constant
  Table2D attention_decode_table_;         // efficiency over (seqs, mean context); empty: analytic
  // The analytic attention model (no measured table for this layout): decode streams the cache at
  // hbm x attn_decode_peak_eff_ x occupancy, where occupancy says how much of the GPU the kernel's
  // thread blocks (sequences x KV heads x context splits) can keep busy; prefill reaches
  // peak x attn_prefill_peak_eff_ x the utilisation of FlashAttention's 128-row query tiles (the
  // query heads that share a KV head are packed into the tile's rows).
  double attn_decode_peak_eff_ = 0, attn_prefill_peak_eff_ = 0;
  double attn_kv_heads_ = 1, attn_group_ = 1;  // KV heads per GPU; query heads per KV head
  double sm_count_ = 1;
  double decode_attention_occupancy(double seqs, double mean_context) const;
  double prefill_tile_utilisation(double mean_chunk_tokens) const;
  double attn_peak_ = 0, hbm_ = 0;
  // Per-layer attention types: layers of each, and what the non-full ones cost.
  double full_layers_ = 0, window_layers_ = 0, sparse_layers_ = 0, linear_layers_ = 0;
  double sparse_flops_per_pair_ = 0, sparse_group_flops_per_pair_ = 0;  // absorbed MLA (or plain) scores
  double indexer_flops_per_pair_ = 0;      // whole on every GPU (replicated)
  double indexer_key_bytes_ = 0;           // index keys cached per token
  double indexer_query_bytes_ = 0;         // per query: fp8 query heads, head weights
  double indexer_topk_ = 0;                // K: indices written and read per query
  double indexer_rate_ = 0;                // FLOP/s: fp8 tensor cores where the GPU has them
  double indexer_peak_ = 0;
  double lin_state_bytes_ = 0;             // one sequence's state on this GPU (recurrent + convolution)
  double lin_decode_flops_ = 0;            // per token on this GPU
  double lin_prefill_flops_ = 0;           // per token on this GPU (chunked form)
  double lin_token_bytes_ = 0;             // q, k, v, gates in; output out; per token on this GPU
  double lin_chunk_state_bytes_ = 0;       // prefill: per-chunk states written and read, per token
  double lin_heads_ = 1;                   // value heads on this GPU (thread blocks per sequence)
  // All-reduce.
  int64_t allreduces_ = 0;                 // per iteration
  // Message-size regimes of one all-reduce, ascending, the last open-ended: a message of `rows` rows
  // (rows x hidden x activation bytes) takes latency + ring factor x bytes / bus bandwidth of the
  // first regime it fits.
  struct AllReduceLine {
    double max_rows = 0;
    double latency_s = 0;
    double s_per_row = 0;
  };
  std::vector<AllReduceLine> allreduce_lines_;
  double all_reduce_seconds(double rows) const;
  // Expert parallelism (ep_.degree > 1).
  ExpertParallelism ep_;
  ExpertPlacement placement_;
  double ranks_ = 1;                        // attention data-parallel ranks
  std::vector<double> busiest_log_miss_;    // per slot of the busiest GPU: log(1 - its visit probability)
  std::vector<std::pair<double, double>> slot_log_miss_;  // over all slots: (log miss, slots with it)
  EpCopies copies_normal_, copies_low_latency_;
  double dispatch_copy_bytes_ = 0, combine_copy_bytes_ = 0;
  double nvlink_rate_ = 0, scaleout_rate_ = 0;
  double a2a_phase_s_ = 0;                  // fixed time of one dispatch or combine
  // Expected token visits the busiest GPU's experts get from a step of `tokens` tokens, and how
  // many of its experts they activate (and over all GPUs, for the bytes).
  struct EpLoad {
    double busiest_visits = 0, busiest_active = 0, all_active = 0;
  };
  EpLoad ep_load(double tokens) const;
};

// The page size a decode-attention table is looked up with: the cost model is built from model,
// GPU and TP alone and does not see the replica's block_size; 16 is vLLM's default and the
// replica's.
inline constexpr int64_t kAssumedKvBlockSize = 16;

// One GPU's share of `m`'s attention at tensor parallelism `tensor_parallel`, as the decode kernel
// sees it: query heads split evenly, KV heads split or replicated (kv_heads_per_gpu); MLA decodes
// every local head against the whole latent (kv_lora_rank + qk_rope_head_dim per token).
AttentionLayout decode_attention_layout(const ModelSpec& m, int64_t tensor_parallel);

}  // namespace servesim::hwmodels
