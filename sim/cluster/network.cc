#include "sim/cluster/network.h"

#include <algorithm>
#include <cmath>
#include <functional>
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
  G g;       // GPUs and switches: GPU -> GPU paths
  G g_host;  // g plus the hosts: paths with a host at one end
  std::vector<size_t> gpu_vertex;
  std::vector<size_t> host_in, host_out;  // per node, in g_host: the host as a destination, as a source
  std::vector<size_t> store_in, store_out;  // per store, in g_host: the store as a destination, as a source
  std::vector<size_t> nvme_in, nvme_out;  // per node, in g_host (none: npos): its NVMe as a destination, a source
  // In g_host, a second edge of an NVMe write link (host -> NVMe from the host's source vertex).
  std::vector<std::pair<uint32_t, G::edge_descriptor>> extra_edges;
  std::vector<G::edge_descriptor> edge_of;       // per link of g
  std::vector<G::edge_descriptor> host_edge_of;  // per link, in g_host
};

Topology::Topology(const TopologyConfig& c) : config_(c), graph_(std::make_unique<Graph>()) {
  if (c.num_gpus <= 0 || c.gpus_per_node <= 0 || c.nics_per_node <= 0 || c.nodes_per_switch <= 0 ||
      c.gpus_per_pcie_switch <= 0)
    throw core::Error("internal: topology needs positive GPU, node, NIC and switch counts");
  auto& g = graph_->g;
  const int64_t nodes = (c.num_gpus + c.gpus_per_node - 1) / c.gpus_per_node;
  const int64_t groups = (nodes + c.nodes_per_switch - 1) / c.nodes_per_switch;
  // Rails: a leaf per NIC index in each group of nodes; otherwise one leaf per group.
  const int64_t leaves_per_group = c.rails ? c.nics_per_node : 1;
  const int64_t leaves = groups * leaves_per_group;
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
      graph_->edge_of.push_back(dir == 0 ? boost::add_edge(a, b, e, g).first : boost::add_edge(b, a, e, g).first);
    }
  };
  const size_t spine = leaves > 1 ? vertex() : 0;
  std::vector<size_t> leaf(static_cast<size_t>(leaves));
  for (int64_t l = 0; l < leaves; ++l) {
    leaf[static_cast<size_t>(l)] = vertex();
    if (leaves > 1) {
      const int64_t group = l / leaves_per_group;
      const int64_t nodes_here = std::min(c.nodes_per_switch, nodes - group * c.nodes_per_switch);
      const int64_t nics_here = nodes_here * (c.rails ? 1 : c.nics_per_node);
      const double uplink =
          c.spine_bytes_per_s > 0 ? c.spine_bytes_per_s : static_cast<double>(nics_here) * c.nic_bytes_per_s;
      link(leaf[static_cast<size_t>(l)], spine, uplink, c.switch_latency_s, "leaf " + std::to_string(l) + " - spine");
    }
  }
  graph_->gpu_vertex.resize(static_cast<size_t>(c.num_gpus));
  // Where each node's host attaches (its PCIe switches, or the GPUs' PCIe endpoints), and the names.
  std::vector<std::vector<std::pair<size_t, std::string>>> host_attach(static_cast<size_t>(nodes));
  for (int64_t n = 0; n < nodes; ++n) {
    const size_t nvswitch = vertex();
    const std::string node = "node " + std::to_string(n);
    std::vector<size_t> nics(static_cast<size_t>(c.nics_per_node));
    for (int64_t k = 0; k < c.nics_per_node; ++k) {
      nics[static_cast<size_t>(k)] = vertex();
      const int64_t l = (n / c.nodes_per_switch) * leaves_per_group + (c.rails ? k : 0);
      link(nics[static_cast<size_t>(k)], leaf[static_cast<size_t>(l)], c.nic_bytes_per_s, c.nic_latency_s,
           node + " nic " + std::to_string(k) + " - leaf");
    }
    // PCIe switches shared by gpus_per_pcie_switch GPUs: NIC k hangs off the switch of GPU k's group
    // (spread evenly when a node has fewer NICs than GPUs), each by its own PCIe link.
    std::vector<size_t> pcie_switch;
    if (c.gpus_per_pcie_switch > 1) {
      const int64_t switches = (c.gpus_per_node + c.gpus_per_pcie_switch - 1) / c.gpus_per_pcie_switch;
      for (int64_t s = 0; s < switches; ++s) pcie_switch.push_back(vertex());
      for (int64_t k = 0; k < c.nics_per_node; ++k) {
        const int64_t s = std::min(switches - 1, k * c.gpus_per_node / c.nics_per_node / c.gpus_per_pcie_switch);
        link(nics[static_cast<size_t>(k)], pcie_switch[static_cast<size_t>(s)], c.pcie_bytes_per_s, c.pcie_latency_s,
             node + " nic " + std::to_string(k) + " pcie");
      }
      for (int64_t s = 0; s < switches; ++s)
        host_attach[static_cast<size_t>(n)].emplace_back(pcie_switch[static_cast<size_t>(s)],
                                                        node + " host - pcie switch " + std::to_string(s));
    } else {
      // Each GPU's PCIe link ends at its NIC's vertex: the host attaches there (once per NIC used).
      const int64_t used = std::min(c.nics_per_node, c.gpus_per_node);
      for (int64_t k = 0; k < used; ++k)
        host_attach[static_cast<size_t>(n)].emplace_back(nics[static_cast<size_t>(k)],
                                                        node + " host - nic " + std::to_string(k));
    }
    for (int64_t i = 0; i < c.gpus_per_node && n * c.gpus_per_node + i < c.num_gpus; ++i) {
      const int64_t gpu = n * c.gpus_per_node + i;
      const size_t v = vertex();
      graph_->gpu_vertex[static_cast<size_t>(gpu)] = v;
      link(v, nvswitch, c.nvlink_bytes_per_s, c.nvlink_latency_s, "gpu " + std::to_string(gpu) + " nvlink");
      const size_t up = pcie_switch.empty() ? nics[static_cast<size_t>(i % c.nics_per_node)]
                                            : pcie_switch[static_cast<size_t>(i / c.gpus_per_pcie_switch)];
      link(v, up, c.pcie_bytes_per_s, c.pcie_latency_s, "gpu " + std::to_string(gpu) + " pcie");
    }
  }
  // The hosts, on a copy of the graph (so that GPU -> GPU searches never see them), each host two
  // vertices: one with the links into it, one with the links out of it, so that no path crosses a
  // host. Their links are numbered after every other link (whose numbers stay as without hosts).
  graph_->g_host = g;
  graph_->host_edge_of.resize(link_bandwidth_.size());
  auto& gh = graph_->g_host;
  for (size_t v = 0; v < boost::num_vertices(gh); ++v)
    for (auto [e, end] = boost::out_edges(v, gh); e != end; ++e) graph_->host_edge_of[gh[*e].link] = *e;
  const double host_bw = c.host_bytes_per_s > 0 ? c.host_bytes_per_s : c.pcie_bytes_per_s;
  for (int64_t n = 0; n < nodes; ++n) {
    const size_t in = boost::add_vertex(gh), out = boost::add_vertex(gh);
    graph_->host_in.push_back(in);
    graph_->host_out.push_back(out);
    for (const auto& [at, name] : host_attach[static_cast<size_t>(n)])
      for (int dir = 0; dir < 2; ++dir) {  // (up): towards the host (a store); (down): out of it (a load)
        Graph::Edge e;
        e.latency_s = c.pcie_latency_s;
        e.weight = e.latency_s + 1e-12;
        e.link = static_cast<uint32_t>(link_bandwidth_.size());
        link_bandwidth_.push_back(host_bw);
        link_names_.push_back(name + (dir == 0 ? " (up)" : " (down)"));
        graph_->host_edge_of.push_back(dir == 0 ? boost::add_edge(at, in, e, gh).first
                                                : boost::add_edge(out, at, e, gh).first);
      }
  }
  // The stores, on the same copy, after the hosts: each two one-way vertices like a host's, on the
  // spine (or on the one leaf), or on a given node's leaf (store_at), by one cable each. On a
  // rail-optimised fabric a leaf store has a port on every rail leaf of its node group ("store s
  // nic k - leaf l", a NIC's bandwidth each), joined by the store's own link ("store s"): a GPU's
  // copy goes by its rail, and every copy shares the store's bandwidth as on one cable.
  if (c.store) {
    const double store_bw = c.store_bytes_per_s > 0
                                ? c.store_bytes_per_s
                                : static_cast<double>(nodes * c.nics_per_node) * c.nic_bytes_per_s;
    const std::vector<int64_t> at_nodes = c.store_at.empty() ? std::vector<int64_t>{-1} : c.store_at;
    // One directed link a -> b of g_host (never in g: nothing transits a store).
    auto one_way = [&](size_t a, size_t b, double bw, double lat, const std::string& name) {
      Graph::Edge e;
      e.latency_s = lat;
      e.weight = lat + 1e-12;
      e.link = static_cast<uint32_t>(link_bandwidth_.size());
      link_bandwidth_.push_back(bw);
      link_names_.push_back(name);
      graph_->host_edge_of.push_back(boost::add_edge(a, b, e, gh).first);
    };
    for (size_t s = 0; s < at_nodes.size(); ++s) {
      const int64_t n = at_nodes[s];
      if (n >= nodes) throw core::Error("internal: a store on the leaf of a node outside the topology");
      const std::string store = at_nodes.size() > 1 ? "store " + std::to_string(s) : "store";
      graph_->store_in.push_back(boost::add_vertex(gh));
      graph_->store_out.push_back(boost::add_vertex(gh));
      const size_t in = graph_->store_in.back(), out = graph_->store_out.back();
      if (n >= 0 && c.rails && leaves > 1) {
        // (up): into the store (a write); (down): out of it (a load).
        const int64_t group = n / c.nodes_per_switch;
        const size_t port_in = boost::add_vertex(gh), port_out = boost::add_vertex(gh);
        one_way(port_in, in, store_bw, 0, store + " (up)");
        one_way(out, port_out, store_bw, 0, store + " (down)");
        for (int64_t k = 0; k < leaves_per_group; ++k) {
          const int64_t l = group * leaves_per_group + k;
          const std::string name = store + " nic " + std::to_string(k) + " - leaf " + std::to_string(l);
          one_way(leaf[static_cast<size_t>(l)], port_in, c.nic_bytes_per_s, c.switch_latency_s, name + " (up)");
          one_way(port_out, leaf[static_cast<size_t>(l)], c.nic_bytes_per_s, c.switch_latency_s, name + " (down)");
        }
        continue;
      }
      const int64_t l = n < 0 ? (leaves > 1 ? -1 : 0) : (n / c.nodes_per_switch) * leaves_per_group;
      const size_t at = l < 0 ? spine : leaf[static_cast<size_t>(l)];
      const std::string name = store + (l < 0 ? " - spine" : " - leaf " + std::to_string(l));
      one_way(at, in, store_bw, c.switch_latency_s, name + " (up)");
      one_way(out, at, store_bw, c.switch_latency_s, name + " (down)");
    }
  }
  // NVMe, after the store: per node with SSDs, two one-way vertices behind the host's.
  graph_->nvme_in.assign(static_cast<size_t>(nodes), static_cast<size_t>(-1));
  graph_->nvme_out.assign(static_cast<size_t>(nodes), static_cast<size_t>(-1));
  for (int64_t n = 0; n < nodes; ++n) {
    if (!has_nvme(n)) continue;
    const auto un = static_cast<size_t>(n);
    const double write_bw = un < c.nvme_write_bytes_per_s.size() ? c.nvme_write_bytes_per_s[un] : 0;
    if (!(write_bw > 0)) throw core::Error("internal: an NVMe vertex without write bandwidth");
    graph_->nvme_in[un] = boost::add_vertex(gh);
    graph_->nvme_out[un] = boost::add_vertex(gh);
    const std::string name = "node " + std::to_string(n) + " nvme";
    for (int dir = 0; dir < 2; ++dir) {  // (up): into the SSDs (a write); (down): out of them (a load)
      Graph::Edge e;
      e.latency_s = c.nvme_latency_s;
      e.weight = e.latency_s + 1e-12;
      e.link = static_cast<uint32_t>(link_bandwidth_.size());
      link_bandwidth_.push_back(dir == 0 ? write_bw : c.nvme_read_bytes_per_s[un]);
      link_names_.push_back(name + (dir == 0 ? " (up)" : " (down)"));
      if (dir == 0) {
        graph_->host_edge_of.push_back(boost::add_edge(graph_->host_in[un], graph_->nvme_in[un], e, gh).first);
        graph_->extra_edges.emplace_back(e.link, boost::add_edge(graph_->host_out[un], graph_->nvme_in[un], e, gh).first);
      } else {
        graph_->host_edge_of.push_back(boost::add_edge(graph_->nvme_out[un], graph_->host_out[un], e, gh).first);
      }
    }
  }
  link_down_.assign(link_bandwidth_.size(), 0);
  built_bandwidth_ = link_bandwidth_;
}

std::vector<uint32_t> Topology::links_named(const std::string& name) const {
  std::vector<uint32_t> out;
  for (uint32_t l = 0; l < link_names_.size(); ++l)
    if (link_names_[l] == name + " (up)" || link_names_[l] == name + " (down)") out.push_back(l);
  return out;
}

std::string Topology::link_name_examples() const {
  std::string out;
  const char* kinds[] = {" nic ", " - spine", " pcie", " nvlink", " host - ", "store", " nvme"};
  for (const char* k : kinds)
    for (const std::string& n : link_names_)
      if (n.find(k) != std::string::npos) {
        out += (out.empty() ? "\"" : ", \"") + n.substr(0, n.rfind(" (")) + "\"";
        break;
      }
  return out;
}

void Topology::set_link_down(uint32_t link, bool down) {
  if (link >= link_down_.size()) throw core::Error("internal: link out of range");
  if ((link_down_[link] != 0) == down) return;
  link_down_[link] = down ? 1 : 0;
  const double inf = std::numeric_limits<double>::infinity();
  if (link < graph_->edge_of.size()) {
    Graph::Edge& e = graph_->g[graph_->edge_of[link]];
    e.weight = down ? inf : e.latency_s + 1e-12;
  }
  Graph::Edge& h = graph_->g_host[graph_->host_edge_of[link]];
  h.weight = down ? inf : h.latency_s + 1e-12;
  for (auto& [l, e] : graph_->extra_edges)
    if (l == link) graph_->g_host[e].weight = down ? inf : graph_->g_host[e].latency_s + 1e-12;
  paths_.clear();  // the paths computed so far stay in path_store_ for the flows that use them
}

void Topology::set_link_speed(uint32_t link, double speed) {
  if (link >= link_bandwidth_.size() || !(speed > 0) || speed > 1)
    throw core::Error("internal: link out of range, or a link speed outside (0, 1]");
  const double bw = built_bandwidth_[link] * speed;
  if (bw == link_bandwidth_[link]) return;
  link_bandwidth_[link] = bw;
  paths_.clear();  // the same routes (chosen by latency), their bottlenecks computed again
}

std::vector<std::string> Topology::link_class(const std::string& cls) const {
  auto starts = [](const std::string& s, const char* p) { return s.rfind(p, 0) == 0; };
  auto ends = [](const std::string& s, const std::string& e) {
    return s.size() >= e.size() && s.compare(s.size() - e.size(), e.size(), e) == 0;
  };
  std::vector<std::string> out;
  for (uint32_t l = 0; l < graph_->edge_of.size(); ++l) {  // the GPU and switch graph's links
    if (link_names_[l].size() < 5 || !ends(link_names_[l], " (up)")) continue;  // each cable once
    const std::string name = link_names_[l].substr(0, link_names_[l].size() - 5);
    const bool in = cls == "nvlink" ? ends(name, " nvlink")
                    : cls == "pcie" ? ends(name, " pcie")
                    : cls == "nic"  ? starts(name, "node ") && ends(name, " - leaf")
                    : cls == "spine" ? starts(name, "leaf ") && ends(name, " - spine")
                                     : false;
    if (in) out.push_back(name);
  }
  return out;
}

Topology::~Topology() = default;
Topology::Topology(Topology&&) noexcept = default;

const Topology::Path& Topology::path(int64_t from_gpu, int64_t to_gpu) const {
  const int64_t endpoints = config_.nvme_read_bytes_per_s.empty()
                                ? config_.num_gpus + num_nodes() + (config_.store ? num_stores() : 0)
                                : nvme_endpoint(num_nodes());
  if (from_gpu < 0 || to_gpu < 0 || from_gpu >= endpoints || to_gpu >= endpoints)
    throw core::Error("internal: path between endpoints outside the topology");
  const uint64_t key = (static_cast<uint64_t>(from_gpu) << 32) | static_cast<uint64_t>(to_gpu);
  auto it = paths_.find(key);
  if (it != paths_.end()) return *it->second;

  // Any endpoint past the GPUs is a host or the store: searched on the graph that has them.
  const bool hosts = from_gpu >= config_.num_gpus || to_gpu >= config_.num_gpus;
  const auto& g = hosts ? graph_->g_host : graph_->g;
  const size_t n = boost::num_vertices(g);
  std::vector<size_t> pred(n);
  std::vector<double> dist(n);
  const int64_t stores_end = store_endpoint(num_stores());  // NVMe endpoints from here
  if (!config_.store && ((from_gpu >= store_endpoint() && from_gpu < stores_end) ||
                         (to_gpu >= store_endpoint() && to_gpu < stores_end)))
    throw core::Error("internal: a path to the store on a topology without one");
  auto nvme_vertex = [&](int64_t endpoint, const std::vector<size_t>& v) {
    const int64_t node = endpoint - nvme_endpoint(0);
    if (!has_nvme(node)) throw core::Error("internal: a path to a node without an NVMe vertex");
    return v[static_cast<size_t>(node)];
  };
  auto store_vertex = [&](int64_t endpoint, const std::vector<size_t>& v) {
    return v[static_cast<size_t>(endpoint - store_endpoint())];
  };
  const size_t src = from_gpu >= stores_end ? nvme_vertex(from_gpu, graph_->nvme_out)
                     : is_store(from_gpu)   ? store_vertex(from_gpu, graph_->store_out)
                     : is_host(from_gpu)    ? graph_->host_out[static_cast<size_t>(from_gpu - config_.num_gpus)]
                                            : graph_->gpu_vertex[static_cast<size_t>(from_gpu)];
  const size_t dst = to_gpu >= stores_end ? nvme_vertex(to_gpu, graph_->nvme_in)
                     : is_store(to_gpu)   ? store_vertex(to_gpu, graph_->store_in)
                     : is_host(to_gpu)    ? graph_->host_in[static_cast<size_t>(to_gpu - config_.num_gpus)]
                                          : graph_->gpu_vertex[static_cast<size_t>(to_gpu)];
  auto weight = boost::get(&Graph::Edge::weight, g);
  boost::dijkstra_shortest_paths(
      g, src,
      boost::predecessor_map(boost::make_iterator_property_map(pred.begin(), boost::get(boost::vertex_index, g)))
          .distance_map(boost::make_iterator_property_map(dist.begin(), boost::get(boost::vertex_index, g)))
          .weight_map(weight));
  Path p;
  p.bottleneck_bytes_per_s = std::numeric_limits<double>::infinity();
  if (src != dst && pred[dst] == dst) {
    // Not reached (Dijkstra leaves an unreached vertex its own predecessor): every path crosses a
    // link that is down, whose weight is infinite and never relaxes an edge (with all links up the
    // topology is connected).
    p.connected = false;
    p.bottleneck_bytes_per_s = 0;
    path_store_.push_back(std::move(p));
    return *paths_.emplace(key, &path_store_.back()).first->second;
  }
  for (size_t v = dst; v != src;) {
    const size_t u = pred[v];
    if (u == v) throw core::Error("internal: no path between GPU " + std::to_string(from_gpu) + " and " + std::to_string(to_gpu));
    // The cheapest edge u -> v that is up.
    double best = std::numeric_limits<double>::infinity();
    uint32_t best_link = 0;
    for (auto [e, end] = boost::out_edges(u, g); e != end; ++e) {
      if (boost::target(*e, g) != v || link_down_[g[*e].link]) continue;
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
  path_store_.push_back(std::move(p));
  return *paths_.emplace(key, &path_store_.back()).first->second;
}

// ---- flows --------------------------------------------------------------------------------------

namespace {
constexpr uint64_t kCompletionBit = uint64_t{1} << 63;
constexpr uint64_t kFlush = kCompletionBit - 1;  // above any version
constexpr double kDrainedBytes = 1e-6;
constexpr uint64_t kStartBit = uint64_t{1} << 62;  // a delayed transfer's start (versions stay below)
}  // namespace

Network::Network(Simulation& sim, Topology topology) : sim_(sim), topology_(std::move(topology)) {
  residual_.resize(topology_.num_links());
  unfrozen_.resize(topology_.num_links());
  link_stamp_.resize(topology_.num_links(), 0);
  demand_.resize(topology_.num_links());
  slack_.resize(topology_.num_links());
  link_start_.resize(topology_.num_links());
  link_fill_.resize(topology_.num_links());
}

void Network::start_transfer(uint64_t tag, const std::vector<std::pair<int64_t, int64_t>>& gpu_pairs, double bytes,
                             TransferListener* listener, double start_delay_s) {
  if (gpu_pairs.empty()) throw core::Error("internal: transfer without GPU pairs");
  advance();
  const uint32_t t = new_transfer();
  Transfer& tr = transfers_[t];
  tr = Transfer{tag, listener, 0, 0, bytes};
  const bool delay = start_delay_s > 0;
  const double share = bytes / static_cast<double>(gpu_pairs.size());
  for (const auto& [from, to] : gpu_pairs) {
    const Topology::Path& p = topology_.path(from, to);
    tr.latency_s = std::max(tr.latency_s, p.latency_s);
    if ((p.connected && p.links.empty()) || share <= kDrainedBytes) continue;  // same GPU: nothing to move
    const Flow f{t, &p, share, 0, static_cast<int32_t>(from), static_cast<int32_t>(to)};
    (delay ? delayed_ : p.connected ? flows_ : stalled_).push_back(f);  // cut off: it waits for a link to come back
    ++tr.flows_left;
  }
  if (tr.flows_left == 0) {
    sim_.schedule_after(core::Duration::from_seconds(start_delay_s + tr.latency_s), this, kCompletionBit | t);
    bytes_delivered_ += bytes;
    return;
  }
  if (delay) {
    tr.delayed = true;
    sim_.schedule_after(core::Duration::from_seconds(start_delay_s), this, kStartBit | t);
    return;
  }
  reschedule();
}

void Network::start_delayed(uint32_t t) {
  Transfer& tr = transfers_[t];
  tr.delayed = false;
  auto of_it = [t](const Flow& f) { return f.transfer == t; };
  if (tr.cancelled) {
    tr.cancelled = false;
    free_transfers_.push_back(t);
    return;
  }
  advance();
  for (Flow& f : delayed_) {
    if (!of_it(f)) continue;
    f.path = &topology_.path(f.from, f.to);  // the links up now
    if (f.path->connected) tr.latency_s = std::max(tr.latency_s, f.path->latency_s);
    (f.path->connected ? flows_ : stalled_).push_back(f);
  }
  delayed_.erase(std::remove_if(delayed_.begin(), delayed_.end(), of_it), delayed_.end());
  reschedule();
}

std::optional<double> Network::cancel_transfer(uint64_t tag, const TransferListener* listener) {
  uint32_t t = 0;
  for (; t < transfers_.size(); ++t)
    if (transfers_[t].flows_left > 0 && transfers_[t].tag == tag && transfers_[t].listener == listener) break;
  if (t == transfers_.size()) return std::nullopt;
  advance();
  double left = 0;  // the most any of its flows had still to move (a drained flow has left the list)
  for (const std::vector<Flow>* list : {&flows_, &stalled_, &delayed_})
    for (const Flow& f : *list)
      if (f.transfer == t) left = std::max(left, f.remaining);
  auto of_it = [t](const Flow& f) { return f.transfer == t; };
  flows_.erase(std::remove_if(flows_.begin(), flows_.end(), of_it), flows_.end());
  stalled_.erase(std::remove_if(stalled_.begin(), stalled_.end(), of_it), stalled_.end());
  transfers_[t].flows_left = 0;
  if (transfers_[t].delayed) {  // not started: its start event frees it
    delayed_.erase(std::remove_if(delayed_.begin(), delayed_.end(), of_it), delayed_.end());
    transfers_[t].cancelled = true;
    return left;  // its flows moved nothing yet
  }
  free_transfers_.push_back(t);
  reschedule();
  return left;
}

double Network::transfer_seconds_now(const std::vector<std::pair<int64_t, int64_t>>& pairs, double bytes) {
  if (pairs.empty()) return 0;
  if (link_count_.size() != topology_.num_links()) {
    link_count_.assign(topology_.num_links(), 0);
    link_mark_.assign(topology_.num_links(), 0);
  }
  const uint64_t stamp = ++mark_stamp_;
  // This transfer's own flows on each link of its paths, then the active flows on those links.
  for (const auto& [from, to] : pairs) {
    const Topology::Path& p = topology_.path(from, to);
    if (!p.connected) return std::numeric_limits<double>::infinity();
    for (uint32_t l : p.links) {
      if (link_mark_[l] != stamp) link_mark_[l] = stamp, link_count_[l] = 0;
      ++link_count_[l];
    }
  }
  for (const Flow& f : flows_)
    for (uint32_t l : f.path->links)
      if (link_mark_[l] == stamp) ++link_count_[l];
  const double share = bytes / static_cast<double>(pairs.size());
  double longest = 0;
  for (const auto& [from, to] : pairs) {
    const Topology::Path& p = topology_.path(from, to);
    double rate = std::numeric_limits<double>::infinity();
    for (uint32_t l : p.links) rate = std::min(rate, topology_.link_bandwidth(l) / link_count_[l]);
    const double s = p.links.empty() ? p.latency_s : share / rate + p.latency_s;
    longest = std::max(longest, s);
  }
  return longest;
}

uint32_t Network::new_transfer() {
  if (!free_transfers_.empty()) {
    const uint32_t t = free_transfers_.back();
    free_transfers_.pop_back();
    return t;
  }
  transfers_.emplace_back();
  return static_cast<uint32_t>(transfers_.size() - 1);
}

double Network::start_exchange(const std::vector<std::pair<int64_t, int64_t>>& gpu_pairs, double bytes_per_pair) {
  if (gpu_pairs.empty() || bytes_per_pair <= kDrainedBytes) return 0;
  advance();
  const uint32_t t = new_transfer();
  Transfer& tr = transfers_[t];
  tr = Transfer{0, nullptr, 0, 0, 0};
  for (const auto& [from, to] : gpu_pairs) {
    const Topology::Path& p = topology_.path(from, to);
    if (!p.connected)
      throw core::Error("an expert-parallel all-to-all from GPU " + std::to_string(from) + " to GPU " +
                        std::to_string(to) + " has no path while the failed links are down ([faults] kind = \"link\"); "
                        "a step cannot wait for a repair in this model: fail a link with an alternative path, or "
                        "none that the exchange crosses");
    if (p.links.empty()) continue;
    tr.latency_s = std::max(tr.latency_s, p.latency_s);
    tr.bytes += bytes_per_pair;
    flows_.push_back(Flow{t, &p, bytes_per_pair, 0, static_cast<int32_t>(from), static_cast<int32_t>(to)});
    ++tr.flows_left;
  }
  if (tr.flows_left == 0) {
    free_transfers_.push_back(t);
    return 0;
  }
  reschedule();
  flush();  // the rates now, for the what-if
  // What-if: drain a copy of the active flows, rates recomputed as flows finish, until the last of
  // this exchange's flows is gone.
  what_if_ = flows_;
  double elapsed = 0;
  for (;;) {
    double dt = std::numeric_limits<double>::infinity();
    for (const Flow& f : what_if_) dt = std::min(dt, f.remaining / f.rate);
    elapsed += dt;
    bool mine_left = false;
    size_t kept = 0;
    for (Flow& f : what_if_) {
      // Drained within a relative rounding of the shortest remaining time.
      if (f.remaining / f.rate <= dt * (1.0 + 1e-12)) continue;
      f.remaining -= f.rate * dt;
      mine_left = mine_left || f.transfer == t;
      what_if_[kept++] = f;
    }
    what_if_.resize(kept);
    if (!mine_left) return elapsed;
    fill_rates(what_if_);
  }
}

size_t Network::set_links_down(const std::vector<uint32_t>& links, bool down) {
  advance();
  for (uint32_t l : links) topology_.set_link_down(l, down);
  // Every flow takes the best path over the links up now (a repair may give a detoured flow its
  // direct path back), in the order they were: active ones first, then the ones that waited.
  std::vector<Flow> all;
  all.reserve(flows_.size() + stalled_.size());
  all.insert(all.end(), flows_.begin(), flows_.end());
  all.insert(all.end(), stalled_.begin(), stalled_.end());
  flows_.clear();
  stalled_.clear();
  for (Flow& f : all) {
    f.path = &topology_.path(f.from, f.to);
    f.rate = 0;
    // Its last byte crosses the path it ends on: the transfer completes the longest latency of the
    // paths its flows took after draining.
    if (f.path->connected) transfers_[f.transfer].latency_s = std::max(transfers_[f.transfer].latency_s, f.path->latency_s);
    (f.path->connected ? flows_ : stalled_).push_back(f);
  }
  reschedule();
  return stalled_.size();
}

void Network::set_links_speed(const std::vector<uint32_t>& links, double speed) {
  advance();  // the bytes moved so far at the old rates
  for (uint32_t l : links) topology_.set_link_speed(l, speed);
  reschedule();
}

std::vector<std::pair<std::vector<uint32_t>, double>> Network::flow_rates() {
  flush();
  std::vector<std::pair<std::vector<uint32_t>, double>> out;
  for (const Flow& f : flows_) out.emplace_back(f.path->links, f.rate);
  return out;
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
  dirty_ = !flows_.empty();
  if (!dirty_) return;
  drain_seq_ = sim_.reserve_seq();
  if (!flush_pending_) {
    flush_pending_ = true;
    sim_.schedule_after(core::Duration::from_ns(0), this, kFlush);
  }
}

void Network::flush() {
  if (!dirty_) return;
  dirty_ = false;
  fill_rates(flows_);
  double next = std::numeric_limits<double>::infinity();
  for (const Flow& f : flows_) next = std::min(next, f.remaining / f.rate);
  if (!(next < core::kMaxClockSeconds)) core::clock_overflow(next, "a KV transfer");
  const int64_t ns = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(next * 1e9)));
  if (ns > INT64_MAX - sim_.now().ns()) core::clock_overflow(next, "a KV transfer");
  sim_.schedule_reserved(sim_.now() + core::Duration::from_ns(ns), drain_seq_, this, version_);
}

void Network::fill_rates(std::vector<Flow>& flows) {
  // Max-min fair rates by progressive filling: repeatedly find the link whose residual capacity
  // split among its unfrozen flows is smallest (ties: the lowest link index), give its flows that
  // rate, and remove them. The same rates, computed with less work:
  // - only the links the flows cross are visited;
  // - a link that can never fill (its bandwidth exceeds what its flows could carry at their other
  //   links' bandwidths, e.g. a non-blocking spine) is left out: it never binds, so leaving it out
  //   changes no choice;
  // - a flow alone on every link that can bind gets the smallest of their bandwidths at once;
  // - the other links wait in a heap of (share, link) whose stale entries are skipped, so a fill
  //   costs O(flows x path x log), not rounds x links.
  // The choices and the order of the subtractions on the links that bind are those of a scan over
  // all links, so the rates have the same bits.
  constexpr double kInf = std::numeric_limits<double>::infinity();
  ++fill_stamp_;
  used_links_.clear();
  for (const Flow& f : flows)
    for (uint32_t l : f.path->links) {
      if (link_stamp_[l] != fill_stamp_) {
        link_stamp_[l] = fill_stamp_;
        residual_[l] = topology_.link_bandwidth(l);
        unfrozen_[l] = 0;
        demand_[l] = 0;
        used_links_.push_back(l);
      }
      ++unfrozen_[l];
    }
  // Each flow could carry at most its path's smallest bandwidth other than this link's.
  for (const Flow& f : flows) {
    double m1 = kInf, m2 = kInf;
    uint32_t at = 0;
    for (uint32_t l : f.path->links) {
      const double bw = topology_.link_bandwidth(l);
      if (bw < m1) {
        m2 = m1;
        m1 = bw;
        at = l;
      } else if (bw < m2) {
        m2 = bw;
      }
    }
    for (uint32_t l : f.path->links) demand_[l] += l == at ? m2 : m1;
  }
  for (uint32_t l : used_links_) slack_[l] = topology_.link_bandwidth(l) > demand_[l];
  frozen_.assign(flows.size(), 0);
  size_t left = flows.size();
  for (size_t i = 0; i < flows.size(); ++i) {
    double rate = kInf;
    bool alone = true;
    for (uint32_t l : flows[i].path->links) {
      if (slack_[l]) continue;
      if (unfrozen_[l] != 1) {
        alone = false;
        break;
      }
      rate = std::min(rate, residual_[l]);
    }
    if (!alone) continue;
    flows[i].rate = rate;
    frozen_[i] = 1;
    --left;
    for (uint32_t l : flows[i].path->links)
      if (!slack_[l]) {
        residual_[l] -= rate;
        --unfrozen_[l];
      }
  }
  // The flows of each link that can bind, in flow order.
  uint32_t offset = 0;
  for (uint32_t l : used_links_) {
    link_start_[l] = link_fill_[l] = offset;
    if (!slack_[l]) offset += static_cast<uint32_t>(unfrozen_[l]);
  }
  link_flows_.resize(offset);
  for (size_t i = 0; i < flows.size(); ++i)
    if (!frozen_[i])
      for (uint32_t l : flows[i].path->links)
        if (!slack_[l]) link_flows_[link_fill_[l]++] = static_cast<uint32_t>(i);
  heap_.clear();
  for (uint32_t l : used_links_)
    if (!slack_[l] && unfrozen_[l] > 0) heap_.emplace_back(residual_[l] / static_cast<double>(unfrozen_[l]), l);
  const auto later = std::greater<std::pair<double, uint32_t>>();
  std::make_heap(heap_.begin(), heap_.end(), later);
  while (left > 0) {
    // A share that is not a positive finite number (link bandwidths out of proportion) would freeze
    // no flow and loop for ever.
    if (heap_.empty())
      throw core::Error("internal: KV transfer rates did not converge; the [network] bandwidths are out of proportion");
    std::pop_heap(heap_.begin(), heap_.end(), later);
    const auto [share, bottleneck] = heap_.back();
    heap_.pop_back();
    if (!(share > 0) || !std::isfinite(share))
      throw core::Error("internal: KV transfer rates did not converge (link share " + std::to_string(share) +
                        " B/s); the [network] bandwidths are out of proportion");
    if (unfrozen_[bottleneck] == 0 || residual_[bottleneck] / static_cast<double>(unfrozen_[bottleneck]) != share)
      continue;  // stale
    const uint32_t first = link_start_[bottleneck], end = link_fill_[bottleneck];
    for (uint32_t k = first; k < end; ++k) {
      const uint32_t i = link_flows_[k];
      if (frozen_[i]) continue;
      flows[i].rate = share;
      frozen_[i] = 1;
      --left;
      for (uint32_t l : flows[i].path->links)
        if (!slack_[l]) {
          residual_[l] -= share;
          --unfrozen_[l];
        }
    }
    // The shares of the links those flows crossed changed (the bottleneck's flows are all frozen now).
    for (uint32_t k = first; k < end; ++k)
      for (uint32_t l : flows[link_flows_[k]].path->links)
        if (!slack_[l] && unfrozen_[l] > 0) {
          heap_.emplace_back(residual_[l] / static_cast<double>(unfrozen_[l]), l);
          std::push_heap(heap_.begin(), heap_.end(), later);
        }
  }
}

void Network::on_event(uint64_t payload) {
  if (payload == kFlush) {
    flush_pending_ = false;
    flush();
    return;
  }
  if (!(payload & kCompletionBit) && (payload & kStartBit)) {
    start_delayed(static_cast<uint32_t>(payload & ~kStartBit));
    return;
  }
  if (payload & kCompletionBit) {
    const uint32_t t = static_cast<uint32_t>(payload & ~kCompletionBit);
    Transfer tr = transfers_[t];
    free_transfers_.push_back(t);
    if (tr.listener) tr.listener->on_transfer_done(tr.tag);
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
