#pragma once
// The raw samples of the CUDA microbenchmarks (calibration/microbench/, file formats in
// microbench/raw_format.h) and the profile fitted to them.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "calibration/fit.h"
#include "hwmodels/calibration_profile.h"
#include "hwmodels/gpu_spec.h"

namespace servesim::calibration {

struct MicrobenchRun {
  std::string dir;
  std::map<std::string, std::string> device;  // device.csv
  struct Gemm { int64_t line; std::string dtype; double m, n, k, seconds; };
  struct Stream { int64_t line; std::string kernel; double rows, width, bytes, seconds; bool l2_resident; };
  struct DecodeAttention { int64_t line; double batch, context, heads, kv_heads, head_dim, block_size, kv_bytes, seconds; };
  struct PrefillAttention { int64_t line; double batch, seq, heads, kv_heads, head_dim, flops, seconds; };
  struct Launch { int64_t line; std::string kind; double seconds; };
  struct Message { int64_t line; int64_t gpus; double bytes, seconds; };
  struct HostCopy { int64_t line; std::string direction; double bytes, seconds; };
  struct Check { int64_t line; std::string check; double max_abs_error; bool ok; };
  std::vector<Gemm> gemm;
  std::vector<Stream> streams;
  std::vector<DecodeAttention> decode_attention;
  std::vector<PrefillAttention> prefill_attention;
  std::vector<Launch> launch;
  std::vector<Message> all_reduce, send_recv;
  std::vector<HostCopy> host_copy;
  std::vector<Check> checks;
  std::vector<std::string> files;  // the files read
};

// Parses one raw file by its name (raw_format.h: "gemm.csv", "stream.csv", ...) into `run`.
// Throws core::InputError naming the file, line and column (a wrong header, a non-numeric or
// non-positive value, an unknown kernel or dtype); nothing else. Unknown file names are an error
// too. The fuzz entry point for the microbenchmark readers.
void parse_microbench_file(std::string_view file_name, std::string_view text, const std::string& source_name,
                           MicrobenchRun& run);
// Reads every raw file present in `dir` (device.csv and at least one sample file are required).
MicrobenchRun read_microbench_dir(const std::string& dir);

// The catalogue name of the GPU the run measured: device.csv's servesim_gpu, else the CUDA device
// name mapped to a preset ("NVIDIA H200" -> "h200", "NVIDIA H100 80GB HBM3" -> "h100-sxm", ...);
// "" when neither says.
std::string gpu_of_run(const MicrobenchRun& run);

// Every table the run measured, fitted (fit.h's conventions), plus attention curves, launch costs
// and host-copy bandwidth. Sections whose correctness check failed are left out and said so in the
// description.
hwmodels::CalibrationProfile fit_microbench_profile(const MicrobenchRun& run, const hwmodels::GpuSpec& gpu,
                                                    const std::string& source);

}  // namespace servesim::calibration
