#include "hwmodels/expert_parallel.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>

#include "sim/core/error.h"
#include "sim/core/format.h"
#include "sim/core/rng.h"

namespace servesim::hwmodels {

namespace {
double d(int64_t v) { return static_cast<double>(v); }

// A share a little above 1/k still rounds to a valid routing when written with few digits.
constexpr double kShareSlack = 1e-9;

// Probability that none of a token's k distinct experts (of E, uniformly) is among `held` of them.
double miss_probability(double experts, double held, int64_t k) {
  double q = 1.0;
  for (int64_t i = 0; i < k; ++i) q *= std::max(0.0, (experts - held - d(i)) / (experts - d(i)));
  return q;
}
}  // namespace

std::vector<double> zipf_expert_shares(int64_t experts, double exponent) {
  std::vector<double> by_rank(static_cast<size_t>(experts));
  double sum = 0;
  for (int64_t r = 0; r < experts; ++r) sum += by_rank[static_cast<size_t>(r)] = std::pow(d(r + 1), -exponent);
  for (double& s : by_rank) s /= sum;
  // Popularity ranks -> expert ids: a Fisher-Yates shuffle from a fixed stream.
  std::vector<int64_t> id(static_cast<size_t>(experts));
  std::iota(id.begin(), id.end(), 0);
  core::Rng rng(0, "expert_popularity");
  for (int64_t i = experts - 1; i > 0; --i)
    std::swap(id[static_cast<size_t>(i)], id[rng.uniform_int(static_cast<uint64_t>(i + 1))]);
  std::vector<double> shares(static_cast<size_t>(experts));
  for (int64_t r = 0; r < experts; ++r) shares[static_cast<size_t>(id[static_cast<size_t>(r)])] = by_rank[static_cast<size_t>(r)];
  return shares;
}

std::vector<double> read_expert_shares(const std::string& path, int64_t experts) {
  std::ifstream in(path);
  if (!in) throw core::InputError(path, 0, "", "cannot open the expert shares file");
  std::vector<double> v;
  std::string line;
  int64_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (const size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    const auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos) continue;
    const auto last = line.find_last_not_of(" \t\r");
    const std::string field = line.substr(first, last - first + 1);
    const std::string name = "expert " + std::to_string(v.size());
    double x = 0;
    size_t used = 0;
    try {
      x = std::stod(field, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != field.size() || !std::isfinite(x) || x < 0)
      throw core::InputError(path, n, name, "'" + field + "' is not a non-negative number (one load per line)");
    if (static_cast<int64_t>(v.size()) == experts)
      throw core::InputError(path, n, name, "more loads than the model's " + std::to_string(experts) + " routed experts");
    v.push_back(x);
  }
  if (static_cast<int64_t>(v.size()) != experts)
    throw core::InputError(path, n, "", "has " + std::to_string(v.size()) + " loads; the model has " +
                                            std::to_string(experts) + " routed experts, one load per line");
  const double sum = std::accumulate(v.begin(), v.end(), 0.0);
  if (!(sum > 0)) throw core::InputError(path, n, "", "every load is zero");
  for (double& x : v) x /= sum;
  return v;
}

std::string ep_problem(const ModelSpec& m, int64_t tp, const ExpertParallelism& ep) {
  const std::string p = std::to_string(ep.degree);
  if (ep.degree < 1) return "expert_parallel: must be at least 1, got " + p;
  if (!ep.enabled()) {
    if (ep.redundant_experts > 0)
      return "redundant_experts: redundant experts need expert parallelism (expert_parallel > 1)";
    return "";
  }
  if (!m.is_moe()) return "expert_parallel: " + m.name + " has no routed experts to spread (a dense model)";
  if (ep.degree % tp != 0)
    return "expert_parallel: " + p + " GPUs is not a whole number of attention ranks of tensor_parallel = " +
           std::to_string(tp) + " GPUs";
  if (ep.redundant_experts < 0) return "redundant_experts: must be at least 0";
  const int64_t slots = m.num_experts + ep.redundant_experts;
  if (slots % ep.degree != 0)
    return "redundant_experts: the " + std::to_string(m.num_experts) + " routed experts of " + m.name + " plus " +
           std::to_string(ep.redundant_experts) + " redundant ones (" + std::to_string(slots) +
           ") do not split evenly over expert_parallel = " + p + " GPUs; each GPU must hold the same number";
  if (ep.redundant_experts > 0 && !ep.eplb)
    return "redundant_experts: redundant replicas are placed by load; set [moe] placement = \"eplb\" (or leave it "
           "unset)";
  if (ep.nodes() > 1 && ep.degree % ep.gpus_per_node != 0)
    return "expert_parallel: " + p + " GPUs across nodes of " + std::to_string(ep.gpus_per_node) +
           " (network.gpus_per_node) would leave a node partly used; use a multiple of " +
           std::to_string(ep.gpus_per_node) + " or at most " + std::to_string(ep.gpus_per_node);
  if (!ep.expert_shares.empty()) {
    if (static_cast<int64_t>(ep.expert_shares.size()) != m.num_experts)
      return "expert_shares: " + std::to_string(ep.expert_shares.size()) + " shares for " +
             std::to_string(m.num_experts) + " routed experts";
    for (size_t e = 0; e < ep.expert_shares.size(); ++e)
      if (ep.expert_shares[e] * d(m.experts_per_token) > 1.0 + kShareSlack)
        return "expert_shares: expert " + std::to_string(e) + " would take " +
               core::format_double(ep.expert_shares[e]) + " of the token visits, more than 1/top-k = " +
               core::format_double(1.0 / d(m.experts_per_token)) +
               ": a token visits an expert at most once, so no expert can be chosen by more than every token";
  }
  return "";
}

ExpertPlacement place_experts(const ModelSpec& m, const ExpertParallelism& ep) {
  ExpertPlacement p;
  if (!ep.enabled()) return p;
  if (const std::string why = ep_problem(m, 1, ep); !why.empty()) throw core::Error("internal: " + why);
  const int64_t experts = m.num_experts;
  const int64_t slots = experts + ep.redundant_experts;
  const size_t gpus = static_cast<size_t>(ep.degree);
  p.slots_per_gpu = slots / ep.degree;
  std::vector<double> share = ep.expert_shares;
  if (share.empty()) share.assign(static_cast<size_t>(experts), 1.0 / d(experts));
  p.replicas.assign(static_cast<size_t>(experts), 1);
  p.slot_expert.resize(static_cast<size_t>(slots));
  if (!ep.eplb) {
    std::iota(p.slot_expert.begin(), p.slot_expert.end(), 0);
  } else {
    // EPLB: each redundant replica goes to the expert whose replicas carry the most (ties: lowest id).
    for (int64_t i = 0; i < ep.redundant_experts; ++i) {
      size_t best = 0;
      for (size_t e = 1; e < share.size(); ++e)
        if (share[e] / d(p.replicas[e]) > share[best] / d(p.replicas[best])) best = e;
      ++p.replicas[best];
    }
    // Then the replicas, heaviest first, each to the least-loaded GPU with a free slot (ties: lowest
    // GPU), the longest-processing-time rule.
    std::vector<int64_t> order;
    for (size_t e = 0; e < share.size(); ++e)
      for (int64_t r = 0; r < p.replicas[e]; ++r) order.push_back(static_cast<int64_t>(e));
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return share[static_cast<size_t>(a)] / d(p.replicas[static_cast<size_t>(a)]) >
             share[static_cast<size_t>(b)] / d(p.replicas[static_cast<size_t>(b)]);
    });
    std::vector<double> load(gpus, 0.0);
    std::vector<int64_t> used(gpus, 0);
    for (int64_t e : order) {
      size_t g = gpus;
      for (size_t c = 0; c < gpus; ++c)
        if (used[c] < p.slots_per_gpu && (g == gpus || load[c] < load[g])) g = c;
      p.slot_expert[g * static_cast<size_t>(p.slots_per_gpu) + static_cast<size_t>(used[g]++)] = e;
      load[g] += share[static_cast<size_t>(e)] / d(p.replicas[static_cast<size_t>(e)]);
    }
  }
  const double k = d(m.experts_per_token);
  p.slot_visit.resize(p.slot_expert.size());
  p.gpu_load.assign(gpus, 0.0);
  for (size_t s = 0; s < p.slot_expert.size(); ++s) {
    const size_t e = static_cast<size_t>(p.slot_expert[s]);
    const double visit_share = share[e] / d(p.replicas[e]);
    p.slot_visit[s] = std::min(1.0, k * visit_share);
    p.gpu_load[s / static_cast<size_t>(p.slots_per_gpu)] += visit_share;
  }
  for (size_t g = 1; g < gpus; ++g)
    if (p.gpu_load[g] > p.gpu_load[static_cast<size_t>(p.busiest_gpu)]) p.busiest_gpu = static_cast<int64_t>(g);
  p.imbalance = d(ep.degree) * p.gpu_load[static_cast<size_t>(p.busiest_gpu)];
  return p;
}

EpCopies ep_copies_per_token(const ModelSpec& m, const ExpertParallelism& ep, bool low_latency) {
  EpCopies c;
  if (!ep.enabled()) return c;
  const double k = d(m.experts_per_token);
  const double gpus = d(ep.degree), local = d(ep.gpus_in_node()), nodes = d(ep.nodes());
  if (low_latency) {
    // One copy per (token, expert) to the expert's GPU: of the slots, 1/P are on the token's own GPU,
    // (G - 1)/P elsewhere in its node, the rest on other nodes.
    c.nvlink = k * (local - 1.0) / gpus;
    c.scaleout = k * (gpus - local) / gpus;
    return c;
  }
  // Normal kernels: one RDMA copy to each other node that holds one of the token's experts (to the
  // GPU of the same local rank there), then NVLink copies to every other GPU in a node that holds one
  // (the token's own node directly, the others by forwarding).
  const double e = d(m.num_experts);
  const double miss_gpu = miss_probability(e, e / gpus, m.experts_per_token);
  const double miss_node = miss_probability(e, e / nodes, m.experts_per_token);
  c.scaleout = (nodes - 1.0) * (1.0 - miss_node);
  c.nvlink = nodes * (local - 1.0) * (1.0 - miss_gpu);
  return c;
}

double ep_dispatch_bytes_per_copy(const ModelSpec& m, const ExpertParallelism& ep) {
  constexpr double kScaleBlock = 128, kScaleBytes = 4;
  const double h = d(m.hidden_size);
  return h * ep.dispatch_bytes + (ep.dispatch_scales ? std::ceil(h / kScaleBlock) * kScaleBytes : 0.0);
}

double ep_combine_bytes_per_copy(const ModelSpec& m) { return d(m.hidden_size) * m.activation_bytes; }

double expected_max_count(double mean, int64_t gpus) {
  if (gpus <= 1 || mean <= 0) return mean;
  return mean + std::sqrt(mean) * std::sqrt(2.0 * std::log(d(gpus)));
}

}  // namespace servesim::hwmodels
