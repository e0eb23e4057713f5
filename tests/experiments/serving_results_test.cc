// Reading real serving-benchmark results (experiments/serving_results.h): a small hand-written file
// of each format, with the harmonised figures computed by hand, and the shared serving-runs table.
#include "experiments/serving_results.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "sim/core/error.h"
#include "tests/test_paths.h"

namespace servesim::experiments {
namespace {

using servesim::testing::TempDir;

const char* kTable =
    "experiment\thf_model\ttp\tgpu\tmax_model_len\tmax_num_batched_tokens\tmax_num_seqs\tworkload\tsystem_prompt_len\t"
    "question_len\tmax_tokens\tstage\trate\tduration_s\tsent\tsucceeded\tfailed\tprompt_len_mean\tprompt_len_min\t"
    "prompt_len_max\tttft_s_mean\tttft_s_median\tttft_s_p90\tttft_s_p99\te2e_s_mean\te2e_s_median\te2e_s_p90\te2e_s_p99\t"
    "tpot_reported_s_mean\ttpot_reported_s_median\ttpot_reported_s_p90\ttpot_reported_s_p99\titl_reported_s_mean\t"
    "itl_reported_s_median\titl_reported_s_p90\titl_reported_s_p99\tthroughput_req_s\tthroughput_output_tok_s\n"
    "exp-a\tmeta-llama/Llama-2-7b-hf\t1\th100-sxm\t4096\t2048\t128\tgeneral\t100\t447\t11\t1\t20\t600\t12000\t12000\t0\t575.5"
    "\t559\t592\t0.05\t0.051\t0.06\t0.07\t4.1\t4.0\t4.7\t5.2\t0.004\t0.0039\t0.0045\t0.005\t0.004\t3e-05\t0.018\t0.021"
    "\t19.9\t4156\n"
    "exp-a\tmeta-llama/Llama-2-7b-hf\t1\th100-sxm\t4096\t2048\t128\tgeneral\t100\t447\t11\t0\t8\t600\t4800\t4800\t0\t575.5"
    "\t559\t592\t0.027\t0.026\t0.031\t0.036\t2.0\t2.0\t2.2\t2.4\t0.002\t0.002\t0.0022\t0.0024\t0.002\t3e-05\t0.008\t0.009"
    "\t7.9\t1675\n"
    "exp-b\tmistralai/Mixtral-8x7B-v0.1\t2\th100-sxm\t4096\t2048\t128\treasoning\t100\t934\t1448\t0\t4\t1200\t4800\t732"
    "\t4068\t1082\t1055\t1108\t106\t91\t215\t246\t160\t156\t263\t289\t0.018\t0.014\t0.027\t0.028\t0.018\t9e-05\t0.027"
    "\t0.068\t0.49\t537\n";

TEST(ServingResultsTest, ServingRunsTableHarmonisedToTheEnginesTimes) {
  const auto stages = parse_serving_runs_table(kTable, "t.tsv");
  ASSERT_EQ(stages.size(), 3u);
  const MeasuredStage& s = stages[0];
  EXPECT_EQ(s.label, "exp-a stage 1");
  EXPECT_EQ(s.source, "t.tsv:2");
  EXPECT_EQ(s.model, "meta-llama/Llama-2-7b-hf");
  EXPECT_EQ(s.gpu, "h100-sxm");
  EXPECT_EQ(s.tensor_parallel, 1);
  EXPECT_EQ(s.max_num_batched_tokens, 2048);
  EXPECT_EQ(s.max_num_seqs, 128);
  EXPECT_EQ(s.workload.system_prompt_len, 100);
  EXPECT_EQ(s.workload.question_len, 447);
  EXPECT_EQ(s.workload.max_tokens, 11);
  EXPECT_DOUBLE_EQ(s.workload.prompt_len_mean, 575.5);
  EXPECT_DOUBLE_EQ(s.load.rate, 20);
  EXPECT_DOUBLE_EQ(s.load.duration_s, 600);
  EXPECT_EQ(s.load.shape, ArrivalShape::kPoissonFixedCount);
  // Stage 0 of the same experiment ran before it, on the same server.
  ASSERT_EQ(s.earlier.size(), 1u);
  EXPECT_DOUBLE_EQ(s.earlier[0].rate, 8);
  EXPECT_TRUE(stages[1].earlier.empty());
  // TTFT and E2E as reported; the line-stamped time per output token x (2n + 1) / (n - 1) = 23 / 10.
  EXPECT_DOUBLE_EQ(*s.ttft.mean, 0.05);
  EXPECT_DOUBLE_EQ(*s.e2e.p99, 5.2);
  EXPECT_DOUBLE_EQ(*s.tpot.mean, 0.004 * 23 / 10);
  EXPECT_DOUBLE_EQ(*s.tpot.p90, 0.0045 * 23 / 10);
  EXPECT_DOUBLE_EQ(*s.itl.mean, 0.004 * 23 / 10);
  EXPECT_FALSE(s.itl.p50) << "the reported ITL percentiles mean nothing";
  EXPECT_FALSE(s.corrections.empty());
  EXPECT_FALSE(s.overloaded());
  EXPECT_TRUE(stages[2].overloaded());
  EXPECT_EQ(stages[2].failed, 4068);
}

TEST(ServingResultsTest, ServingRunsTableErrorsNameTheLineAndField) {
  auto field_of = [](const std::string& text) {
    try {
      parse_serving_runs_table(text, "t.tsv");
    } catch (const core::InputError& e) {
      return std::to_string(e.line()) + ":" + e.field();
    }
    return std::string("accepted");
  };
  std::string no_rate = kTable;
  no_rate.replace(no_rate.find("\trate\t"), 6, "\tspeed\t");
  EXPECT_EQ(field_of(no_rate), "1:rate");
  std::string bad_number = kTable;
  bad_number.replace(bad_number.find("\t0.05\t"), 6, "\tfast\t");
  EXPECT_EQ(field_of(bad_number), "2:ttft_s_mean");
  std::string one_token = kTable;
  one_token.replace(one_token.find("\t11\t1\t20\t"), 9, "\t1\t1\t20\t");
  EXPECT_EQ(field_of(one_token), "2:max_tokens");
}

// inference-perf's lifecycle-metrics JSON of one stage; its client stamps every streamed line, which
// shows as an ITL median far below the mean (the blank lines' microsecond gaps).
const char* kInferencePerfStage = R"({"load_summary": {"count": 60, "send_duration": 57.5, "requested_rate": 1.0,
 "achieved_rate": 1.04},
 "successes": {"count": 59, "latency": {
   "request_latency": {"mean": 1.16, "median": 1.17, "p90": 1.22, "p99": 1.25},
   "time_per_output_token": {"mean": 0.0044, "median": 0.0044, "p90": 0.0045, "p99": 0.0047},
   "time_to_first_token": {"mean": 0.042, "median": 0.0419, "p90": 0.048, "p99": 0.052},
   "inter_token_latency": {"mean": 0.0044, "median": 9.7e-05, "p90": 0.0089, "p99": 0.011}},
  "throughput": {"requests_per_sec": 1.02, "output_tokens_per_sec": 131.5},
  "prompt_len": {"mean": 135.0, "min": 132.0, "max": 141.0},
  "output_len": {"mean": 129.0, "min": 124.0, "max": 133.0}},
 "failures": {"count": 1, "request_latency": null}})";

TEST(ServingResultsTest, InferencePerfStageJson) {
  const MeasuredStage s = parse_inference_perf_json(kInferencePerfStage, "stage_0_lifecycle_metrics.json");
  EXPECT_EQ(s.format, "inference-perf");
  EXPECT_DOUBLE_EQ(s.load.rate, 1.0);
  EXPECT_DOUBLE_EQ(s.load.duration_s, 57.5);
  EXPECT_EQ(s.load.requests, 60);
  EXPECT_EQ(s.succeeded, 59);
  EXPECT_EQ(s.failed, 1);
  EXPECT_DOUBLE_EQ(*s.ttft.p50, 0.0419);
  EXPECT_DOUBLE_EQ(*s.e2e.mean, 1.16);
  // n = 129: x 259 / 128.
  EXPECT_DOUBLE_EQ(*s.tpot.mean, 0.0044 * 259 / 128);
  EXPECT_DOUBLE_EQ(*s.itl.mean, 0.0044 * 259 / 128);
  EXPECT_FALSE(s.itl.p99);
  EXPECT_DOUBLE_EQ(s.workload.prompt_len_mean, 135.0);
  EXPECT_EQ(s.workload.max_tokens, 133);
  EXPECT_DOUBLE_EQ(*s.throughput_req_s, 1.02);
  // A client that stamps tokens, not lines: nothing to correct.
  std::string plain = kInferencePerfStage;
  plain.replace(plain.find("9.7e-05"), 7, "0.0043");
  const MeasuredStage p = parse_inference_perf_json(plain, "s.json");
  EXPECT_DOUBLE_EQ(*p.tpot.mean, 0.0044);
  EXPECT_DOUBLE_EQ(*p.itl.p99, 0.011);
  EXPECT_TRUE(p.corrections.empty());
}

TEST(ServingResultsTest, InferencePerfDirectoryRunsItsStagesInOrder) {
  TempDir dir;
  for (int i : {1, 0, 10}) {
    std::string text = kInferencePerfStage;
    text.replace(text.find("\"requested_rate\": 1.0"), 21, "\"requested_rate\": " + std::to_string(i + 1) + ".0");
    std::ofstream(dir.file("stage_" + std::to_string(i) + "_lifecycle_metrics.json")) << text;
  }
  std::ofstream(dir.file("summary_lifecycle_metrics.json")) << kInferencePerfStage;
  const auto stages = read_serving_results(dir.path());
  ASSERT_EQ(stages.size(), 3u);
  EXPECT_EQ(stages[0].stage, 0);
  EXPECT_EQ(stages[1].stage, 1);
  EXPECT_EQ(stages[2].stage, 10);
  EXPECT_DOUBLE_EQ(stages[2].load.rate, 11.0);
  ASSERT_EQ(stages[2].earlier.size(), 2u);
  EXPECT_DOUBLE_EQ(stages[2].earlier[1].rate, 2.0);
}

const char* kVllmBench = R"({"date": "20260101-000000", "backend": "vllm", "model_id": "meta-llama/Llama-3.1-8B",
 "num_prompts": 4, "request_rate": "inf", "burstiness": 1.0, "max_concurrency": 2, "duration": 3.5,
 "completed": 3, "total_input_tokens": 300, "total_output_tokens": 60,
 "request_throughput": 0.857, "output_throughput": 17.1,
 "mean_ttft_ms": 25.0, "median_ttft_ms": 24.0, "p99_ttft_ms": 40.0,
 "mean_tpot_ms": 8.0, "median_tpot_ms": 7.9, "p99_tpot_ms": 9.5,
 "mean_itl_ms": 8.1, "median_itl_ms": 7.8, "p99_itl_ms": 15.0,
 "mean_e2el_ms": 180.0, "median_e2el_ms": 175.0, "p99_e2el_ms": 220.0,
 "input_lens": [90, 100, 110], "output_lens": [10, 20, 30]})";

TEST(ServingResultsTest, VllmBenchServeJson) {
  const MeasuredStage s = parse_vllm_bench_json(kVllmBench, "bench.json");
  EXPECT_EQ(s.format, "vllm-bench");
  EXPECT_EQ(s.model, "meta-llama/Llama-3.1-8B");
  EXPECT_EQ(s.load.shape, ArrivalShape::kClosedLoop);  // rate inf, 2 concurrent clients
  EXPECT_EQ(s.load.concurrency, 2);
  EXPECT_EQ(s.load.requests, 4);
  EXPECT_EQ(s.succeeded, 3);
  EXPECT_EQ(s.failed, 1);
  EXPECT_DOUBLE_EQ(*s.ttft.mean, 0.025);
  EXPECT_DOUBLE_EQ(*s.tpot.p50, 0.0079);
  EXPECT_DOUBLE_EQ(*s.e2e.p99, 0.220);
  EXPECT_FALSE(s.e2e.p90);
  EXPECT_EQ(s.workload.input_lens, (std::vector<int64_t>{90, 100, 110}));
  EXPECT_DOUBLE_EQ(s.workload.prompt_len_mean, 100.0);
  EXPECT_DOUBLE_EQ(s.workload.output_len_mean, 20.0);
  EXPECT_TRUE(s.corrections.empty());
  // A finite rate is Poisson; burstiness b != 1 makes the gaps gamma.
  std::string poisson = kVllmBench;
  poisson.replace(poisson.find("\"inf\""), 5, "12.5");
  poisson.replace(poisson.find("\"max_concurrency\": 2"), 20, "\"max_concurrency\": null");
  EXPECT_EQ(parse_vllm_bench_json(poisson, "b.json").load.shape, ArrivalShape::kPoisson);
  EXPECT_DOUBLE_EQ(parse_vllm_bench_json(poisson, "b.json").load.rate, 12.5);
  std::string bursty = poisson;
  bursty.replace(bursty.find("\"burstiness\": 1.0"), 17, "\"burstiness\": 0.25");
  EXPECT_EQ(parse_vllm_bench_json(bursty, "b.json").load.shape, ArrivalShape::kGamma);
}

TEST(ServingResultsTest, FormatsAreDetectedAndBadFilesNamed) {
  TempDir dir;
  std::ofstream(dir.file("t.tsv")) << kTable;
  std::ofstream(dir.file("b.json")) << kVllmBench;
  std::ofstream(dir.file("i.json")) << kInferencePerfStage;
  std::ofstream(dir.file("broken.json")) << "{\n\"mean_ttft_ms\": 25.0,\n\"duration\": }\n";
  std::ofstream(dir.file("other.txt")) << "hello\n";
  EXPECT_EQ(read_serving_results(dir.file("t.tsv")).size(), 3u);
  EXPECT_EQ(read_serving_results(dir.file("b.json"))[0].format, "vllm-bench");
  EXPECT_EQ(read_serving_results(dir.file("i.json"))[0].format, "inference-perf");
  try {
    read_serving_results(dir.file("broken.json"));
    FAIL() << "malformed JSON accepted";
  } catch (const core::InputError& e) {
    EXPECT_EQ(e.line(), 3);
  }
  EXPECT_THROW(read_serving_results(dir.file("other.txt")), core::InputError);
  EXPECT_THROW(read_serving_results(dir.file("missing.json")), core::InputError);
}

// The shared serving runs: 12 stages of 8 experiments; Llama-2-7B general at 20 req/s decodes at
// 8.25867 ms x 497 / 247 = 16.62 ms a token.
TEST(ServingResultsTest, SharedServingRuns) {
  const std::string path = servesim::testing::shared_file("reference-data/serving-runs/stages.tsv");
  ASSERT_TRUE(std::filesystem::exists(path)) << "reference data missing: " << path;
  const auto stages = read_serving_results(path);
  ASSERT_EQ(stages.size(), 12u);
  int overloaded = 0;
  for (const MeasuredStage& s : stages) {
    overloaded += s.overloaded();
    if (s.label == "llama-2-7b-tp1-general stage 1") {
      EXPECT_NEAR(*s.tpot.mean * 1e3, 16.62, 0.01);
      EXPECT_EQ(s.earlier.size(), 1u);
    }
  }
  EXPECT_EQ(overloaded, 2);  // the two reasoning runs
}

}  // namespace
}  // namespace servesim::experiments
