#pragma once
// The cluster network and the KV-cache transfers over it.
//
// Topology (a Boost.Graph of directed links, each with a bandwidth and a latency): GPUs in nodes of
// `gpus_per_node`, each GPU linked to its node's NVSwitch by NVLink and to a NIC by PCIe (directly,
// or through a PCIe switch shared by `gpus_per_pcie_switch` GPUs and their NICs); NICs link to leaf
// switches (`nodes_per_switch` nodes each; with `rails`, one leaf per NIC index: NIC k of every node
// of the group on leaf k, a rail-optimised fabric); leaf switches link to one spine. A transfer
// between two GPUs takes the lowest-latency path (NVLink through the NVSwitch inside a node;
// PCIe -> NIC -> switches -> NIC -> PCIe across nodes).
//
// Hosts: each node has a host (CPU root complex and its DRAM) attached where a DGX attaches it:
// by a link of `host_bytes_per_s` to each PCIe switch (with `gpus_per_pcie_switch` > 1), otherwise
// to each GPU's PCIe link endpoint (its NIC vertex). A host is an endpoint only (KV-tier loads and
// stores, sim/cluster/kv_tier.h): a host's links are one-way in the graph (into the host, out of
// it), so no path between two GPUs crosses a host, and GPU -> GPU paths are computed on the graph
// without the hosts, exactly as before they existed. Endpoint ids: GPUs 0..num_gpus-1, then the
// host of node n at host_endpoint(n).
//
// Store (`store`, a KV store shared by the replicas: sim/cluster/kv_store.h): a storage server (a
// Mooncake store, an LMCache server) attached to the spine (to the one leaf when there is no
// spine) by a link of `store_bytes_per_s`, the store's own bandwidth shared by every copy to and
// from it. Like a host it is an endpoint only, on the same copy of the graph (one-way links, never
// transit), its links numbered after the hosts'; its endpoint id is store_endpoint(), after the
// hosts. GPU <-> store paths cross the GPU's PCIe link, its NIC, the leaf (and the spine), so store
// traffic meets PD transfers on the NICs and the switch links.
// Several stores (`store_at`, kv_tiers.store.replicas_per_store): store s at store_endpoint(s), each
// with its own link of `store_bytes_per_s`, on the spine ("store s - spine") or on the leaf switch of
// a given node ("store s - leaf l", a rack-local store: copies from that leaf's nodes do not cross
// the spine). Their endpoints follow one another after the hosts, their links numbered in store
// order; one store on the spine keeps the names and numbers of the single store above.
//
// NVMe (`nvme_read_bytes_per_s`, per node): a node's SSDs, behind its host (the bounce buffer in
// host memory that HiCache's and LMCache's local-disk backends read into): a vertex pair like the
// host's (one-way links, never transit), linked to the host by an SSD link of the node's read
// bandwidth (nvme -> host, "node n nvme (down)") and one of its write bandwidth (host -> nvme,
// "(up)"), whose latency is `nvme_latency_s`. NVMe -> GPU crosses the SSD link, the host's uplink
// and the GPU's PCIe link; GPU -> NVMe the reverse; host -> NVMe (what host memory evicts) the SSD
// write link alone. Endpoint ids: nvme_endpoint(n), after the store's; links numbered after every
// other link, so GPU, host and store paths are exactly as without NVMe.
//
// Flows: every active flow gets a max-min fair share of each link on its path (progressive
// filling), recomputed whenever a flow starts or drains, so transfers that share a link slow each
// other down. A flow's data drains at its rate; it completes one path latency after draining.
// Changes within one instant (a tier load of many units, a step's exchange and a KV transfer) are
// computed once, at the end of the instant: the rates in between never move a byte (no time passes),
// and the next drain is ordered among the events of its time as if computed at the last change, so
// the results are those of computing at every change.

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "sim/engine/simulation.h"

namespace servesim::sim {

struct TopologyConfig {
  int64_t num_gpus = 0;
  int64_t gpus_per_node = 8;
  double nvlink_bytes_per_s = 450e9;   // per GPU, one direction
  double nvlink_latency_s = 1e-6;
  double pcie_bytes_per_s = 50e9;      // GPU <-> NIC (and host), one direction
  double pcie_latency_s = 1e-6;
  int64_t gpus_per_pcie_switch = 1;    // > 1: GPUs and NICs of a node share PCIe switches (DGX)
  int64_t nics_per_node = 8;           // GPU i of a node uses NIC i mod nics_per_node
  double nic_bytes_per_s = 50e9;       // NIC <-> leaf switch, one direction (400 Gb/s)
  double nic_latency_s = 2e-6;         // per NIC-switch hop
  int64_t nodes_per_switch = 32;
  bool rails = false;                  // rail-optimised: NIC k of each node on the group's leaf k
  double spine_bytes_per_s = 0;        // leaf <-> spine uplink; 0 = non-blocking (sum of the leaf's NICs)
  double switch_latency_s = 1e-6;      // per leaf-spine hop
  double host_bytes_per_s = 0;         // host <-> PCIe switch (or NIC vertex), one direction; 0 = pcie_bytes_per_s
  bool store = false;                  // a shared KV store attached to the spine (or the one leaf)
  double store_bytes_per_s = 0;        // its link, one direction; 0 = non-blocking (the sum of every NIC)
  // With `store`: one entry per store, where it attaches: -1 the spine (the one leaf without a
  // spine), n >= 0 the leaf switch of node n (not with rails). Empty: one store on the spine.
  std::vector<int64_t> store_at;
  // Local NVMe KV tiers (sim/cluster/kv_nvme.h): per node, the SSDs' read and write bandwidth (empty,
  // or 0 for a node: that node has no NVMe vertex) and their access latency (the SSD link's latency).
  std::vector<double> nvme_read_bytes_per_s, nvme_write_bytes_per_s;
  double nvme_latency_s = 0;
};

class Topology {
 public:
  explicit Topology(const TopologyConfig& config);
  ~Topology();
  Topology(Topology&&) noexcept;

  int64_t num_gpus() const { return config_.num_gpus; }
  int64_t node_of(int64_t gpu) const { return gpu / config_.gpus_per_node; }
  int64_t num_nodes() const { return (config_.num_gpus + config_.gpus_per_node - 1) / config_.gpus_per_node; }
  // The endpoint id of node `node`'s host (CPU DRAM), for path() and flows.
  int64_t host_endpoint(int64_t node) const { return config_.num_gpus + node; }
  bool is_host(int64_t endpoint) const { return endpoint >= config_.num_gpus && endpoint < store_endpoint(); }
  // Shared KV store s's endpoint id (TopologyConfig::store, store_at; without it the id is out of range).
  bool has_store() const { return config_.store; }
  int64_t num_stores() const { return config_.store_at.empty() ? 1 : static_cast<int64_t>(config_.store_at.size()); }
  int64_t store_endpoint(int64_t store = 0) const { return config_.num_gpus + num_nodes() + store; }
  bool is_store(int64_t endpoint) const {
    return config_.store && endpoint >= store_endpoint() && endpoint < store_endpoint(num_stores());
  }
  // Node `node`'s NVMe endpoint id (TopologyConfig::nvme_read_bytes_per_s); has_nvme: the node has one.
  int64_t nvme_endpoint(int64_t node) const { return store_endpoint(num_stores()) + node; }
  bool has_nvme(int64_t node) const {
    return static_cast<size_t>(node) < config_.nvme_read_bytes_per_s.size() &&
           config_.nvme_read_bytes_per_s[static_cast<size_t>(node)] > 0;
  }
  size_t num_links() const { return link_bandwidth_.size(); }
  double link_bandwidth(uint32_t link) const { return link_bandwidth_[link]; }
  const std::string& link_name(uint32_t link) const { return link_names_[link]; }

  struct Path {
    std::vector<uint32_t> links;
    double latency_s = 0;
    double bottleneck_bytes_per_s = 0;
    bool connected = true;  // false: every path crosses a link that is down
  };
  // The lowest-latency path from one endpoint to another over the links that are up (cached until a
  // link changes; a returned reference stays valid for the topology's life). Endpoints are GPUs,
  // hosts (host_endpoint) or the store (store_endpoint); a path with a host or the store at one end
  // is computed on the graph with them, one between GPUs on the graph without them.
  const Path& path(int64_t from, int64_t to) const;

  // Link failures ([faults] kind = "link"): a cable or port is both directions of a named link
  // ("node 1 nic 0 - leaf", "leaf 0 - spine", "gpu 3 pcie", "gpu 3 nvlink", "node 0 host - pcie switch 1",
  // "node 0 host - nic 2", "store - spine" or "store - leaf 0"; with several stores "store 1 - spine", "store 1 - leaf 0"; link_name without its
  // " (up)" / " (down)"). links_named: its two directed links, empty when no link has that name.
  std::vector<uint32_t> links_named(const std::string& name) const;
  // An example of the names, for errors.
  std::string link_name_examples() const;
  void set_link_down(uint32_t link, bool down);
  bool link_down(uint32_t link) const { return link_down_[link] != 0; }
  // Degraded links ([faults] kind = "link" with speed): the link carries `speed` (in (0, 1]) of the
  // bandwidth it was built with (a port renegotiated to a lower rate, a flapping optic). Paths are
  // chosen by latency, so a slow link keeps its paths; their bottlenecks are computed again.
  void set_link_speed(uint32_t link, double speed);
  // Drawn link failures ([[faults.link_mtbf]]): the names of the links (as links_named takes them,
  // each once, in link order) of a class: "nvlink" (GPU - NVSwitch), "pcie" (GPU - NIC or PCIe
  // switch, NIC - PCIe switch), "nic" (a node's NIC - leaf switch), "spine" (leaf - spine). Hosts',
  // the store's and NVMe links are in no class (name them).
  std::vector<std::string> link_class(const std::string& cls) const;

 private:
  struct Graph;
  TopologyConfig config_;
  std::unique_ptr<Graph> graph_;
  std::vector<double> link_bandwidth_;
  std::vector<double> built_bandwidth_;  // as built (set_link_speed scales link_bandwidth_ from it)
  std::vector<std::string> link_names_;
  std::vector<char> link_down_;
  mutable std::unordered_map<uint64_t, const Path*> paths_;
  mutable std::deque<Path> path_store_;  // stable: flows keep pointers to paths computed before a change
};

// Told when a transfer has fully arrived.
class TransferListener {
 public:
  virtual void on_transfer_done(uint64_t tag) = 0;

 protected:
  ~TransferListener() = default;
};

class Network final : public EventHandler {
 public:
  Network(Simulation& sim, Topology topology);

  const Topology& topology() const { return topology_; }
  // Moves `bytes` split evenly over the (from GPU, to GPU) pairs, as parallel flows; tells
  // `listener` with `tag` when the last flow has arrived.
  // `start_delay_s` > 0: the flows start moving bytes only that long after now (a store's lookup
  // before its copy: kv_tiers.store.latency_us); the transfer completes after the delay, the drain
  // and the path latency. Cancelled meanwhile, it never starts.
  void start_transfer(uint64_t tag, const std::vector<std::pair<int64_t, int64_t>>& gpu_pairs, double bytes,
                      TransferListener* listener, double start_delay_s = 0);
  // Stops the transfer `tag` of `listener` while its flows still move bytes: they leave the network
  // (what they have not moved is never sent, bytes_delivered() does not count it) and nobody is
  // told. Returns the bytes the least advanced of its flows had still to move (each flow carries
  // an equal share of the transfer, so its share less this is what every flow had delivered), or
  // nothing when there is none (done, or only its latency left: it completes as usual).
  std::optional<double> cancel_transfer(uint64_t tag, const TransferListener* listener);
  // Expert parallelism's cross-node all-to-all of one step: moves `bytes_per_pair` along each
  // (from GPU, to GPU) pair as flows that share links max-min fairly with every other flow (KV
  // transfers, other replicas' exchanges), and returns the seconds until the last of them would have
  // drained if no other flow started meanwhile: a what-if drain of all the active flows under the
  // same sharing. The flows stay in the network until they drain (a later transfer still sees them);
  // nobody is told when. Path latencies are not included (the cost model adds the collectives').
  double start_exchange(const std::vector<std::pair<int64_t, int64_t>>& gpu_pairs, double bytes_per_pair);
  // The seconds a transfer of `bytes` split evenly over the (from, to) pairs would take if it started
  // now on the network as it is now (what an engine knows of its own links' current use, not a
  // prediction of the flows to come): each pair's share at the rate its new flow would get, the
  // least over the path's links of bandwidth / (active flows on the link + this transfer's flows on
  // it), plus the path's latency; the longest pair. That rate is a lower bound on the max-min fair
  // rate the flow would get (the fair share on its bottleneck link is at least the link's bandwidth
  // over its flows), equal to it when the other flows on that link are limited there too, and below
  // it when some are limited elsewhere (they leave the link's spare to the new flow): the estimate
  // errs long, never short, at the instant. Moves nothing.
  // Infinity when a pair has no path (a link down).
  double transfer_seconds_now(const std::vector<std::pair<int64_t, int64_t>>& pairs, double bytes);
  size_t active_flows() const { return flows_.size(); }
  // The active flows' links and current rates, in flow order (for tests; computes them first).
  std::vector<std::pair<std::vector<uint32_t>, double>> flow_rates();
  double bytes_delivered() const { return bytes_delivered_; }
  // Takes `links` down (or back up) now: every active flow is routed again over the links that are
  // up, keeping the bytes it has left; a flow with no path left waits (rate 0) until a change gives
  // it one. Returns the flows that have no path now.
  size_t set_links_down(const std::vector<uint32_t>& links, bool down);
  // Runs `links` at `speed` of their bandwidth from now on (Topology::set_link_speed): the flows in
  // flight keep their paths and bytes, and the max-min fair rates are filled again.
  void set_links_speed(const std::vector<uint32_t>& links, double speed);
  size_t stalled_flows() const { return stalled_.size(); }

  void on_event(uint64_t payload) override;

 private:
  struct Flow {
    uint32_t transfer;
    const Topology::Path* path;
    double remaining;
    double rate = 0;
    int32_t from = 0, to = 0;  // GPUs, to route it again when a link changes
  };
  struct Transfer {
    uint64_t tag;
    TransferListener* listener;  // null for an exchange
    int64_t flows_left;
    double latency_s = 0;  // the longest path latency of its flows
    double bytes = 0;
    bool delayed = false;    // its flows wait in delayed_ for their start (start_transfer's delay)
    bool cancelled = false;  // cancelled while delayed: freed when its start comes
  };
  void advance();
  // The flows changed: their rates are computed again once, at the end of the instant (flush).
  void reschedule();
  // Computes the rates if the flows changed and schedules the next drain, ordered among the events
  // of its time as if reschedule() had scheduled it (Simulation::reserve_seq).
  void flush();
  uint32_t new_transfer();
  // Max-min fair rates of `flows` by progressive filling (sets Flow::rate).
  void fill_rates(std::vector<Flow>& flows);

  Simulation& sim_;
  Topology topology_;
  std::vector<Flow> flows_;
  std::vector<Flow> stalled_;  // no path while links are down
  std::vector<Flow> delayed_;  // waiting for their transfer's start (start_transfer's delay)
  void start_delayed(uint32_t transfer);
  std::vector<Transfer> transfers_;
  std::vector<uint32_t> free_transfers_;
  core::Time last_update_;
  uint64_t version_ = 0;
  bool dirty_ = false;          // the flows changed since the rates were computed
  bool flush_pending_ = false;  // a flush event is scheduled at now
  uint64_t drain_seq_ = 0;      // the sequence number of the last reschedule()
  double bytes_delivered_ = 0;
  // Scratch of the rate computation.
  std::vector<double> residual_;
  std::vector<int64_t> unfrozen_;
  std::vector<char> frozen_;
  std::vector<uint64_t> link_stamp_;  // the fill that last initialised each link
  uint64_t fill_stamp_ = 0;
  std::vector<uint32_t> used_links_;
  std::vector<double> demand_;  // per link: what its flows could carry at their other links' bandwidths
  std::vector<char> slack_;     // per link: it can never fill
  std::vector<uint32_t> link_start_, link_fill_, link_flows_;  // per link: its flows' span in link_flows_
  std::vector<std::pair<double, uint32_t>> heap_;
  std::vector<Flow> what_if_;
  std::vector<int32_t> link_count_;       // transfer_seconds_now's scratch: flows per marked link
  std::vector<uint64_t> link_mark_;        // the estimate that last marked each link
  uint64_t mark_stamp_ = 0;
};

}  // namespace servesim::sim
