#pragma once
// Storage and compute data types of weights and of the KV cache: their bytes per element and the
// tensor-core rate a GEMM on them runs at.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace servesim::hwmodels {

enum class DType {
  kFp32,
  kFp16,
  kBf16,
  kFp8,   // e4m3; as weights: W8A8 on GPUs with fp8 tensor cores, weight-only (Marlin) elsewhere
  kInt8,  // as weights: W8A8 (SmoothQuant-style) on the int8 tensor cores
  kInt4,  // weights only: W4A16 (GPTQ/AWQ), dequantised in the GEMM, which runs at the 16-bit rate
  // OCP microscaling fp4 (e2m1) with one 8-bit power-of-two scale per 32 weights: gpt-oss's experts.
  // Served weight-only (W4A16: engines' default MoE kernels dequantise it and multiply in 16 bits).
  kMxfp4,
  // NVIDIA's fp4 (e2m1) with one fp8 (e4m3) scale per 16 weights (and a per-tensor fp32 scale):
  // W4A4, the activations quantised to nvfp4 too, at the fp4 tensor-core rate of Blackwell GPUs;
  // weight-only (16-bit rate) on GPUs without fp4 tensor cores.
  kNvfp4,
};

// Group-wise quantisation metadata of int4 weights: an fp16 scale and a 4-bit zero point per group
// of 128 weights (GPTQ's and AWQ's default), 2.5 bytes per 128 weights on top of the 0.5 bytes.
inline constexpr double kInt4GroupSize = 128.0;
inline constexpr double kInt4GroupMetadataBytes = 2.0 + 0.5;
// The block scales of the fp4 formats: one byte per 32 weights (mxfp4's e8m0) or per 16 (nvfp4's e4m3).
inline constexpr double kMxfp4BlockSize = 32.0;
inline constexpr double kNvfp4BlockSize = 16.0;

// Bytes one element occupies: 4, 2, 2, 1, 1, 0.5 + 2.5/128 = 0.51953125 for int4, 0.5 + 1/32 =
// 0.53125 for mxfp4 (4.25 bits) and 0.5 + 1/16 = 0.5625 for nvfp4 (4.5 bits) (the per-tensor or
// per-block scales of fp8/int8 are below 0.03% and left out).
double dtype_bytes(DType t);
// Canonical name: "fp32", "fp16", "bf16", "fp8", "int8", "int4", "mxfp4", "nvfp4".
std::string_view dtype_name(DType t);
// Accepts the canonical names and Hugging Face's torch_dtype spellings ("float16", "bfloat16",
// "float32", "float8_e4m3fn"); case ignored. nullopt for anything else.
std::optional<DType> parse_dtype(std::string_view name);
// The canonical names, for ParamSpec::one_of.
const std::vector<std::string>& dtype_names();
// True for the 8- and 4-bit types, whose weights a checkpoint quantises in the transformer blocks'
// linear layers only (embeddings, LM head and norms stay in the 16-bit dtype).
bool is_quantized(DType t);

}  // namespace servesim::hwmodels

namespace servesim::hwmodels {
// The 4-bit weight formats (int4, mxfp4, nvfp4): never a KV-cache or state type.
inline bool is_four_bit(DType t) { return t == DType::kInt4 || t == DType::kMxfp4 || t == DType::kNvfp4; }
}  // namespace servesim::hwmodels
