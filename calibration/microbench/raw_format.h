#pragma once
// The raw-sample files the CUDA microbenchmarks write and `servesim fit --from-microbench` reads:
// one CSV per benchmark in the output directory. This header is plain C++17 with no CUDA and no
// servesim dependency, so the microbenchmarks (built by nvcc alone on a GPU machine), the fitting
// code and the tests share one definition of every file and column.
//
// Times are seconds per call (the median over repetitions), sizes bytes, shapes element counts.

namespace servesim::calibration::raw {

// key,value rows: name, sm_count, memory_bytes, l2_bytes, compute_capability, cuda_runtime,
// driver, visible_gpus, clock_khz, memory_clock_khz, memory_bus_bits, and servesim_gpu when the
// run was told the catalogue name (--gpu).
inline constexpr const char* kDeviceFile = "device.csv";
inline constexpr const char* kDeviceHeader = "key,value";

// GEMM Y[m, n] = X[m, k] W[n, k]^T (a linear layer), dtype fp16, bf16 or fp8 (e4m3, W8A8 with
// bf16 output).
inline constexpr const char* kGemmFile = "gemm.csv";
inline constexpr const char* kGemmHeader = "dtype,m,n,k,seconds,reps";

// Memory-bound kernels by family: read and copy (HBM streaming), rms_norm, rope, act
// (SiLU-and-multiply), add (residual), embedding (row gather). bytes = what the kernel must move.
// l2_resident: 0 when every call's buffers rotated out of L2 (planning.h), as serving finds them;
// 1 only for rows that measure data held in L2 on purpose (the L2 read ceiling), which the fit
// does not cap at the HBM bandwidth.
inline constexpr const char* kStreamFile = "stream.csv";
inline constexpr const char* kStreamHeader = "kernel,rows,width,bytes,seconds,reps,l2_resident";

// Decode attention over a paged KV cache (one layer, fp16): batch sequences of `context` tokens,
// heads query heads in kv_heads groups, head_dim, block_size tokens per page. kv_bytes = K and V
// read.
inline constexpr const char* kDecodeAttentionFile = "attention_decode.csv";
inline constexpr const char* kDecodeAttentionHeader = "batch,context,heads,kv_heads,head_dim,block_size,kv_bytes,seconds,reps";

// Causal prefill attention (one layer, fp16): batch sequences of seq tokens. flops = 4 x head_dim x
// heads x batch x seq (seq + 1) / 2 (the causal half of QK^T and PV).
inline constexpr const char* kPrefillAttentionFile = "attention_prefill.csv";
inline constexpr const char* kPrefillAttentionHeader = "batch,seq,heads,kv_heads,head_dim,flops,seconds,reps";

// Launch costs (launch.cu), measured so that the host's launch queue cannot limit them:
//   host_launch_kernel  CPU seconds of one cudaLaunchKernel call (empty kernel), the GPU held busy so
//                       that no call waits for a queue slot;
//   gpu_kernel_stream   GPU seconds per empty kernel launched back to back on a stream, every launch
//                       queued before the GPU reached the first;
//   host_launch_graph   CPU seconds of one cudaGraphLaunch of a one-node graph, as host_launch_kernel;
//   gpu_kernel_graph    GPU seconds per node of a replayed graph of empty kernels;
//   graph_replay_idle   wall seconds from cudaGraphLaunch of a one-node graph to cudaStreamSynchronize
//                       returning, the GPU idle before it.
// `reps` is the number of trials whose median is given.
inline constexpr const char* kLaunchFile = "launch.csv";
inline constexpr const char* kLaunchHeader = "kind,seconds,reps";

// NCCL all-reduce (fp16 sum, in place) over `gpus` GPUs of one node, and send/recv between two.
inline constexpr const char* kAllReduceFile = "allreduce.csv";
inline constexpr const char* kAllReduceHeader = "gpus,bytes,seconds,reps";
inline constexpr const char* kSendRecvFile = "sendrecv.csv";
inline constexpr const char* kSendRecvHeader = "bytes,seconds,reps";

// Pinned host <-> device copies: direction h2d or d2h.
inline constexpr const char* kHostCopyFile = "hostcopy.csv";
inline constexpr const char* kHostCopyHeader = "direction,bytes,seconds,reps";

// Correctness of the project's own kernels against simple reference kernels on small inputs:
// check name, largest absolute error, 1 when within tolerance.
inline constexpr const char* kChecksFile = "checks.csv";
inline constexpr const char* kChecksHeader = "check,max_abs_error,ok";

}  // namespace servesim::calibration::raw
