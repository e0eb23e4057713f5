// The readers of measured data: CSV, operator tables, collectives, step latencies, microbenchmark
// raw files. Errors name file, line and column; garbage raises core::InputError and nothing else.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "calibration/csv.h"
#include "calibration/microbench/raw_format.h"
#include "calibration/microbench_samples.h"
#include "calibration/operator_csv.h"
#include "calibration/step_latency_csv.h"
#include "sim/core/error.h"
#include "sim/core/rng.h"
#include "tests/test_paths.h"

namespace servesim::calibration {
namespace {

template <class F>
core::InputError input_error(F&& f) {
  try {
    f();
  } catch (const core::InputError& e) {
    return e;
  }
  ADD_FAILURE() << "no InputError";
  return core::InputError("", 0, "", "");
}

const char* kMlp =
    "time_stats.attn_pre_proj.median,time_stats.add.median,n_head,n_kv_head,n_embd,n_expanded_embd,vocab_size,"
    "use_gated_mlp,num_tokens,num_tensor_parallel_workers\n"
    "0.5,0.03,32,8,4096,14336,128256,True,4096,1\n"
    "\r\n"
    "0.04,0.002,32,8,4096,14336,128256,True,16,2\r\n";

TEST(ReadersTest, CsvDialect) {
  const CsvTable t = parse_csv("\xEF\xBB\xBF" "a,\"b,c\",d\r\n1,\"x \"\"y\"\"\",3\n\n", "f.csv");
  EXPECT_EQ(t.header, (std::vector<std::string>{"a", "b,c", "d"}));
  ASSERT_EQ(t.rows.size(), 1u);
  EXPECT_EQ(t.rows[0][1], "x \"y\"");
  EXPECT_EQ(t.lines[0], 2);
  EXPECT_DOUBLE_EQ(t.number(0, 0), 1.0);
  EXPECT_EQ(input_error([&] { t.number(0, 1); }).field(), "b,c");
  EXPECT_EQ(input_error([] { parse_csv("a,b\n1\n", "f.csv"); }).line(), 2);
  EXPECT_EQ(input_error([] { parse_csv("a\n\"open\n", "f.csv"); }).line(), 2);
  EXPECT_THROW(parse_csv("", "f.csv"), core::InputError);
  EXPECT_THROW(read_text_file("/no/such/file.csv"), core::InputError);
}

TEST(ReadersTest, OperatorTable) {
  const OperatorTable t = parse_operator_csv(kMlp, "mlp.csv", "Meta-Llama-3-8B");
  EXPECT_EQ(t.ops, (std::vector<std::string>{"attn_pre_proj", "add"}));
  ASSERT_EQ(t.rows.size(), 2u);
  EXPECT_EQ(t.rows[1].line, 4);
  EXPECT_EQ(t.rows[1].tensor_parallel, 2);
  EXPECT_DOUBLE_EQ(t.rows[0].median_ms.at("attn_pre_proj"), 0.5);
  EXPECT_EQ(t.model.hidden_size, 4096);
  EXPECT_EQ(t.model.head_dim, 128);
  EXPECT_EQ(t.model.num_kv_heads, 8);
  EXPECT_TRUE(t.model.gated_mlp);

  std::string bad = kMlp;
  bad.replace(bad.find("0.04"), 4, "fast");
  const core::InputError e = input_error([&] { parse_operator_csv(bad, "mlp.csv"); });
  EXPECT_EQ(e.line(), 4);
  EXPECT_EQ(e.field(), "time_stats.attn_pre_proj.median");
  std::string other_model = kMlp;
  other_model.replace(other_model.rfind("4096,14336"), 4, "5120");
  EXPECT_EQ(input_error([&] { parse_operator_csv(other_model, "mlp.csv"); }).field(), "n_embd");
  EXPECT_EQ(input_error([] { parse_operator_csv("num_tokens\n1\n", "mlp.csv"); }).field(), "time_stats.<op>.median");
  std::string zero = kMlp;
  zero.replace(zero.find("0.03"), 4, "0");
  EXPECT_EQ(input_error([&] { parse_operator_csv(zero, "mlp.csv"); }).line(), 2);
}

TEST(ReadersTest, CollectiveTable) {
  const char* text =
      ",time_stats.all_reduce.min,time_stats.all_reduce.median,rank,num_workers,size,collective,devices_per_node\n"
      "0,0.01,0.02,0,2,2048,all_reduce,2\n"
      "1,0.01,0.5,0,8,67108864,all_reduce,8\n";
  const auto rows = parse_collective_csv(text, "all_reduce.csv");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1].gpus, 8);
  EXPECT_DOUBLE_EQ(rows[1].bytes, 67108864);
  EXPECT_DOUBLE_EQ(rows[0].median_ms, 0.02);
  std::string bad = text;
  bad.replace(bad.find("all_reduce,2"), 10, "broadcast");
  EXPECT_EQ(input_error([&] { parse_collective_csv(bad, "x.csv"); }).field(), "collective");
}

TEST(ReadersTest, ReferenceDataLayout) {
  const std::string root = servesim::testing::shared_file("reference-data/operator-profiles");
  ASSERT_TRUE(!servesim::testing::shared_dir().empty() && std::filesystem::exists(root)) << "reference data missing: " << root;
  const OperatorData h100 = read_operator_dir(root, "h100-sxm");
  EXPECT_EQ(h100.tables.size(), 2u);
  EXPECT_FALSE(h100.all_reduce.empty());
  EXPECT_FALSE(h100.send_recv.empty());
  for (const auto& t : h100.tables) EXPECT_EQ(t.rows.size(), 1044u) << t.model_name;
  const OperatorData without = read_operator_dir(root, "h100-sxm", {"Llama-2-7b-hf"});
  ASSERT_EQ(without.tables.size(), 1u);
  EXPECT_EQ(without.tables[0].model_name, "Llama-2-70b-hf");
  const core::InputError e = input_error([&] { read_operator_dir(root, "l40s"); });
  EXPECT_NE(std::string(e.what()).find("a100"), std::string::npos) << e.what();  // lists what there is
}

TEST(ReadersTest, StepLatencies) {
  const char* text =
      "model,gpu,tp,batch,prompt,prefill_ms,decode_step_ms\n"
      "llama-3-8b,H100-SXM,1,8,1024,120.5,9.5\n"
      "llama-3-8b,h100-sxm,1,32,512,,11\n";
  const auto rows = parse_step_latency_csv(text, "s.csv");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].gpu, "h100-sxm");
  EXPECT_DOUBLE_EQ(*rows[0].prefill_ms, 120.5);
  EXPECT_FALSE(rows[1].prefill_ms.has_value());
  EXPECT_DOUBLE_EQ(*rows[1].decode_step_ms, 11);
  std::string two_gpus = text;
  two_gpus.replace(two_gpus.rfind("h100-sxm"), 8, "a100-80gb-sxm");
  const core::InputError e = input_error([&] { parse_step_latency_csv(two_gpus, "s.csv"); });
  EXPECT_EQ(e.field(), "gpu");
  EXPECT_EQ(e.line(), 3);
  EXPECT_EQ(input_error([] { parse_step_latency_csv("model,gpu,tp,batch,prompt,prefill_ms,decode_step_ms\nm,g,1,1,1,,\n", "s"); })
                .field(),
            "prefill_ms");
  EXPECT_EQ(input_error([] { parse_step_latency_csv("model,gpu,tp,batch,prompt,prefill_ms,decode_step_ms\nm,g,0,1,1,1,\n", "s"); })
                .field(),
            "tp");
  EXPECT_EQ(input_error([] { parse_step_latency_csv("model,gpu,tp,batch,prompt,prefill_ms\n", "s"); }).field(),
            "decode_step_ms");
}

TEST(ReadersTest, MicrobenchFiles) {
  using namespace raw;
  MicrobenchRun run;
  parse_microbench_file(kGemmFile, std::string(kGemmHeader) + "\nbf16,16,4096,4096,1.5e-5,20\n", "gemm.csv", run);
  ASSERT_EQ(run.gemm.size(), 1u);
  EXPECT_DOUBLE_EQ(run.gemm[0].k, 4096);
  EXPECT_EQ(input_error([&] { parse_microbench_file(kGemmFile, "dtype,m,n\n", "gemm.csv", run); }).line(), 1);
  EXPECT_EQ(input_error([&] {
              parse_microbench_file(kGemmFile, std::string(kGemmHeader) + "\nfp4,16,4096,4096,1e-5,20\n", "gemm.csv", run);
            }).field(),
            "dtype");
  EXPECT_EQ(input_error([&] {
              parse_microbench_file(kStreamFile, std::string(kStreamHeader) + "\nadd,1,4096,24576,-1,5,0\n", "s.csv", run);
            }).field(),
            "seconds");
  EXPECT_EQ(input_error([&] {
              parse_microbench_file(kStreamFile, std::string(kStreamHeader) + "\nadd,1,4096,24576,1e-5,5,2\n", "s.csv", run);
            }).field(),
            "l2_resident");
  // The header without l2_resident (samples from before the rotation) is refused.
  EXPECT_EQ(input_error([&] {
              parse_microbench_file(kStreamFile, "kernel,rows,width,bytes,seconds,reps\nadd,1,4096,24576,1e-5,5\n", "s.csv",
                                    run);
            }).line(),
            1);
  // Decode layouts are whole numbers, query heads a multiple of KV heads.
  const std::string decode = std::string(kDecodeAttentionHeader) + "\n";
  EXPECT_EQ(input_error([&] { parse_microbench_file(kDecodeAttentionFile, decode + "4,512,32,8.5,128,16,1e6,1e-5,20\n", "d.csv", run); })
                .field(),
            "kv_heads");
  EXPECT_EQ(input_error([&] { parse_microbench_file(kDecodeAttentionFile, decode + "4,512,28,8,128,16,1e6,1e-5,20\n", "d.csv", run); })
                .field(),
            "kv_heads");
  EXPECT_EQ(input_error([&] { parse_microbench_file(kDecodeAttentionFile, decode + "4,512,28,4,0,16,1e6,1e-5,20\n", "d.csv", run); })
                .field(),
            "head_dim");
  parse_microbench_file(kStreamFile, std::string(kStreamHeader) + "\nread,1,1048576,1048576,1e-6,20,1\n", "s.csv", run);
  ASSERT_EQ(run.streams.size(), 1u);
  EXPECT_TRUE(run.streams[0].l2_resident);
  EXPECT_THROW(parse_microbench_file("other.csv", "a\n", "other.csv", run), core::InputError);
  parse_microbench_file(kDeviceFile, std::string(kDeviceHeader) + "\nname,NVIDIA H100 80GB HBM3\n", "device.csv", run);
  EXPECT_EQ(gpu_of_run(run), "h100-sxm");
  run.device["name"] = "NVIDIA H200";
  EXPECT_EQ(gpu_of_run(run), "h200");
  run.device["servesim_gpu"] = "H100-PCIe";
  EXPECT_EQ(gpu_of_run(run), "h100-pcie");
  EXPECT_THROW(read_microbench_dir("/no/such/dir"), core::InputError);
}

// Random edits of valid inputs: every reader either parses or raises core::InputError.
TEST(ReadersTest, GarbageOnlyRaisesInputErrors) {
  core::Rng rng(5, "calibration-readers");
  const std::string step = "model,gpu,tp,batch,prompt,prefill_ms,decode_step_ms\nllama-3-8b,h100-sxm,1,8,1024,120.5,9.5\n";
  const std::string gemm = std::string(raw::kGemmHeader) + "\nbf16,16,4096,4096,1.5e-5,20\nfp8,1,1024,8192,3e-6,20\n";
  const std::string collective =
      "size,num_workers,devices_per_node,collective,time_stats.all_reduce.median\n2048,2,2,all_reduce,0.02\n";
  for (int i = 0; i < 1500; ++i) {
    for (int which = 0; which < 4; ++which) {
      std::string text = which == 0 ? kMlp : which == 1 ? step : which == 2 ? gemm : collective;
      for (int e = 0; e < 1 + static_cast<int>(rng.uniform_int(3)); ++e) {
        const size_t at = static_cast<size_t>(rng.uniform_int(text.size()));
        const char c = ",\n\"0123456789.e-+ aTF"[rng.uniform_int(19)];
        if (rng.uniform_int(2)) text[at] = c;
        else text.erase(at, 1 + static_cast<size_t>(rng.uniform_int(5)));
      }
      try {
        MicrobenchRun run;
        if (which == 0) parse_operator_csv(text, "mlp.csv");
        if (which == 1) parse_step_latency_csv(text, "s.csv");
        if (which == 2) parse_microbench_file(raw::kGemmFile, text, "gemm.csv", run);
        if (which == 3) parse_collective_csv(text, "c.csv");
      } catch (const core::InputError&) {
      }
    }
  }
}

}  // namespace
}  // namespace servesim::calibration
