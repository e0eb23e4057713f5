#pragma once
// Measured operator tables in the Vidur format (shared/reference-data/operator-profiles, SOURCE.md):
// compute/<gpu>/<org>/<model>/mlp.csv, one row per (num_tokens, tensor-parallel degree) with the
// time of one layer's operators on one shard (time_stats.<op>.median, ms), and
// network/<node>/{all_reduce,send_recv}.csv with NCCL times by message size and GPU count.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "hwmodels/model_spec.h"

namespace servesim::calibration {

// One row of an mlp.csv.
struct OperatorRow {
  int64_t line = 0;
  int64_t num_tokens = 0;
  int64_t tensor_parallel = 0;
  std::map<std::string, double> median_ms;  // by operator name
};

struct OperatorTable {
  std::string source;      // the file
  std::string model_name;  // the directory holding mlp.csv (e.g. "Llama-2-7b-hf")
  hwmodels::ModelSpec model;  // from the table's model columns: one fp16 layer
  std::vector<std::string> ops;  // operator names with a median column, in file order
  std::vector<OperatorRow> rows;
};

// Parses an mlp.csv. Requires the model columns (n_head, n_kv_head, n_embd, n_expanded_embd,
// vocab_size, use_gated_mlp), num_tokens, num_tensor_parallel_workers and at least one
// time_stats.<op>.median column; every row must describe the same model. Throws core::InputError
// naming the file, the line and the column; nothing else. The fuzz entry point for this reader.
OperatorTable parse_operator_csv(std::string_view text, const std::string& source_name,
                                 const std::string& model_name = "");
OperatorTable read_operator_csv(const std::string& path);

// One row of an all_reduce.csv or send_recv.csv.
struct CollectiveRow {
  int64_t line = 0;
  std::string collective;    // "all_reduce", "send_recv"
  int64_t gpus = 0;          // num_workers
  int64_t gpus_per_node = 0; // devices_per_node: equal to gpus within one NVLink node
  double bytes = 0;          // message size
  double median_ms = 0;
  double min_ms = 0;         // the fastest repetition (= median_ms when the table has no min column)
};

// Parses a network CSV (columns num_workers, size, devices_per_node, and
// time_stats.<collective>.median with collective taken from the `collective` column). Same error
// contract as parse_operator_csv.
std::vector<CollectiveRow> parse_collective_csv(std::string_view text, const std::string& source_name);
std::vector<CollectiveRow> read_collective_csv(const std::string& path);

// What a --from-operator-csv directory holds for one GPU.
struct OperatorData {
  std::vector<OperatorTable> tables;
  std::vector<CollectiveRow> all_reduce, send_recv;
  std::vector<std::string> files;  // everything read, for the profile's source note
};

// Finds and reads the tables under `dir`. In the Vidur layout (compute/ and network/ below `dir`)
// only compute/<short>/ and network/<short>_dgx/ are read, <short> being the GPU name up to its
// first '-' ("a100-80gb-sxm" -> "a100"); otherwise every mlp.csv, all_reduce.csv and send_recv.csv
// below `dir`. Models named in `exclude` (their directory names) are skipped. core::InputError
// when nothing usable is found.
OperatorData read_operator_dir(const std::string& dir, const std::string& gpu_name,
                               const std::vector<std::string>& exclude = {});

}  // namespace servesim::calibration
