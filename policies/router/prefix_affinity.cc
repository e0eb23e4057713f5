// prefix_affinity: cache-aware routing as SGLang's router does it (sgl-router, cache_aware policy).
//
// If the load is imbalanced (max - min > balance_abs_threshold and max > balance_rel_threshold x
// min, load = queued + running requests) the request goes to the least loaded replica. Otherwise
// it goes to the replica whose cache view matches the longest prefix of its prompt, if that match
// covers more than cache_threshold of the prompt's blocks; else to the replica whose view holds
// the fewest blocks (the most room). The router's view of each replica is either its own
// approximate tree of the prompts it sent there (SGLang; capped at max_tree_blocks per replica,
// least recently used out), or the replica caches' own insert/evict events as they arrive,
// delayed by staleness_ms (real routers learn cache state from such events, late).
//
// tiered_prefix_affinity (issue 16): the same, but a replica's match continues past its HBM view
// into its host KV tier, its NVMe tier and the cluster's shared KV store, unit by unit, and each
// unit is worth 1 in HBM, host_weight in host memory, nvme_weight on NVMe, store_weight in the store (read from the tiers as they are
// now, as LMCache's controller or Mooncake's master report them). A unit in the store counts for
// every replica alike, so it no longer pulls a request to the replica that computed it: equal
// scores go to the least loaded replica. Its default view is replica_events, and it also records
// the prompts it routes in that view at once (SGLang's optimistic insert; the replica's events
// then confirm or evict them), so that a burst of new prompts does not all go to the replica
// whose view is emptiest before its events arrive.
#include <algorithm>
#include <deque>
#include <list>
#include <unordered_map>
#include <vector>

#include "policies/router/router.h"
#include "sim/cluster/kv_cache.h"
#include "sim/cluster/replica.h"

namespace servesim::policies {
namespace {

// A set of chain keys with least-recently-used eviction beyond a capacity.
class LruKeySet {
 public:
  explicit LruKeySet(size_t capacity = 0) : capacity_(capacity) {}
  bool contains(uint64_t key) const { return index_.count(key) != 0; }
  size_t size() const { return index_.size(); }
  void touch(uint64_t key) {
    auto it = index_.find(key);
    if (it != index_.end()) {
      order_.splice(order_.end(), order_, it->second);
      return;
    }
    order_.push_back(key);
    index_[key] = std::prev(order_.end());
    if (capacity_ > 0 && index_.size() > capacity_) {
      index_.erase(order_.front());
      order_.pop_front();
    }
  }
  void erase(uint64_t key) {
    auto it = index_.find(key);
    if (it == index_.end()) return;
    order_.erase(it->second);
    index_.erase(it);
  }

 private:
  size_t capacity_;
  std::list<uint64_t> order_;
  std::unordered_map<uint64_t, std::list<uint64_t>::iterator> index_;
};

// Tiered matching: the weights of a unit found in host memory and in the shared store (HBM: 1).
struct TierWeights {
  bool enabled = false;
  double host = 0, store = 0, nvme = 0;
};

class PrefixAffinityRouter final : public sim::Router, private sim::CacheListener {
 public:
  PrefixAffinityRouter(double cache_threshold, int64_t abs_threshold, double rel_threshold, int64_t max_tree_blocks,
                       bool replica_events, double staleness_s, TierWeights tiers = {})
      : tiers_(tiers),
        cache_threshold_(cache_threshold),
        abs_threshold_(abs_threshold),
        rel_threshold_(rel_threshold),
        max_tree_blocks_(max_tree_blocks),
        replica_events_(replica_events),
        staleness_(core::Duration::from_seconds(staleness_s)) {}

  void bind(std::span<sim::Replica* const> replicas, sim::Simulation& sim) override {
    sim_ = &sim;
    views_.assign(replicas.size(),
                  LruKeySet(replica_events_ && !tiers_.enabled ? 0 : static_cast<size_t>(max_tree_blocks_)));
    unit_tokens_ = replicas.empty() ? 0 : replicas[0]->kv().unit_tokens();
    replicas_.assign(replicas.begin(), replicas.end());
    if (replica_events_)
      for (size_t i = 0; i < replicas.size(); ++i) replicas[i]->kv_cache().set_listener(this, static_cast<uint32_t>(i));
  }

  uint32_t route(const sim::Request& request, std::span<const sim::ReplicaLoad> replicas) override {
    if (views_.size() != replicas.size()) views_.assign(replicas.size(), LruKeySet(static_cast<size_t>(max_tree_blocks_)));
    apply_events();
    prompt_keys(request);

    int64_t max_load = 0, min_load = INT64_MAX;
    uint32_t least = 0;
    for (uint32_t i = 0; i < replicas.size(); ++i) {
      const int64_t load = replicas[i].queued + replicas[i].running;
      max_load = std::max(max_load, load);
      if (load < min_load) {
        min_load = load;
        least = i;
      }
    }
    uint32_t pick;
    const bool imbalanced = max_load - min_load > abs_threshold_ &&
                            static_cast<double>(max_load) > rel_threshold_ * static_cast<double>(min_load);
    if (imbalanced || keys_.empty()) {
      pick = least;
    } else if (tiers_.enabled) {
      pick = tiered_pick(replicas, least);
    } else {
      size_t best_match = 0;
      uint32_t best = least;
      for (uint32_t i = 0; i < replicas.size(); ++i) {
        size_t m = 0;
        while (m < keys_.size() && views_[i].contains(keys_[m])) ++m;
        if (m > best_match) {
          best_match = m;
          best = i;
        }
      }
      const double rate = static_cast<double>(best_match) / static_cast<double>(keys_.size());
      if (rate > cache_threshold_) {
        pick = best;
      } else {
        // The replica whose view holds the fewest blocks: the most room for a new prefix.
        pick = 0;
        for (uint32_t i = 1; i < replicas.size(); ++i) {
          const size_t a = views_[i].size(), b = views_[pick].size();
          const int64_t la = replicas[i].queued + replicas[i].running;
          const int64_t lb = replicas[pick].queued + replicas[pick].running;
          if (a < b || (a == b && la < lb)) pick = i;
        }
      }
    }
    // The tiered kind also records what it routes in an event view (SGLang's optimistic insert):
    // the replica's own events confirm or evict those units later.
    if (!replica_events_ || tiers_.enabled)
      for (uint64_t k : keys_) views_[pick].touch(k);
    return pick;
  }

 private:
  // The tiered match: per replica, the prompt's units in order, each worth 1 in its HBM view,
  // host_weight in its host tier, nvme_weight in its NVMe tier, store_weight in its (group's) store, up
  // to the first found nowhere.
  uint32_t tiered_pick(std::span<const sim::ReplicaLoad> replicas, uint32_t least) {
    double best_score = 0;
    uint32_t best = least;
    const bool bound = replicas_.size() == replicas.size();
    for (uint32_t i = 0; i < replicas.size(); ++i) {
      // Each replica's own store: with kv_tiers.store.replicas_per_store, its group's.
      const sim::SharedKvStore* store = bound ? replicas_[i]->kv_store() : nullptr;
      const sim::HostKvTier* host = i < replicas_.size() ? replicas_[i]->host_tier() : nullptr;
      const sim::NvmeKvTier* nvme = i < replicas_.size() ? replicas_[i]->nvme_tier() : nullptr;
      double score = 0;
      for (uint64_t k : keys_) {
        if (views_[i].contains(k)) score += 1;
        else if (host && host->contains(k)) score += tiers_.host;
        else if (nvme && nvme->contains(k)) score += tiers_.nvme;
        else if (store && store->contains(k)) score += tiers_.store;
        else break;
      }
      const int64_t load = replicas[i].queued + replicas[i].running;
      const int64_t best_load = replicas[best].queued + replicas[best].running;
      if (score > best_score || (score == best_score && score > 0 && load < best_load)) {
        best_score = score;
        best = i;
      }
    }
    if (best_score / static_cast<double>(keys_.size()) > cache_threshold_) return best;
    uint32_t pick = 0;  // the replica whose view holds the fewest blocks: the most room
    for (uint32_t i = 1; i < replicas.size(); ++i) {
      const size_t a = views_[i].size(), b = views_[pick].size();
      const int64_t la = replicas[i].queued + replicas[i].running;
      const int64_t lb = replicas[pick].queued + replicas[pick].running;
      if (a < b || (a == b && la < lb)) pick = i;
    }
    return pick;
  }

  // The chain keys of the prompt's prefix blocks, as the replicas' caches key them.
  void prompt_keys(const sim::Request& r) {
    keys_.clear();
    size_t n = r.block_hashes.size();
    if (unit_tokens_ > 0) n = std::min<size_t>(n, static_cast<size_t>((r.prompt_tokens + unit_tokens_ - 1) / unit_tokens_));
    uint64_t key = 0;
    for (size_t j = 0; j < n; ++j) {
      key = sim::KvCache::chain(key, r.block_hashes[j]);
      keys_.push_back(key);
    }
  }

  struct Event {
    core::Time time;
    uint32_t replica;
    uint64_t key;
    bool cached;
  };
  void on_unit_cached(uint32_t replica, uint64_t key) override { events_.push_back({sim_->now(), replica, key, true}); }
  void on_unit_evicted(uint32_t replica, uint64_t key) override { events_.push_back({sim_->now(), replica, key, false}); }
  void apply_events() {
    if (!replica_events_) return;
    const core::Time now = sim_->now();
    while (!events_.empty() && events_.front().time + staleness_ <= now) {
      const Event& e = events_.front();
      if (e.cached) views_[e.replica].touch(e.key); else views_[e.replica].erase(e.key);
      events_.pop_front();
    }
  }

  TierWeights tiers_;
  std::vector<const sim::Replica*> replicas_;
  double cache_threshold_;
  int64_t abs_threshold_;
  double rel_threshold_;
  int64_t max_tree_blocks_;
  bool replica_events_;
  core::Duration staleness_;
  sim::Simulation* sim_ = nullptr;
  int64_t unit_tokens_ = 0;
  std::vector<LruKeySet> views_;
  std::vector<uint64_t> keys_;
  std::deque<Event> events_;
};

std::vector<core::ParamSpec> affinity_params(const char* default_view) {
  return {
      core::ParamSpec::real("cache_threshold", 0.5, "fraction",
                            "route to the best prefix match only if it covers more than this share of the "
                            "prompt's blocks (SGLang default 0.5)")
          .range(0, 1),
      core::ParamSpec::integer("balance_abs_threshold", 32, "requests",
                               "imbalance if max - min load exceeds this (SGLang default 32)")
          .range(0, 1e12),
      core::ParamSpec::real("balance_rel_threshold", 1.0001, "ratio",
                            "... and max load exceeds this multiple of min load (SGLang default 1.0001)")
          .range(1, 1e6),
      core::ParamSpec::integer("max_tree_blocks", 1 << 20, "blocks",
                               "router_tree view: most prefix blocks remembered per replica (LRU)")
          .range(1, 1e9),
      core::ParamSpec::string("cache_view", default_view,
                              "router_tree: the prompts routed to each replica (SGLang); replica_events: "
                              "the replicas' cache insert/evict events, staleness_ms late")
          .one_of({"router_tree", "replica_events"}),
      core::ParamSpec::real("staleness_ms", 0, "ms", "replica_events view: how late events reach the router")
          .range(0, 1e7),
  };
}

const bool kRegistered =
    router_registry().add(
        {"prefix_affinity",
         "SGLang-style cache-aware routing: longest cached-prefix match unless the load is imbalanced; "
         "the cache view is the router's own tree of routed prompts or the replicas' cache events",
         affinity_params("router_tree")},
        [](const core::Params& p, uint64_t) {
          return std::make_unique<PrefixAffinityRouter>(
              p.get_float("cache_threshold"), p.get_int("balance_abs_threshold"), p.get_float("balance_rel_threshold"),
              p.get_int("max_tree_blocks"), p.get_string("cache_view") == "replica_events",
              p.get_float("staleness_ms") * 1e-3);
        }) &&
    router_registry().add(
        {"tiered_prefix_affinity",
         "prefix_affinity that sees the KV tiers (docs/kv-tiers.md): a prompt unit counts 1 in a replica's HBM, "
         "host_weight in its host tier, nvme_weight on its NVMe, store_weight in the shared store (the same for "
         "every replica; ties go to the least loaded)",
         [] {
           std::vector<core::ParamSpec> ps = affinity_params("replica_events");
           ps.push_back(core::ParamSpec::real("host_weight", 0.75, "fraction",
                                              "worth of a prompt unit in a replica's host memory (HBM: 1): it saves "
                                              "the prefill but the request waits for its copy")
                            .range(0, 1));
           ps.push_back(core::ParamSpec::real("nvme_weight", 0.625, "fraction",
                                              "worth of a prompt unit in a replica's local NVMe tier (unset: "
                                              "0.625, between host_weight's and store_weight's defaults)")
                            .range(0, 1)
                            .optional());
           ps.push_back(core::ParamSpec::real("store_weight", 0.5, "fraction",
                                              "worth of a prompt unit in the shared store, for every replica: a "
                                              "slower copy than from host memory")
                            .range(0, 1));
           return ps;
         }()},
        [](const core::Params& p, uint64_t) {
          TierWeights w;
          w.enabled = true;
          w.host = p.get_float("host_weight");
          w.store = p.get_float("store_weight");
          w.nvme = p.has("nvme_weight") ? p.get_float("nvme_weight") : 0.625;
          return std::make_unique<PrefixAffinityRouter>(
              p.get_float("cache_threshold"), p.get_int("balance_abs_threshold"), p.get_float("balance_rel_threshold"),
              p.get_int("max_tree_blocks"), p.get_string("cache_view") == "replica_events",
              p.get_float("staleness_ms") * 1e-3, w);
        });

}  // namespace
}  // namespace servesim::policies
