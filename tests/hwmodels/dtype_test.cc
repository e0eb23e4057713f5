#include "hwmodels/dtype.h"

#include <gtest/gtest.h>

#include "hwmodels/gpu_spec.h"

namespace servesim::hwmodels {
namespace {

TEST(DtypeTest, BytesPerElement) {
  EXPECT_DOUBLE_EQ(dtype_bytes(DType::kFp32), 4.0);
  EXPECT_DOUBLE_EQ(dtype_bytes(DType::kFp16), 2.0);
  EXPECT_DOUBLE_EQ(dtype_bytes(DType::kBf16), 2.0);
  EXPECT_DOUBLE_EQ(dtype_bytes(DType::kFp8), 1.0);
  EXPECT_DOUBLE_EQ(dtype_bytes(DType::kInt8), 1.0);
  // Half a byte plus an fp16 scale and a 4-bit zero point per 128 weights.
  EXPECT_DOUBLE_EQ(dtype_bytes(DType::kInt4), 0.51953125);
}

TEST(DtypeTest, NamesRoundTripAndHuggingFaceSpellings) {
  for (const auto& name : dtype_names()) EXPECT_EQ(dtype_name(*parse_dtype(name)), name);
  EXPECT_EQ(parse_dtype("bfloat16"), DType::kBf16);
  EXPECT_EQ(parse_dtype("Float16"), DType::kFp16);
  EXPECT_EQ(parse_dtype("float8_e4m3fn"), DType::kFp8);
  EXPECT_EQ(parse_dtype("int3"), std::nullopt);
  EXPECT_TRUE(is_quantized(DType::kInt4));
  EXPECT_FALSE(is_quantized(DType::kBf16));
}

TEST(DtypeTest, GemmPeakFollowsTheTensorCoresTheGpuHas) {
  GpuSpec h100;
  h100.peak_flops = 989e12;
  h100.fp8_peak_flops = 1979e12;
  h100.int8_peak_ops = 1979e12;
  EXPECT_DOUBLE_EQ(h100.gemm_peak(DType::kBf16), 989e12);
  EXPECT_DOUBLE_EQ(h100.gemm_peak(DType::kFp8), 1979e12);
  EXPECT_DOUBLE_EQ(h100.gemm_peak(DType::kInt4), 989e12);  // weight-only: dequantised to 16 bits
  GpuSpec a100 = h100;
  a100.fp8_peak_flops = 0;  // no fp8 tensor cores: fp8 weights run weight-only
  EXPECT_DOUBLE_EQ(a100.gemm_peak(DType::kFp8), 989e12);
}

}  // namespace
}  // namespace servesim::hwmodels
