#include "hwmodels/dtype.h"

#include "sim/core/format.h"

namespace servesim::hwmodels {

double dtype_bytes(DType t) {
  switch (t) {
    case DType::kFp32: return 4.0;
    case DType::kFp16:
    case DType::kBf16: return 2.0;
    case DType::kFp8:
    case DType::kInt8: return 1.0;
    case DType::kInt4: return 0.5 + kInt4GroupMetadataBytes / kInt4GroupSize;
    case DType::kMxfp4: return 0.5 + 1.0 / kMxfp4BlockSize;
    case DType::kNvfp4: return 0.5 + 1.0 / kNvfp4BlockSize;
  }
  return 2.0;
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::kFp32: return "fp32";
    case DType::kFp16: return "fp16";
    case DType::kBf16: return "bf16";
    case DType::kFp8: return "fp8";
    case DType::kInt8: return "int8";
    case DType::kInt4: return "int4";
    case DType::kMxfp4: return "mxfp4";
    case DType::kNvfp4: return "nvfp4";
  }
  return "fp16";
}

std::optional<DType> parse_dtype(std::string_view name) {
  const std::string n = core::to_lower(name);
  if (n == "fp32" || n == "float32" || n == "float") return DType::kFp32;
  if (n == "fp16" || n == "float16" || n == "half") return DType::kFp16;
  if (n == "bf16" || n == "bfloat16") return DType::kBf16;
  if (n == "fp8" || n == "float8_e4m3fn" || n == "float8_e4m3" || n == "e4m3") return DType::kFp8;
  if (n == "int8") return DType::kInt8;
  if (n == "int4") return DType::kInt4;
  if (n == "mxfp4") return DType::kMxfp4;
  if (n == "nvfp4") return DType::kNvfp4;
  return std::nullopt;
}

const std::vector<std::string>& dtype_names() {
  static const std::vector<std::string> names = {"fp32", "fp16", "bf16", "fp8", "int8", "int4", "mxfp4", "nvfp4"};
  return names;
}

bool is_quantized(DType t) { return t == DType::kFp8 || t == DType::kInt8 || is_four_bit(t); }

}  // namespace servesim::hwmodels
