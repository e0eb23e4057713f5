// Numbers are physical or refused (issue 14). Every numeric parameter of every kind has a documented
// finite range; values outside it are refused naming the key, values at its edges either run to
// physically sane results under the invariant checker or stop with a clear error; time arithmetic
// errors instead of wrapping; generators refuse what cannot fit the clock and skip to their window.
// The parameters are found by walking the registries, so a new one is covered without a new test.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "experiments/run.h"
#include "sim/core/config.h"
#include "sim/core/error.h"
#include "sim/core/params.h"
#include "sim/core/rng.h"
#include "sim/core/time.h"
#include "sim/engine/simulation.h"
#include "sim/metrics/summary.h"
#include "traces/arrival_source.h"

namespace servesim::experiments {
namespace {

using core::ParamSpec;
using core::ParamType;

bool numeric(const ParamSpec& s) { return s.type == ParamType::kInt || s.type == ParamType::kFloat; }

// Every numeric parameter: (dotted key as it appears in a configuration that selects its kind, spec,
// the family and kind it belongs to, or "" for the run's own tables).
struct NumericParam {
  std::string key;
  ParamSpec spec;
  std::string family, kind;
};

// Where a family's kind is chosen in a run configuration.
const std::map<std::string, std::string> kSectionOf = {
    {"workloads", "workload"}, {"models", "model"},      {"gpus", "gpu"},         {"cost_models", "cost_model"},
    {"routers", "router"},     {"schedulers", "scheduler"}, {"length_distributions", "workload.prompt"},
    {"arrivals", "workload.arrival"}, {"engines", "engine"},     {"decoding", "decoding"},
    {"admission", "admission"}, {"rate_profiles", "workload.rate_profile"}, {"autoscalers", "autoscaler"},
    {"kv_tier_writes", "kv_tiers.host.write"}, {"kv_tier_evictions", "kv_tiers.host.eviction"},
    {"kv_tier_loads", "kv_tiers.host.load"}, {"kv_tier_prefetches", "kv_tiers.store.prefetch"}};

std::vector<NumericParam> numeric_params() {
  std::vector<NumericParam> out;
  std::function<void(const std::vector<ParamSpec>&, const std::string&)> tables = [&](const std::vector<ParamSpec>& specs,
                                                                                      const std::string& prefix) {
    for (const auto& s : specs) {
      if (s.type == ParamType::kTable) tables(s.fields, prefix + s.name + ".");
      if (numeric(s)) out.push_back({prefix + s.name, s, "", ""});
    }
  };
  tables(run_schema(), "");
  for (const core::KindFamily* family : core::all_families()) {
    const auto section = kSectionOf.find(family->name());
    EXPECT_NE(section, kSectionOf.end()) << "family " << family->name() << " has no place in this test's configurations";
    if (section == kSectionOf.end()) continue;
    for (const core::KindInfo* kind : family->kinds())
      for (const auto& s : kind->params)
        if (numeric(s)) out.push_back({section->second + "." + s.name, s, family->name(), kind->name});
  }
  return out;
}

TEST(RangesTest, EveryNumericParameterHasAFiniteDocumentedRangeHoldingItsDefault) {
  const auto params = numeric_params();
  EXPECT_GE(params.size(), 100u);
  for (const auto& p : params) {
    SCOPED_TRACE(p.family + "/" + p.kind + " " + p.key);
    if (p.spec.name == "seed") continue;  // not a quantity: any int64 >= 0
    EXPECT_TRUE(std::isfinite(p.spec.min) && std::isfinite(p.spec.max)) << p.spec.range_str();
    EXPECT_FALSE(p.spec.range_str().empty());
    if (const auto* d = std::get_if<double>(&p.spec.default_value)) {
      EXPECT_TRUE((*d >= p.spec.min && *d <= p.spec.max) || (p.spec.zero_allowed && *d == 0)) << *d;
    } else if (const auto* i = std::get_if<int64_t>(&p.spec.default_value)) {
      EXPECT_TRUE(static_cast<double>(*i) >= p.spec.min && static_cast<double>(*i) <= p.spec.max) << *i;
    }
  }
}

// A configuration in which `kind` of `family` is chosen, every other required value valid.
std::string lengths(const std::string& section) { return "[" + section + "]\nkind = \"fixed\"\nvalue = 10\n"; }

std::string config_choosing(const NumericParam& p) {
  std::string workload = "[workload]\nkind = \"poisson\"\nrate = 5\nmax_requests = 10\n";
  std::string prompt = lengths("workload.prompt");
  std::string output = lengths("workload.output");
  std::string model = "[model]\nkind = \"llama-3-8b\"\n", gpu = "[gpu]\nkind = \"h100-sxm\"\n", rest;
  const std::string choose = "kind = \"" + p.kind + "\"\n";
  if (p.family == "workloads") {
    workload = "[workload]\n" + choose + "max_requests = 10\n";
    if (p.kind == "azure_csv" || p.kind == "mooncake_jsonl") workload += "path = \"x\"\n";
    if (p.kind == "poisson" || p.kind == "gamma" || p.kind == "sessions") workload += "rate = 5\n";
    if (p.kind == "gamma") workload += "cv = 2\n";
    if (p.kind == "sessions") {
      workload += "[workload.turns]\nkind = \"fixed\"\nvalue = 2\n" + lengths("workload.user") +
                  lengths("workload.system_tokens");
      prompt.clear();
    }
    if (p.kind == "azure_csv" || p.kind == "mooncake_jsonl") prompt = output = "";
    if (p.kind == "shared_prefix") {
      workload += "groups = 2\nprompts_per_group = 2\nsystem_prompt_len = 10\nquestion_len = 10\n";
      prompt.clear();
    }
    if (p.kind == "synthetic" || p.kind == "shared_prefix")
      workload += "[workload.arrival]\nkind = \"poisson\"\nrate = 5\n";
  } else if (p.family == "arrivals") {
    // A composed workload sent by the arrival process of the kind under test.
    workload = "[workload]\nkind = \"synthetic\"\nmax_requests = 10\n[workload.arrival]\n" + choose;
    if (p.kind == "closed_loop") workload += "concurrency = 2\nrequests = 10\n";
    if (p.kind == "offline") workload += "requests = 10\n";
    if (p.kind == "poisson" || p.kind == "gamma" || p.kind == "constant") workload += "rate = 5\nrequests = 10\n";
    if (p.kind == "gamma") workload += "cv = 2\n";
    if (p.kind == "poisson_fixed_count") workload += "rate = 5\nduration_s = 2\n";
    if (p.kind == "stages") workload += "[[workload.arrival.stages]]\nrate = 5\nduration_s = 2\n";
  } else if (p.family == "rate_profiles") {
    workload += "[workload.rate_profile]\n" + choose + (p.kind == "table" ? "path = \"x\"\n" : "amplitude = 0.5\n");
  } else if (p.family == "length_distributions") {
    prompt = "[workload.prompt]\n" + choose;
    if (p.kind == "fixed") prompt += "value = 10\n";
    if (p.kind == "uniform") prompt += "min = 1\nmax = 10\n";
    if (p.kind == "lognormal") prompt += "mean = 10\nsd = 2\n";
    if (p.kind == "empirical") prompt += "path = \"x\"\nfield = \"prompt\"\n";
  } else if (p.family == "models") {
    model = "[model]\n" + choose + (p.kind == "hf_config" ? "path = \"x\"\n" : "");
  } else if (p.family == "gpus") {
    gpu = "[gpu]\n" + choose;
  } else if (p.family == "decoding") {
    rest = "[decoding]\n" + choose + "acceptance = [0.7]\n";
    if (p.kind == "draft_model") rest += "[decoding.model]\nkind = \"llama-3-8b\"\nnum_layers = 2\n";
  } else if (p.family == "admission") {
    rest = "[admission]\n" + choose + (p.kind == "queue_length" ? "max_queued = 4\n" : "max_ttft_ms = 100\n");
  } else if (p.family == "autoscalers") {
    rest = "[autoscaler]\n" + choose + "max_replicas = 2\n" +
           (p.kind == "slo"                  ? "max_ttft_ms = 100\n"
            : p.kind == "target_utilisation" ? "target_requests = 4\n"
            : p.kind == "tpot"               ? "max_tpot_ms = 40\n"
                                             : "times_s = [1]\nreplicas = [2]\n");
  } else if (p.family == "kv_tier_prefetches") {  // a prefetch needs a store and a host tier
    rest = "[cluster]\nprefix_caching = true\n[kv_tiers.host]\ncapacity_gb = 4\n[kv_tiers.store]\ncapacity_gb = 4\n"
           "[kv_tiers.store.prefetch]\n" + choose;
  } else if (!p.family.empty()) {
    rest = "[" + kSectionOf.at(p.family) + "]\n" + choose;
  } else if (p.key.rfind("cluster.prefill.", 0) == 0 || p.key.rfind("cluster.decode.", 0) == 0) {
    rest = "[cluster.prefill]\nreplicas = 1\n[cluster.decode]\nreplicas = 1\n";
  }
  return workload + prompt + output + model + gpu + rest;
}

// Values outside the range, generated from its bounds.
std::vector<double> outside(const ParamSpec& s) {
  std::vector<double> v = {s.max * 2 + 1, s.max + std::max(1.0, std::fabs(s.max) * 1e-6), 1e300, -1e300,
                           s.min - std::max(1.0, std::fabs(s.min)), -1};
  if (s.type == ParamType::kFloat) {
    v.push_back(std::nextafter(s.max, 1e308));
    if (s.min > 0) v.insert(v.end(), {s.min / 2, s.min * (1 - 1e-9), 1e-300, 1e-12});
    if (s.min_exclusive) v.push_back(s.min);
  } else if (s.min > 0) {
    v.push_back(s.min - 1);
  }
  std::vector<double> out;
  for (double x : v) {
    const bool low = s.min_exclusive ? !(x > s.min) : x < s.min;
    if ((low || x > s.max) && !(s.zero_allowed && x == 0) && std::fabs(x) < 9e18 + (s.type == ParamType::kFloat ? 1e308 : 0))
      out.push_back(x);
  }
  return out;
}

std::string toml_number(const ParamSpec& s, double x) {
  if (s.type == ParamType::kInt) {
    if (std::fabs(x) >= 9.2e18) return x > 0 ? "9223372036854775807" : "-9223372036854775807";
    return std::to_string(static_cast<int64_t>(std::floor(x)));
  }
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", x);
  std::string t = buf;
  if (t.find_first_of(".eEn") == std::string::npos) t += ".0";
  return t;
}

TEST(RangesTest, ValuesOutsideARangeAreRefusedNamingTheKeyAndItsEdgesAreAccepted) {
  int refused = 0;
  for (const auto& p : numeric_params()) {
    if (p.spec.name == "seed") continue;
    SCOPED_TRACE(p.family + "/" + p.kind + " " + p.key);
    const std::string text = config_choosing(p);
    ASSERT_NO_THROW(core::parse_config(text, "run.toml", run_schema())) << text;
    for (double x : outside(p.spec)) {
      const std::string set = p.key + "=" + toml_number(p.spec, x);
      try {
        core::parse_config(text, "run.toml", run_schema(), {set});
        ADD_FAILURE() << set << " accepted; range " << p.spec.range_str();
      } catch (const core::ConfigError& e) {
        EXPECT_EQ(e.key(), p.key) << e.what();
        EXPECT_NE(std::string(e.what()).find("valid: " + p.spec.range_str()), std::string::npos) << e.what();
        ++refused;
      }
    }
    std::vector<double> edges;
    if (!p.spec.min_exclusive) edges.push_back(p.spec.min);
    edges.push_back(p.spec.max);
    if (p.spec.zero_allowed) edges.push_back(0);
    for (double x : edges) {
      const std::string set = p.key + "=" + toml_number(p.spec, x);
      EXPECT_NO_THROW(core::parse_config(text, "run.toml", run_schema(), {set})) << set;
    }
  }
  EXPECT_GE(refused, 500);
}

// Physical sanity of a finished run: every figure finite and non-negative (except what the
// summary declares otherwise: a nullable one may be unknown, a signed one, such as a trend,
// negative), latencies positive, utilisation at most 100%.
void expect_physical(const metrics::RunSummary& s, const std::string& what) {
  for (const auto& v : metrics::flatten(s)) {
    if (v.nullable && std::isnan(v.value)) continue;
    EXPECT_TRUE(std::isfinite(v.value) && (v.signed_value || v.value >= 0)) << what << ": " << v.name << " = " << v.value;
  }
  if (s.requests_completed > 0) {
    EXPECT_GT(s.ttft_ms.p50, 0) << what;
    EXPECT_GT(s.e2e_ms.p50, 0) << what;
  }
  EXPECT_LE(s.mfu_mean, 1 + 1e-9) << what;
  EXPECT_LE(s.mbu_mean, 1 + 1e-9) << what;
  EXPECT_LE(s.kv_util_mean, 1 + 1e-9) << what;
  EXPECT_LE(s.slo_attainment, 1 + 1e-9) << what;
}

// Each hardware, cost-model, cluster and network value at each edge of its range (one at a time, on a
// disaggregated cluster so the network is used): the run completes with sane figures under the
// invariant checker, or stops with an error a person can act on (never an internal one).
TEST(RangesTest, RunsAtTheEdgesOfEveryRangeAreSaneOrStopClearly) {
  const std::string base =
      "[workload]\nkind = \"poisson\"\nrate = 20\nmax_requests = 30\n" + lengths("workload.prompt") +
      "[workload.output]\nkind = \"uniform\"\nmin = 1\nmax = 40\n[model]\nkind = \"llama-3-8b\"\n[gpu]\nkind = "
      "\"h100-sxm\"\n[slo]\nttft_ms = 500\n[output]\nsample_interval_ms = 0\n[cluster.prefill]\nreplicas = 1\n"
      "[cluster.decode]\nreplicas = 1\n[network]\ngpus_per_node = 1\n";
  int runs = 0, refused = 0;
  for (const auto& p : numeric_params()) {
    const bool hardware = p.family == "gpus" || p.family == "cost_models" || p.key.rfind("network.", 0) == 0 ||
                          (p.family.empty() && p.key.rfind("cluster.", 0) == 0 && p.spec.type == ParamType::kFloat) ||
                          (p.family == "models" && p.spec.type == ParamType::kFloat);
    if (!hardware || (p.family == "gpus" && p.kind != "h100-sxm") || (p.family == "models" && p.kind != "llama-3-8b"))
      continue;
    if (p.key.rfind("cluster.prefill", 0) == 0 || p.key.rfind("cluster.decode", 0) == 0) continue;
    for (double x : {p.spec.min, p.spec.max}) {
      if (p.spec.min_exclusive && x == p.spec.min) continue;
      const std::string set = p.key + "=" + toml_number(p.spec, x);
      SCOPED_TRACE(set);
      try {
        const core::Params config = core::parse_config(base, "run.toml", run_schema(), {set});
        RunOutputs outputs;
        outputs.check = true;
        const RunResult r = run_simulation(config, outputs);
        expect_physical(r.summary, set);
        ++runs;
      } catch (const core::Error& e) {
        const std::string m = e.what();
        EXPECT_EQ(m.rfind("internal", 0), std::string::npos) << m;
        EXPECT_EQ(m.find("invariant"), std::string::npos) << m;
        EXPECT_EQ(m.find('\n'), std::string::npos) << m;
        ++refused;
      }
    }
  }
  EXPECT_GE(runs, 40);
  EXPECT_GE(runs + refused, 60);
}

// The KV cache's block and token counts stay within what int64 arithmetic holds: memory, element
// size and block size at their edges, on a model made as small as the ranges allow.
TEST(RangesTest, KvCacheCountsNeverOverflow) {
  int refused = 0, ran = 0;
  for (const char* memory : {"0.5", "80.0", "1000.0", "100000.0"})
    for (const char* kv_bytes : {"0.125", "2.0", "16.0"})
      for (const char* block : {"1", "16", "65536"}) {
        const std::string set = std::string("gpu.memory_gib=") + memory + " model.kv_bytes=" + kv_bytes +
                                " cluster.block_size=" + block;
        SCOPED_TRACE(set);
        const std::string text =
            "[workload]\nkind = \"poisson\"\nrate = 50\nmax_requests = 20\n" + lengths("workload.prompt") +
            lengths("workload.output") +
            "[model]\nkind = \"llama-3-8b\"\nnum_layers = 1\nnum_kv_heads = 1\nhead_dim = 1\nhidden_size = 32\n"
            "intermediate_size = 64\nvocab_size = 100\n[gpu]\nkind = \"h100-sxm\"\n[output]\nsample_interval_ms = 0\n";
        try {
          const core::Params config =
              core::parse_config(text, "run.toml", run_schema(),
                                 {std::string("gpu.memory_gib=") + memory, std::string("model.kv_bytes=") + kv_bytes,
                                  std::string("cluster.block_size=") + block});
          RunOutputs outputs;
          outputs.check = true;
          expect_physical(run_simulation(config, outputs).summary, set);
          ++ran;
        } catch (const core::ConfigError& e) {
          const std::string m = e.what();
          EXPECT_TRUE(e.key() == "gpu.memory_gib" || e.key() == "cluster.tensor_parallel") << m;
          ++refused;
        }
      }
  EXPECT_GT(ran, 0);
  EXPECT_GT(refused, 0);
}

// ---- time arithmetic ---------------------------------------------------------------------------------

TEST(ClockTest, DurationsBeyondTheClockAreErrorsNeverWrappedCounts) {
  for (double s : {9.3e9, 1e10, 1e18, 1e300, -9.3e9, -1e300, std::numeric_limits<double>::infinity(),
                   -std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
    try {
      (void)core::Duration::from_seconds(s);
      ADD_FAILURE() << s << " s accepted";
    } catch (const core::Error& e) {
      EXPECT_NE(std::string(e.what()).find("beyond the simulated clock"), std::string::npos) << e.what();
    }
    EXPECT_THROW((void)core::Duration::from_ms(s * 1e3), core::Error) << s;
  }
  for (double s : {0.0, 1e-9, 1.5, 1e9, 9.2e9, -9.2e9})
    EXPECT_EQ(core::Duration::from_seconds(s).ns(), std::llround(s * 1e9)) << s;
}

// from_seconds rounds with an inline copy of std::llround (half away from zero): the same integer
// for halves, the doubles next to them, the edges of exact integers (2^52, 2^53) and random values
// of every magnitude the clock holds.
TEST(ClockTest, RoundingToTheNanosecondIsLlroundsEverywhere) {
  std::vector<double> xs = {0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 0.49999999999999994, -0.49999999999999994,
                            4503599627370495.5, -4503599627370495.5, 4503599627370496.0, 9007199254740991.0,
                            9007199254740993.0, 9.2e18, -9.2e18, 1e-300, 123456789.5};
  for (double base : {0.5, 1.5, 2.5, 1e6 + 0.5, 4503599627370495.5})
    for (double x : {std::nextafter(base, 0.0), std::nextafter(base, 1e300)}) {
      xs.push_back(x);
      xs.push_back(-x);
    }
  core::Rng rng(18, "rounding");
  for (int i = 0; i < 100000; ++i) {
    const double x = std::ldexp(rng.uniform() - 0.5, static_cast<int>(rng.uniform_int(63)));
    xs.push_back(x);
    xs.push_back(std::floor(x) + 0.5);
  }
  for (double x : xs) ASSERT_EQ(core::Duration::round_half_away(x), std::llround(x)) << std::hexfloat << x;
}

struct Ticker final : sim::EventHandler {
  sim::Simulation* sim = nullptr;
  core::Duration step;
  int fired = 0;
  void on_event(uint64_t) override {
    ++fired;
    sim->schedule_after(step, this);
  }
};

TEST(ClockTest, AnEventPastTheClocksEndIsAnErrorThatSaysSoNotAnInternalOne) {
  for (int64_t step_ns : {INT64_MAX / 2 + 1, INT64_MAX / 3 + 7, INT64_MAX - 5, int64_t{4'000'000'000'000'000'000}}) {
    sim::Simulation simulation;
    Ticker t;
    t.sim = &simulation;
    t.step = core::Duration::from_ns(step_ns);
    simulation.schedule_at(core::Time::from_ns(0), &t);
    try {
      simulation.run();
      ADD_FAILURE() << "the clock wrapped around";
    } catch (const core::Error& e) {
      const std::string m = e.what();
      EXPECT_EQ(m.rfind("internal", 0), std::string::npos) << m;
      EXPECT_NE(m.find("292 years"), std::string::npos) << m;
    }
    EXPECT_GE(t.fired, 1);
    EXPECT_GE(simulation.now().ns(), 0);
  }
}

// ---- generators -----------------------------------------------------------------------------------------

std::string generator(const std::string& kind, const std::string& extra) {
  std::string s = "[workload]\nkind = \"" + kind + "\"\n" + extra + "\n";
  if (kind == "gamma") s += "cv = 2.0\n";
  if (kind == "sessions")
    s += "[workload.turns]\nkind = \"fixed\"\nvalue = 2\n" + lengths("workload.user") + lengths("workload.system_tokens") +
         lengths("workload.output");
  else
    s += lengths("workload.prompt") + lengths("workload.output");
  return s;
}

std::unique_ptr<traces::ArrivalSource> make(const std::string& text) {
  const std::vector<ParamSpec> schema = {
      ParamSpec::section("workload", "workloads", "", "the workload under test")};
  return traces::workload_registry().make(core::parse_config(text, "w.toml", schema).section("workload"), 7);
}

// Every combination of rate, limit, window and rate scale across their ranges: refused up front naming
// the keys that do not fit, or the first requests come at once (the window is skipped to, not drawn
// towards) and in order from 0.
TEST(GeneratorLimitsTest, WhatCannotFitTheClockIsRefusedUpFrontAndWindowsAreSkippedTo) {
  int refused = 0, ran = 0;
  for (const char* kind : {"poisson", "gamma", "sessions"})
    for (const char* rate : {"1e-06", "0.001", "10.0", "1000000.0", "1000000000.0"})
      for (const char* limit : {"max_requests = 50", "max_requests = 1000000000", "window_end_s = 3000000000.0"})
        for (const char* start : {"0.0", "1000.0", "1000000000.0"})
          for (const char* scale : {"1e-06", "1.0", "1000000.0"}) {
            const std::string extra = std::string("rate = ") + rate + "\n" + limit + "\nwindow_start_s = " + start +
                                      "\nrate_scale = " + scale;
            SCOPED_TRACE(std::string(kind) + ": " + extra);
            std::unique_ptr<traces::ArrivalSource> source;
            try {
              source = make(generator(kind, extra));
            } catch (const core::ConfigError& e) {
              static const std::set<std::string> keys = {"workload.rate", "workload.max_requests", "workload.window_start_s",
                                                         "workload.window_end_s", "workload.rate_scale"};
              EXPECT_TRUE(keys.count(e.key())) << e.what();
              const std::string m = e.what();
              EXPECT_TRUE(m.find("rate") != std::string::npos) << "the rate is not named: " << m;
              ++refused;
              continue;
            }
            traces::RequestSpec r;
            int64_t previous = 0;
            for (int i = 0; i < 50 && source->next(r); ++i) {
              EXPECT_GE(r.arrival.ns(), previous);
              previous = r.arrival.ns();
            }
            ++ran;
          }
  EXPECT_GT(refused, 50);
  EXPECT_GT(ran, 50);
}

// Skipping to the window keeps the process: Poisson gaps from the window are exponential with the
// same rate (mean and coefficient of variation); gamma arrivals keep their mean rate and burstiness.
TEST(GeneratorLimitsTest, ArrivalsSkippedToTheWindowHaveTheProcesssRateAndShape) {
  for (const auto& [kind, cv] : {std::pair{"poisson", 1.0}, std::pair{"gamma", 2.0}}) {
    SCOPED_TRACE(kind);
    auto source = make(generator(kind, "rate = 100.0\nmax_requests = 40000\nwindow_start_s = 100000000.0"));
    traces::RequestSpec r;
    std::vector<double> gaps;
    int64_t previous = -1;
    double first = 0;
    while (source->next(r)) {
      if (previous >= 0) gaps.push_back(static_cast<double>(r.arrival.ns() - previous) * 1e-9);
      else first = r.arrival.seconds();
      previous = r.arrival.ns();
    }
    ASSERT_EQ(gaps.size(), 39999u);
    double sum = 0, sum2 = 0;
    for (double g : gaps) {
      sum += g;
      sum2 += g * g;
    }
    const double mean = sum / static_cast<double>(gaps.size());
    const double sd = std::sqrt(sum2 / static_cast<double>(gaps.size()) - mean * mean);
    EXPECT_NEAR(mean, 0.01, 0.01 * 0.03);
    EXPECT_NEAR(sd / mean, cv, cv * 0.05);
    EXPECT_LT(first, 1.0);  // the first arrival is near the window's start, not 1e8 s of draws away
  }
}

}  // namespace
}  // namespace servesim::experiments
