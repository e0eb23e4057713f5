// The serving engine's terms (hwmodels/engine/engine_model.h), each checked end to end by a
// hand-computed difference: one request alone on one replica, run with and without the term, moves
// TTFT and E2E by exactly what the term says (to the nanosecond rounding of the clock).
#include "hwmodels/engine/engine_model.h"

#include <gtest/gtest.h>

#include <cmath>

#include "experiments/run.h"
#include "hwmodels/calibration_profile.h"
#include "sim/core/config.h"
#include "sim/core/error.h"
#include "tests/sim_test_support.h"
#include "tests/test_paths.h"

namespace servesim::hwmodels {
namespace {

// One request (500 prompt tokens, `output` outputs) alone on one Llama-3-8B on an H100, constant
// efficiencies (no profile), engine `engine` (TOML keys of [engine]).
struct Alone {
  double ttft_ms = 0, e2e_ms = 0;
  int64_t iterations = 0;
  std::vector<core::IterationRecord> its;
};
Alone alone(const std::string& engine, int64_t output = 4, int64_t prompt = 500) {
  const std::string text = "[workload]\nkind = \"poisson\"\nrate = 1\nmax_requests = 1\n"
                           "[workload.prompt]\nkind = \"fixed\"\nvalue = " + std::to_string(prompt) +
                           "\n[workload.output]\nkind = \"fixed\"\nvalue = " + std::to_string(output) +
                           "\n[model]\nkind = \"llama-3-8b\"\n[gpu]\nkind = \"h100-sxm\"\n"
                           "[cost_model]\ncalibration = \"none\"\n[engine]\n" + engine;
  testing::RecordingObserver log;
  experiments::RunOutputs out;
  out.check = true;
  out.observers.push_back(&log);
  const auto r = experiments::run_simulation(core::parse_config(text, "engine.toml", experiments::run_schema()), out);
  return {r.summary.ttft_ms.mean, r.summary.e2e_ms.mean, static_cast<int64_t>(r.summary.iterations), log.iterations};
}

constexpr double kNs = 1e-6;  // ms: one nanosecond of clock rounding

TEST(EngineModelTest, ClientPathTerms) {
  const Alone base = alone("kind = \"none\"\n");
  ASSERT_EQ(base.iterations, 4);  // one prefill, three decodes
  // The API server: everything moves by 5 ms.
  const Alone api = alone("kind = \"none\"\napi_server_ms = 5\n");
  EXPECT_NEAR(api.ttft_ms - base.ttft_ms, 5.0, kNs);
  EXPECT_NEAR(api.e2e_ms - base.e2e_ms, 5.0, kNs);
  // Tokenisation: 500 prompt tokens x 4 us = 2 ms.
  const Alone tok = alone("kind = \"none\"\ntokenize_us_per_token = 4\n");
  EXPECT_NEAR(tok.ttft_ms - base.ttft_ms, 2.0, kNs);
  // Streaming: each token reaches the client 1.5 ms after its iteration: TTFT and E2E both.
  const Alone stream = alone("kind = \"none\"\nstream_ms = 1.5\n");
  EXPECT_NEAR(stream.ttft_ms - base.ttft_ms, 1.5, kNs);
  EXPECT_NEAR(stream.e2e_ms - base.e2e_ms, 1.5, kNs);
  // The first chunk's extra delay: TTFT only (the last token is on time).
  const Alone first = alone("kind = \"none\"\nfirst_token_ms = 0.7\n");
  EXPECT_NEAR(first.ttft_ms - base.ttft_ms, 0.7, kNs);
  EXPECT_NEAR(first.e2e_ms - base.e2e_ms, 0.0, kNs);
  // A one-token request finishes when its first token reaches the client.
  const Alone one = alone("kind = \"none\"\nstream_ms = 1.5\nfirst_token_ms = 0.7\n", 1);
  EXPECT_NEAR(one.e2e_ms, one.ttft_ms, kNs);
}

TEST(EngineModelTest, HostTimePerIteration) {
  const Alone base = alone("kind = \"none\"\n");
  // 2 ms per iteration with prefill work, 0.5 ms per decode-only one; 10 us per sequence.
  const Alone host = alone("kind = \"none\"\nschedule_ms = 2\ndecode_schedule_ms = 0.5\nschedule_us_per_seq = 10\n");
  EXPECT_NEAR(host.ttft_ms - base.ttft_ms, 2.0 + 0.01, kNs);
  EXPECT_NEAR(host.e2e_ms - base.e2e_ms, (2.0 + 0.01) + 3 * (0.5 + 0.01), kNs);
  // Per layer (32 layers) in iterations not replayed as a full graph: all four when eager.
  const Alone layers = alone("kind = \"none\"\nlayer_us = 20\ndecode_layer_us = 5\n");
  EXPECT_NEAR(layers.ttft_ms - base.ttft_ms, 32 * 0.020, kNs);
  EXPECT_NEAR(layers.e2e_ms - base.e2e_ms, 32 * 0.020 + 3 * 32 * 0.005, kNs);
  // With full decode graphs the decode iterations pay no per-layer host time.
  const Alone graphs = alone("kind = \"none\"\nlayer_us = 20\ndecode_layer_us = 5\ncuda_graphs = \"full_decode\"\n");
  const Alone graphs_base = alone("kind = \"none\"\ncuda_graphs = \"full_decode\"\n");
  EXPECT_NEAR(graphs.e2e_ms - graphs_base.e2e_ms, 32 * 0.020, kNs);
}

// Expert parallelism's attention ranks each run their own scheduler and graphs on their share.
TEST(EngineModelTest, DataParallelRanksPadAndScheduleTheirOwnShare) {
  EngineModel e;
  e.graphs = CudaGraphMode::kFullDecode;
  e.max_graph_tokens = 32;
  e.decode_schedule_s = 1e-3;
  e.schedule_s_per_seq = 10e-6;
  BatchShape s;
  s.decode_seqs = 62;
  s.decode_context_tokens = 62 * 100;
  BatchShape one = s;
  e.prepare(one);
  EXPECT_EQ(one.launch, LaunchMode::kEager);  // 62 tokens > the largest graph (32)
  EXPECT_NEAR(e.host_seconds(one, 32), 1e-3 + 62 * 10e-6, 1e-15);
  e.data_parallel = 4;
  BatchShape ranks = s;
  e.prepare(ranks);
  // The busiest of 4 ranks decodes ceil(62 / 4) = 16 sequences: a captured size of its own.
  EXPECT_EQ(ranks.launch, LaunchMode::kFullGraph);
  EXPECT_EQ(ranks.graph_tokens, 16);
  EXPECT_NEAR(e.host_seconds(ranks, 32), 1e-3 + 16 * 10e-6, 1e-15);
}

// Async scheduling: the host prepares the next iteration while the GPU runs this one, so an
// iteration takes max(GPU, host) - except the first after an idle spell, which pays both.
TEST(EngineModelTest, AsyncSchedulingOverlapsHostAndGpu) {
  const Alone gpu = alone("kind = \"none\"\n");
  ASSERT_EQ(gpu.its.size(), 4u);
  const double decode_gpu_ms = gpu.its[1].duration.ms();
  const double big = 3 * decode_gpu_ms, small = decode_gpu_ms / 4;
  auto engine = [](double decode_host_ms) {
    return "kind = \"none\"\nasync_scheduling = true\nschedule_ms = 1\ndecode_schedule_ms = " +
           std::to_string(decode_host_ms) + "\n";
  };
  const Alone slow_host = alone(engine(big)), fast_host = alone(engine(small));
  // The prefill follows an idle spell: GPU + 1 ms of host.
  EXPECT_NEAR(slow_host.its[0].duration.ms(), gpu.its[0].duration.ms() + 1.0, kNs);
  for (size_t i = 1; i < 4; ++i) {
    EXPECT_NEAR(slow_host.its[i].duration.ms(), big, 1e-3) << i;           // host-bound
    EXPECT_NEAR(fast_host.its[i].duration.ms(), gpu.its[i].duration.ms(), kNs) << i;  // GPU-bound
  }
  // Synchronous, the same host time adds up.
  const Alone sync = alone("kind = \"none\"\nschedule_ms = 1\ndecode_schedule_ms = " + std::to_string(small) + "\n");
  EXPECT_NEAR(sync.its[1].duration.ms(), gpu.its[1].duration.ms() + small, 1e-3);
}

// launch() memoises decode-only batches by size: for every shape, engine and layer count it must
// give the same launch and the same bits as prepare(), host_seconds() and iteration_seconds(),
// whatever was asked before (a memo keyed by too little would serve another shape's value).
TEST(EngineModelTest, LaunchMemoGivesTheUnmemoisedTermsForEveryShape) {
  auto expect_same = [](const EngineModel& e, const BatchShape& shape, int64_t layers) {
    BatchShape plain = shape, fast = shape;
    plain.launch = fast.launch = LaunchMode::kFullGraph;  // prepare() overwrites what a shape brings
    plain.graph_tokens = fast.graph_tokens = 999;
    e.prepare(plain);
    const EngineModel::IterationTerms t = e.launch(fast, layers);
    EXPECT_EQ(fast.launch, plain.launch);
    EXPECT_EQ(fast.graph_tokens, plain.graph_tokens);
    EXPECT_EQ(t.host_s, e.host_seconds(plain, layers));
    for (bool idle : {false, true})
      for (double gpu : {1e-4, 2e-2})
        EXPECT_EQ(e.iteration_seconds(gpu, t, idle), e.iteration_seconds(gpu, plain, layers, idle));
  };
  for (CudaGraphMode graphs : {CudaGraphMode::kNone, CudaGraphMode::kFullDecode, CudaGraphMode::kPiecewise,
                               CudaGraphMode::kFullAndPiecewise})
    for (int64_t ranks : {1, 3}) {
      EngineModel e;
      e.graphs = graphs;
      e.max_graph_tokens = 24;
      e.data_parallel = ranks;
      e.schedule_s = 1e-3;
      e.decode_schedule_s = 0.3e-3;
      e.schedule_s_per_seq = 7e-6;
      e.layer_s = 11e-6;
      e.decode_layer_s = 5e-6;
      e.sample_s = 0.2e-3;
      e.sample_s_per_seq = 3e-6;
      e.async_scheduling = ranks == 3;
      SCOPED_TRACE("graphs " + std::string(cuda_graph_mode_name(graphs)) + ", ranks " + std::to_string(ranks));
      // Twice over (the second pass is served from the memo), each size with two layer counts.
      for (int pass = 0; pass < 2; ++pass)
        for (int64_t seqs = 0; seqs <= 40; ++seqs)
          for (int64_t layers : {32, 61}) {
            BatchShape decode;
            add_decodes(decode, AttentionLimits{}, seqs, 100);
            expect_same(e, decode, layers);
            // Shapes of the same decode size that differ elsewhere: prefill work, a completed prompt,
            // speculative drafts.
            BatchShape mixed = decode;
            add_prefill_chunk(mixed, AttentionLimits{}, 0, 5, seqs % 2 == 0);
            expect_same(e, mixed, layers);
            BatchShape drafts = decode;
            drafts.decode_extra_tokens = 2 * seqs;
            drafts.decode_extra_pairs = 2 * seqs * 101;
            expect_same(e, drafts, layers);
          }
    }
  // A hand value: 8 decodes on 32 layers, eager: 0.3 ms + 8 x 7 us + 32 x 5 us of host time.
  EngineModel e;
  e.decode_schedule_s = 0.3e-3;
  e.schedule_s_per_seq = 7e-6;
  e.decode_layer_s = 5e-6;
  BatchShape s;
  add_decodes(s, AttentionLimits{}, 8, 10);
  EXPECT_NEAR(e.launch(s, 32).host_s, 0.3e-3 + 8 * 7e-6 + 32 * 5e-6, 1e-15);
  EXPECT_NEAR(e.launch(s, 32).host_s, 0.3e-3 + 8 * 7e-6 + 32 * 5e-6, 1e-15);
  // A copy is another engine: it may be given other parameters, and must not answer from the memo.
  EngineModel copy = e;
  copy.decode_schedule_s = 0.5e-3;
  EXPECT_NEAR(copy.launch(s, 32).host_s, 0.5e-3 + 8 * 7e-6 + 32 * 5e-6, 1e-15);
  copy = e;
  copy.decode_layer_s = 0;
  EXPECT_NEAR(copy.launch(s, 32).host_s, 0.3e-3 + 8 * 7e-6, 1e-15);
}

TEST(EngineModelTest, PresetsProfilesAndWrittenKeys) {
  ASSERT_NE(engine_registry().find("vllm-v1"), nullptr);
  // A profile's fitted [engine.vllm-v1] values replace the preset's, its [overhead] host times
  // the preset's host times; a key written in [engine] wins over both; `none` takes nothing from it.
  CalibrationProfile p;
  p.gpu = "h100-sxm";
  p.iteration_overhead_ms = 4.0;
  p.engine["vllm-v1"] = {{"api_server_ms", 9.0}, {"schedule_ms", 3.0}, {"async_scheduling", 1.0}};
  const std::vector<core::ParamSpec> schema = {core::ParamSpec::section("engine", "engines", "vllm-v1", "e")};
  auto make = [&](const std::string& text, const CalibrationProfile* profile) {
    return *engine_registry().make(core::parse_config(text, "e.toml", schema).section("engine"), profile);
  };
  const EngineModel fitted = make("", &p);
  EXPECT_DOUBLE_EQ(fitted.api_server_s, 9e-3);
  EXPECT_DOUBLE_EQ(fitted.schedule_s, 3e-3);        // [engine.vllm-v1] beats [overhead]
  EXPECT_TRUE(fitted.async_scheduling);
  p.engine.clear();
  EXPECT_DOUBLE_EQ(make("", &p).schedule_s, 4e-3);  // [overhead] when the engine table lacks it
  const EngineModel written = make("[engine]\nschedule_ms = 0.25\nasync_scheduling = false\n", &p);
  EXPECT_DOUBLE_EQ(written.schedule_s, 0.25e-3);
  EXPECT_FALSE(written.async_scheduling);
  const EngineModel none = make("[engine]\nkind = \"none\"\n", &p);
  EXPECT_DOUBLE_EQ(none.schedule_s, 0);
  EXPECT_EQ(none.graphs, CudaGraphMode::kNone);
  EXPECT_EQ(make("", nullptr).graphs, CudaGraphMode::kFullAndPiecewise);
}

TEST(EngineModelTest, ProfileEngineTablesRoundTripAndRejectWhatIsNotAnEngineParameter) {
  CalibrationProfile p;
  p.gpu = "h100-sxm";
  p.engine["vllm-v1"] = {{"api_server_ms", 7.25}, {"stream_ms", 1.5}, {"async_scheduling", 1.0}};
  const std::string text = calibration_profile_toml(p);
  EXPECT_NE(text.find("[engine.vllm-v1]"), std::string::npos) << text;
  EXPECT_NE(text.find("async_scheduling = true"), std::string::npos) << text;
  const CalibrationProfile back = parse_calibration_profile(text, "p.toml");
  EXPECT_EQ(back.engine, p.engine);
  auto field = [&](const std::string& bad) {
    try {
      parse_calibration_profile(text + bad, "p.toml");
    } catch (const core::InputError& e) {
      return e.field();
    }
    return std::string("accepted");
  };
  EXPECT_EQ(field("[engine.sglang-9]\napi_server_ms = 1\n"), "engine.sglang-9");
  EXPECT_EQ(field("[engine.none]\nwarp_speed = 1\n"), "engine.none.warp_speed");
  EXPECT_EQ(field("[engine.none]\ncuda_graphs = 1\n"), "engine.none.cuda_graphs");  // not a fitted number
  EXPECT_EQ(field("[engine.none]\nstream_ms = -1\n"), "engine.none.stream_ms");
}

}  // namespace
}  // namespace servesim::hwmodels
