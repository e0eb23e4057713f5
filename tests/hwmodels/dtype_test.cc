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
  // fp4 with one 8-bit scale per 32 weights (mxfp4, 4.25 bits) or per 16 (nvfp4, 4.5 bits).
  EXPECT_DOUBLE_EQ(dtype_bytes(DType::kMxfp4), 0.53125);
  EXPECT_DOUBLE_EQ(dtype_bytes(DType::kNvfp4), 0.5625);
  EXPECT_TRUE(is_quantized(DType::kMxfp4));
  EXPECT_TRUE(is_four_bit(DType::kNvfp4));
  EXPECT_FALSE(is_four_bit(DType::kFp8));
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
  // nvfp4 runs W4A4 at the fp4 rate where there are fp4 tensor cores (B200: 9000 TFLOP/s dense),
  // weight-only at the 16-bit rate elsewhere; mxfp4 (gpt-oss's experts) is served weight-only.
  const GpuSpec& b200 = gpu_preset("b200");
  EXPECT_DOUBLE_EQ(b200.fp4_peak_flops, 9000e12);
  EXPECT_DOUBLE_EQ(b200.gemm_peak(DType::kNvfp4), 9000e12);
  EXPECT_DOUBLE_EQ(b200.gemm_peak(DType::kMxfp4), 2250e12);
  EXPECT_DOUBLE_EQ(h100.gemm_peak(DType::kNvfp4), 989e12);
}

}  // namespace
}  // namespace servesim::hwmodels
