#pragma once
// Expert parallelism (EP) for mixture-of-experts models, as DeepSeek's deployment, SGLang and vLLM
// run it: a replica spans `degree` GPUs; attention runs data-parallel (degree / tensor_parallel
// ranks, each with its own requests and KV cache, tensor-parallel inside the rank); the routed
// experts are spread whole over all the GPUs, `(experts + redundant) / degree` per GPU, and every
// MoE layer moves each token to the GPUs of its top-k experts (dispatch) and their outputs back
// (combine), two all-to-alls per layer.
//
// What this file decides, and the cost model uses (roofline_cost_model.cc):
// - where the experts sit (expert_placement): contiguous by id, or EPLB-style (the most loaded
//   experts get the redundant replicas, then the replicas are packed onto GPUs greedily by load),
//   and from the per-expert token shares (uniform, Zipf-skewed or read from a file) each GPU's share
//   of the token visits: the busiest GPU sets the pace of every MoE layer;
// - how many copies of a token cross NVLink and the scale-out network (ep_copies_per_token): the
//   normal (high-throughput) kernels send a token once to each remote node and forward it over
//   NVLink, the low-latency kernels send one copy per (token, expert);
// - what each GPU stores (weight_bytes_per_gpu in roofline.h takes the degree and redundancy).
//
// Which collectives are analytic and which become flows: the intra-node share of the all-to-all is
// costed analytically from the NVLink rate; the cross-node share is reported as bytes per GPU
// (StepCost::all_to_all) that a cluster with a network turns into flows on its topology, sharing
// links with other traffic (sim/cluster/network.h, Network::start_exchange).

#include <cstdint>
#include <string>
#include <vector>

#include "hwmodels/model_spec.h"

namespace servesim::hwmodels {

// Which all-to-all kernels a step uses (DeepEP's two families).
enum class EpKernels : uint8_t {
  kAuto,        // normal for steps with prefill tokens, low-latency for decode-only steps (SGLang's auto)
  kNormal,      // high-throughput: one RDMA copy per (token, remote node), NVLink forwarding
  kLowLatency,  // one copy per (token, expert), straight to the expert's GPU
};

// How one replica runs the MoE layers of its model. degree 1 = no expert parallelism (experts split
// tensor-parallel, as before).
struct ExpertParallelism {
  int64_t degree = 1;                  // GPUs the routed experts spread over = GPUs of one replica
  int64_t redundant_experts = 0;       // extra expert replicas (EPLB); (experts + redundant) % degree == 0
  bool eplb = false;                   // place by load (redundant replicas to the hottest); else contiguous
  std::vector<double> expert_shares;   // per routed expert, its share of token visits (sums to 1); empty = uniform
  EpKernels kernels = EpKernels::kAuto;
  bool two_batch_overlap = false;      // two micro-batches: one's all-to-alls hide behind the other's compute
  bool routing_noise = true;           // the busiest GPU also carries the step's sampling fluctuation
  double dispatch_bytes = 1.0;         // bytes per hidden element sent in dispatch (fp8 = 1, bf16 = 2)
  bool dispatch_scales = true;         // fp8 dispatch also sends a 4-byte scale per 128 elements
  // The fabric, uncontended, as the cost model sees it (the cluster's network re-times the
  // cross-node part with the traffic actually on the links).
  int64_t gpus_per_node = 8;
  double nvlink_bytes_per_s = 0;       // per GPU, one direction
  double nvlink_latency_s = 0;         // GPU -> GPU inside a node
  double scaleout_bytes_per_s = 0;     // per GPU when every GPU of the node sends at once
  double scaleout_latency_s = 0;       // GPU -> GPU across nodes

  bool enabled() const { return degree > 1; }
  // GPUs of the replica in one node, and nodes the replica spans.
  int64_t gpus_in_node() const { return degree < gpus_per_node ? degree : gpus_per_node; }
  int64_t nodes() const { return (degree + gpus_per_node - 1) / gpus_per_node; }
};

// Attention data-parallel ranks of a replica of `degree` GPUs at attention TP `tensor_parallel`.
inline int64_t attention_ranks(int64_t degree, int64_t tensor_parallel) {
  return degree > 1 ? degree / tensor_parallel : 1;
}

// Per-expert shares of a Zipf law of `exponent` s over popularity ranks (the r-th most popular
// expert gets a share proportional to r^-s; s = 0 is uniform). Ranks are assigned to expert ids by
// a fixed pseudo-random permutation (the same for every run), since which ids are hot is arbitrary
// and contiguous placement would otherwise put all the hot experts on the first GPU.
std::vector<double> zipf_expert_shares(int64_t experts, double exponent);

// A file of per-expert loads: one non-negative number per expert (token counts or shares; they are
// normalised), one per line, blank lines and text after '#' ignored. Throws core::InputError naming
// the file and line; `experts` numbers are required.
std::vector<double> read_expert_shares(const std::string& path, int64_t experts);

// Where the experts sit and how the token visits spread over the GPUs.
struct ExpertPlacement {
  int64_t slots_per_gpu = 0;            // expert replicas per GPU
  std::vector<int64_t> replicas;        // per expert: how many copies
  std::vector<int64_t> slot_expert;     // per slot, GPU-major (GPU g holds slots g*slots_per_gpu ...)
  std::vector<double> slot_visit;       // per slot: probability one token visits it (k x share / replicas)
  std::vector<double> gpu_load;         // per GPU: its share of all token visits (sums to 1)
  int64_t busiest_gpu = 0;
  // degree x the busiest GPU's share: expected max-load / mean-load of the placement (1 = balanced).
  double imbalance = 1.0;
};

// "" when `ep` can run `model` at attention TP `tensor_parallel`, else "key: sentence" naming the
// configuration key to blame (expert_parallel, redundant_experts, expert_shares).
std::string ep_problem(const ModelSpec& model, int64_t tensor_parallel, const ExpertParallelism& ep);

// The placement (throws core::Error when ep_problem is not empty).
ExpertPlacement place_experts(const ModelSpec& model, const ExpertParallelism& ep);

// Expected copies of one token's hidden vector one all-to-all phase moves, by link class, under
// uniform routing (k distinct experts of E, spread evenly over the GPUs). Combine moves the same
// copies back.
struct EpCopies {
  double nvlink = 0;    // GPU -> another GPU of the same node (including normal mode's forwarding)
  double scaleout = 0;  // GPU -> a GPU of another node
};
EpCopies ep_copies_per_token(const ModelSpec& model, const ExpertParallelism& ep, bool low_latency);

// Bytes of one token copy: dispatch (hidden x dispatch_bytes, plus fp8 block scales) and combine
// (hidden x activation bytes, bf16).
double ep_dispatch_bytes_per_copy(const ModelSpec& model, const ExpertParallelism& ep);
double ep_combine_bytes_per_copy(const ModelSpec& model);

// The expected busiest of `gpus` loads whose mean is `mean`: mean + sqrt(mean) x sqrt(2 ln gpus),
// the Gaussian (Poisson-variance) approximation of the maximum of that many counts.
double expected_max_count(double mean, int64_t gpus);

}  // namespace servesim::hwmodels
