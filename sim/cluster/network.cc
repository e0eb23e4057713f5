#include "sim/cluster/network.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/dijkstra_shortest_paths.hpp>

#include "sim/core/error.h"

namespace servesim::sim {

struct Topology::Graph {
  struct Edge {
    double latency_s = 0;
    double weight = 0;  // latency plus a tiny cost per hop: ties go to the shorter path
    uint32_t link = 0;
  };
  using G = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS, boost::no_property, Edge>;
  G g;
  std::vector<size_t> gpu_vertex;
};

Topology::Topology(const TopologyConfig& c) : config_(c), graph_(std::make_unique<Graph>()) {
  if (c.num_gpus <= 0 || c.gpus_per_node <= 0 || c.nics_per_node <= 0 || c.nodes_per_switch <= 0)
    throw core::Error("internal: topology needs positive GPU, node, NIC and switch counts");
  auto& g = graph_->g;
  const int64_t nodes = (c.num_gpus + c.gpus_per_node - 1) / c.gpus_per_node;
  const int64_t leaves = (nodes + c.nodes_per_switch - 1) / c.nodes_per_switch;
  auto vertex = [&]() { return boost::add_vertex(g); };
  auto link = [&](size_t a, size_t b, double bw, double lat, const std::string& name) {
    // Full duplex: one directed link each way, each with the full one-direction bandwidth.
    for (int dir = 0; dir < 2; ++dir) {
      Graph::Edge e;
      e.latency_s = lat;
      e.weight = lat + 1e-12;
      e.link = static_cast<uint32_t>(link_bandwidth_.size());
      link_bandwidth_.push_back(bw);
      link_names_.push_back(name + (dir == 0 ? " (up)" : " (down)"));
      if (dir == 0) boost::add_edge(a, b, e, g); else boost::add_edge(b, a, e, g);
    }
  };
  const size_t spine = leaves > 1 ? vertex() : 0;
  std::vector<size_t> leaf(static_cast<size_t>(leaves));
  for (int64_t l = 0; l < leaves; ++l) {
    leaf[static_cast<size_t>(l)] = vertex();
    if (leaves > 1) {
      const int64_t nodes_here = std::min(c.nodes_per_switch, nodes - l * c.nodes_per_switch);
      const double uplink = c.spine_bytes_per_s > 0
                                ? c.spine_bytes_per_s
                                : static_cast<double>(nodes_here * c.nics_per_node) * c.nic_bytes_per_s;
      link(leaf[static_cast<size_t>(l)], spine, uplink, c.switch_latency_s, "leaf " + std::to_string(l) + " - spine");
    }
  }
  graph_->gpu_vertex.resize(static_cast<size_t>(c.num_gpus));
  for (int64_t n = 0; n < nodes; ++n) {
    const size_t nvswitch = vertex();
    std::vector<size_t> nics(static_cast<size_t>(c.nics_per_node));
    for (int64_t k = 0; k < c.nics_per_node; ++k) {
      nics[static_cast<size_t>(k)] = vertex();
      link(nics[static_cast<size_t>(k)], leaf[static_cast<size_t>(n / c.nodes_per_switch)], c.nic_bytes_per_s,
           c.nic_latency_s, "node " + std::to_string(n) + " nic " + std::to_string(k) + " - leaf");
    }
    for (int64_t i = 0; i < c.gpus_per_node && n * c.gpus_per_node + i < c.num_gpus; ++i) {
      const int64_t gpu = n * c.gpus_per_node + i;
      const size_t v = vertex();
      graph_->gpu_vertex[static_cast<size_t>(gpu)] = v;
      link(v, nvswitch, c.nvlink_bytes_per_s, c.nvlink_latency_s, "gpu " + std::to_string(gpu) + " nvlink");
      link(v, nics[static_cast<size_t>(i % c.nics_per_node)], c.pcie_bytes_per_s, c.pcie_latency_s,
           "gpu " + std::to_string(gpu) + " pcie");
    }
  }
}

Topology::~Topology() = default;
Topology::Topology(Topology&&) noexcept = default;

const Topology::Path& Topology::path(int64_t from_gpu, int64_t to_gpu) const {
  if (from_gpu < 0 || to_gpu < 0 || from_gpu >= config_.num_gpus || to_gpu >= config_.num_gpus)
    throw core::Error("internal: path between GPUs outside the topology");
  const uint64_t key = (static_cast<uint64_t>(from_gpu) << 32) | static_cast<uint64_t>(to_gpu);
  auto it = paths_.find(key);
  if (it != paths_.end()) return it->second;

  const auto& g = graph_->g;
  const size_t n = boost::num_vertices(g);
  std::vector<size_t> pred(n);
  std::vector<double> dist(n);
  const size_t src = graph_->gpu_vertex[static_cast<size_t>(from_gpu)];
  const size_t dst = graph_->gpu_vertex[static_cast<size_t>(to_gpu)];
  auto weight = boost::get(&Graph::Edge::weight, g);
  boost::dijkstra_shortest_paths(
      g, src,
      boost::predecessor_map(boost::make_iterator_property_map(pred.begin(), boost::get(boost::vertex_index, g)))
          .distance_map(boost::make_iterator_property_map(dist.begin(), boost::get(boost::vertex_index, g)))
          .weight_map(weight));
  Path p;
  p.bottleneck_bytes_per_s = std::numeric_limits<double>::infinity();
  for (size_t v = dst; v != src;) {
    const size_t u = pred[v];
    if (u == v) throw core::Error("internal: no path between GPU " + std::to_string(from_gpu) + " and " + std::to_string(to_gpu));
    // The cheapest edge u -> v.
    double best = std::numeric_limits<double>::infinity();
    uint32_t best_link = 0;
    for (auto [e, end] = boost::out_edges(u, g); e != end; ++e) {
      if (boost::target(*e, g) != v) continue;
      if (g[*e].latency_s < best) {
        best = g[*e].latency_s;
        best_link = g[*e].link;
      }
    }
    p.links.push_back(best_link);
    p.latency_s += best;
    p.bottleneck_bytes_per_s = std::min(p.bottleneck_bytes_per_s, link_bandwidth_[best_link]);
    v = u;
  }
  std::reverse(p.links.begin(), p.links.end());
  if (p.links.empty()) p.bottleneck_bytes_per_s = std::numeric_limits<double>::infinity();
  return paths_.emplace(key, std::move(p)).first->second;
}

// ---- flows --------------------------------------------------------------------------------------

namespace {
constexpr uint64_t kCompletionBit = uint64_t{1} << 63;
constexpr double kDrainedBytes = 1e-6;
}  // namespace

Network::Network(Simulation& sim, Topology topology) : sim_(sim), topology_(std::move(topology)) {
  residual_.resize(topology_.num_links());
  unfrozen_.resize(topology_.num_links());
}

void Network::start_transfer(uint64_t tag, const std::vector<std::pair<int64_t, int64_t>>& gpu_pairs, double bytes,
                             TransferListener* listener) {
  if (gpu_pairs.empty()) throw core::Error("internal: transfer without GPU pairs");
  advance();
  uint32_t t;
  if (!free_transfers_.empty()) {
    t = free_transfers_.back();
    free_transfers_.pop_back();
  } else {
    t = static_cast<uint32_t>(transfers_.size());
    transfers_.emplace_back();
  }
  Transfer& tr = transfers_[t];
  tr = Transfer{tag, listener, 0, 0, bytes};
  const double share = bytes / static_cast<double>(gpu_pairs.size());
  for (const auto& [from, to] : gpu_pairs) {
    const Topology::Path& p = topology_.path(from, to);
    tr.latency_s = std::max(tr.latency_s, p.latency_s);
    if (p.links.empty() || share <= kDrainedBytes) continue;  // same GPU: nothing to move
    flows_.push_back(Flow{t, &p, share});
    ++tr.flows_left;
  }
  if (tr.flows_left == 0) {
    sim_.schedule_after(core::Duration::from_seconds(tr.latency_s), this, kCompletionBit | t);
    bytes_delivered_ += bytes;
  }
  reschedule();
}

void Network::advance() {
  const core::Time now = sim_.now();
  const double dt = (now - last_update_).seconds();
  last_update_ = now;
  if (dt <= 0) return;
  for (Flow& f : flows_) f.remaining = std::max(0.0, f.remaining - f.rate * dt);
}

void Network::reschedule() {
  ++version_;
  if (flows_.empty()) return;
  // Max-min fair rates by progressive filling: repeatedly find the link whose residual capacity
  // split among its unfrozen flows is smallest, give its flows that rate, and remove them.
  std::fill(unfrozen_.begin(), unfrozen_.end(), 0);
  for (size_t l = 0; l < residual_.size(); ++l) residual_[l] = topology_.link_bandwidth(static_cast<uint32_t>(l));
  for (const Flow& f : flows_)
    for (uint32_t l : f.path->links) ++unfrozen_[l];
  frozen_.assign(flows_.size(), 0);
  size_t left = flows_.size();
  while (left > 0) {
    double share = std::numeric_limits<double>::infinity();
    uint32_t bottleneck = 0;
    for (size_t l = 0; l < residual_.size(); ++l) {
      if (unfrozen_[l] == 0) continue;
      const double s = residual_[l] / static_cast<double>(unfrozen_[l]);
      if (s < share) {
        share = s;
        bottleneck = static_cast<uint32_t>(l);
      }
    }
    // Each pass freezes the flows of one link; a rate that is not a positive finite number (link
    // bandwidths out of proportion) would freeze none and loop for ever.
    if (!(share > 0) || !std::isfinite(share))
      throw core::Error("internal: KV transfer rates did not converge (link share " + std::to_string(share) +
                        " B/s); the [network] bandwidths are out of proportion");
    for (size_t i = 0; i < flows_.size(); ++i) {
      if (frozen_[i]) continue;
      const auto& links = flows_[i].path->links;
      if (std::find(links.begin(), links.end(), bottleneck) == links.end()) continue;
      flows_[i].rate = share;
      frozen_[i] = 1;
      --left;
      for (uint32_t l : links) {
        residual_[l] -= share;
        --unfrozen_[l];
      }
    }
  }
  double next = std::numeric_limits<double>::infinity();
  for (const Flow& f : flows_) next = std::min(next, f.remaining / f.rate);
  if (!(next < core::kMaxClockSeconds)) core::clock_overflow(next, "a KV transfer");
  const int64_t ns = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(next * 1e9)));
  sim_.schedule_after(core::Duration::from_ns(ns), this, version_);
}

void Network::on_event(uint64_t payload) {
  if (payload & kCompletionBit) {
    const uint32_t t = static_cast<uint32_t>(payload & ~kCompletionBit);
    Transfer tr = transfers_[t];
    free_transfers_.push_back(t);
    tr.listener->on_transfer_done(tr.tag);
    return;
  }
  if (payload != version_) return;  // superseded by a later rate change
  advance();
  size_t kept = 0;
  for (size_t i = 0; i < flows_.size(); ++i) {
    Flow& f = flows_[i];
    // Drained, up to the nanosecond the event time was rounded to.
    if (f.remaining <= kDrainedBytes || f.remaining <= f.rate * 1e-9) {
      Transfer& tr = transfers_[f.transfer];
      if (--tr.flows_left == 0) {
        bytes_delivered_ += tr.bytes;
        sim_.schedule_after(core::Duration::from_seconds(tr.latency_s), this, kCompletionBit | f.transfer);
      }
      continue;
    }
    flows_[kept++] = f;
  }
  flows_.resize(kept);
  reschedule();
}

}  // namespace servesim::sim
