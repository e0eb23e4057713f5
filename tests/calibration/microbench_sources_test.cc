// The CUDA microbenchmarks never ran on a GPU while they were written, so their error handling has
// to be right by reading. This test reads them (calibration/microbench/*.cu, *.cuh) and fails on
// any CUDA, cuBLAS or NCCL call whose status is not checked, and on any kernel launch not followed
// by MB_CHECK_LAUNCH(). It first proves on snippets that it catches each kind of omission.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "tests/test_paths.h"

namespace servesim::calibration {
namespace {

// Comments and string and character literals blanked out (newlines kept, so offsets keep their
// line numbers): only code is searched.
std::string code_only(const std::string& s) {
  std::string out = s;
  size_t i = 0;
  auto blank = [&](size_t from, size_t to) {
    for (size_t k = from; k < to && k < out.size(); ++k)
      if (out[k] != '\n') out[k] = ' ';
  };
  while (i < s.size()) {
    if (s.compare(i, 2, "//") == 0) {
      const size_t end = std::min(s.find('\n', i), s.size());
      blank(i, end);
      i = end;
    } else if (s.compare(i, 2, "/*") == 0) {
      const size_t end = std::min(s.find("*/", i + 2) + 2, s.size());
      blank(i, end);
      i = end;
    } else if (s[i] == '"' || s[i] == '\'') {
      const char quote = s[i];
      size_t j = i + 1;
      while (j < s.size() && s[j] != quote) j += s[j] == '\\' ? 2 : 1;
      blank(i + 1, j);
      i = j + 1;
    } else {
      ++i;
    }
  }
  return out;
}

size_t line_of(const std::string& s, size_t offset) {
  return 1 + static_cast<size_t>(std::count(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(offset), '\n'));
}

// The offset just past the bracket matching the one at `open` ('(' or '<<<'), or npos.
size_t past_matching_paren(const std::string& s, size_t open) {
  int depth = 0;
  for (size_t i = open; i < s.size(); ++i) {
    if (s[i] == '(') ++depth;
    if (s[i] == ')' && --depth == 0) return i + 1;
  }
  return std::string::npos;
}

size_t skip_space(const std::string& s, size_t i) {
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return i;
}

// The library's status types and the macros that check them, by call prefix.
struct Family {
  const char* prefix;
  const char* status_type;
  const char* status_values;  // a regex of the status constants
  std::vector<std::string> macros;
};
const std::vector<Family> kFamilies = {
    {"cuda", "cudaError_t", "cuda(Success|Error\\w+)", {"MB_CUDA", "MB_CUDA_NOTHROW"}},
    {"cublas", "cublasStatus_t", "CUBLAS_STATUS_\\w+", {"MB_LT", "MB_LT_NOTHROW"}},
    {"nccl", "ncclResult_t", "nccl(Success|\\w+Error)", {"MB_NCCL", "MB_NCCL_NOTHROW"}},
};
// Calls that return no status (error strings).
const std::vector<std::string> kNoStatus = {"cudaGetErrorString", "cudaGetErrorName", "cublasLtGetStatusString",
                                            "cublasLtGetStatusName", "ncclGetErrorString"};

// Every unchecked call and unchecked launch in `source`, as "NAME:LINE: what". A call is checked when
// it is the whole argument of its family's check macro (MB_CUDA(cudaFoo(...))), or when its status
// is assigned (`STATUS_TYPE x = cudaFoo(...);` or `x = cudaFoo(...);` with x declared of that
// type) and x is afterwards compared with a status constant or passed to a check macro. A launch
// (`<<<...>>>(...);`) must be followed by MB_CHECK_LAUNCH();
std::vector<std::string> unchecked(const std::string& text, const std::string& name) {
  const std::string s = code_only(text);
  std::vector<std::string> problems;
  auto report = [&](size_t at, const std::string& what) {
    problems.push_back(name + ":" + std::to_string(line_of(s, at)) + ": " + what);
  };
  static const std::regex call_re(R"(\b((cuda|cublas|nccl)\w*)\s*\()");
  for (auto it = std::sregex_iterator(s.begin(), s.end(), call_re); it != std::sregex_iterator(); ++it) {
    const std::string fn = (*it)[1];
    const size_t at = static_cast<size_t>(it->position(0));
    const size_t open = at + static_cast<size_t>(it->length(0)) - 1;
    if (fn.size() > 2 && fn.compare(fn.size() - 2, 2, "_t") == 0) continue;  // a type: cast or conversion
    if (std::find(kNoStatus.begin(), kNoStatus.end(), fn) != kNoStatus.end()) continue;
    const Family& fam = *std::find_if(kFamilies.begin(), kFamilies.end(), [&](const Family& f) {
      return fn.compare(0, std::string(f.prefix).size(), f.prefix) == 0;
    });
    const size_t close = past_matching_paren(s, open);
    if (close == std::string::npos) {
      report(at, fn + " has no closing parenthesis");
      continue;
    }
    // What precedes the call on its statement (a window is enough: statements are short).
    const std::string before = s.substr(at > 300 ? at - 300 : 0, at > 300 ? 300 : at);
    const size_t after = skip_space(s, close);
    bool ok = false;
    // (a) The whole argument of a check macro of its family.
    for (const std::string& macro : fam.macros)
      if (std::regex_search(before, std::regex("(^|[^\\w])" + macro + "\\(\\s*$")) && after < s.size() && s[after] == ')')
        ok = true;
    // (b) Assigned to a variable of the family's status type, compared with a status value or passed
    // to a check macro afterwards.
    std::smatch m;
    static const std::regex assigned(R"((\w+)\s*=\s*$)");
    if (!ok && std::regex_search(before, m, assigned) && after < s.size() && s[after] == ';') {
      const std::string var = m[1];
      const std::regex declared("\\b" + std::string(fam.status_type) + "\\s+" + var + "\\b");
      std::string checks = "\\b" + var + "\\s*(!=|==)\\s*" + fam.status_values + "|\\b(";
      for (size_t k = 0; k < fam.macros.size(); ++k) checks += (k ? "|" : "") + fam.macros[k];
      checks += ")\\(\\s*" + var + "\\s*\\)";
      const std::string rest = s.substr(after);
      ok = std::regex_search(s, declared) && std::regex_search(rest, std::regex(checks));
    }
    if (!ok) report(at, fn + "(...)'s status is not checked");
  }
  for (size_t at = s.find("<<<"); at != std::string::npos; at = s.find("<<<", at + 3)) {
    const size_t chevrons = s.find(">>>", at);
    const size_t args = chevrons == std::string::npos ? chevrons : skip_space(s, chevrons + 3);
    const size_t close = args == std::string::npos || s[args] != '(' ? std::string::npos : past_matching_paren(s, args);
    const size_t semi = close == std::string::npos ? close : skip_space(s, close);
    if (semi == std::string::npos || s[semi] != ';') {
      report(at, "a kernel launch that does not end in ');'");
      continue;
    }
    const size_t next = skip_space(s, semi + 1);
    if (s.compare(next, std::string("MB_CHECK_LAUNCH();").size(), "MB_CHECK_LAUNCH();") != 0)
      report(at, "a kernel launch not followed by MB_CHECK_LAUNCH();");
  }
  return problems;
}

TEST(MicrobenchSourcesTest, TheCheckerFindsEveryKindOfOmission) {
  // Checked forms pass.
  EXPECT_TRUE(unchecked("void f() { MB_CUDA(cudaFree(p)); MB_CUDA_NOTHROW(cudaStreamDestroy(s)); }", "ok").empty());
  EXPECT_TRUE(unchecked("void f() { MB_LT(cublasLtCreate(&h)); MB_NCCL(ncclGroupEnd()); }", "ok").empty());
  EXPECT_TRUE(unchecked("void f() { k<<<1, 32, 0, s>>>(a, f(b)); MB_CHECK_LAUNCH(); }", "ok").empty());
  EXPECT_TRUE(unchecked("void f() { const cudaError_t st = cudaEventQuery(e);\n if (st == cudaErrorNotReady) return; "
                        "MB_CUDA(st); }",
                        "ok")
                  .empty());
  EXPECT_TRUE(unchecked("void f() { cudaError_t st = cudaSetDevice(0); if (st == cudaSuccess) st = cudaFoo(); "
                        "if (st != cudaSuccess) g(cudaGetErrorString(st)); }",
                        "ok")
                  .empty());
  EXPECT_TRUE(unchecked("// cudaFree(p);\nconst char* s = \"cudaFree(p)\"; operator cudaStream_t() const;", "ok").empty());

  // Each omission is found, with its line.
  EXPECT_EQ(unchecked("void f() {\n  cudaFree(p);\n}", "a.cu"),
            std::vector<std::string>{"a.cu:2: cudaFree(...)'s status is not checked"});
  EXPECT_EQ(unchecked("void f() { (void)cudaGetLastError(); }", "a.cu").size(), 1u);
  EXPECT_EQ(unchecked("void f() { if (cudaMalloc(&p, 4) != cudaSuccess) return; }", "a.cu").size(), 1u);
  EXPECT_EQ(unchecked("void f() { MB_CUDA(cudaFree(p) == cudaSuccess ? x : y); }", "a.cu").size(), 1u);
  EXPECT_EQ(unchecked("void f() { MB_CUDA(cublasLtCreate(&h)); }", "a.cu").size(), 1u);  // the wrong family's macro
  EXPECT_EQ(unchecked("void f() { XMB_CUDA(cudaFree(p)); }", "a.cu").size(), 1u);
  EXPECT_EQ(unchecked("void f() { cudaError_t st = cudaFree(p); }", "a.cu").size(), 1u);  // assigned, never looked at
  EXPECT_EQ(unchecked("void f() { int st = cudaFree(p); if (st != 0) g(); }", "a.cu").size(), 1u);  // not a status type
  EXPECT_EQ(unchecked("void f() { cublasLtMatmul(h, d); ncclAllReduce(a, b); }", "a.cu").size(), 2u);
  EXPECT_EQ(unchecked("void f() {\n  k<<<1, 32>>>(a);\n  MB_CUDA(cudaFree(p));\n}", "a.cu"),
            std::vector<std::string>{"a.cu:2: a kernel launch not followed by MB_CHECK_LAUNCH();"});
  EXPECT_EQ(unchecked("void f() { k<<<1, 32>>>(a); g(); MB_CHECK_LAUNCH(); }", "a.cu").size(), 1u);
}

std::string read(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(MicrobenchSourcesTest, EveryCudaCublasAndNcclStatusIsChecked) {
  const std::string src = servesim::testing::source_dir();
  ASSERT_FALSE(src.empty()) << "SERVESIM_SOURCE_DIR is not set (tests/meson.build sets it)";
  const std::filesystem::path dir = std::filesystem::path(src) / "calibration" / "microbench";
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".cu" || e.path().extension() == ".cuh") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  ASSERT_GE(files.size(), 7u) << dir;  // main, memory, attention, launch, gemm, collectives .cu + common.cuh
  size_t calls = 0, launches = 0;
  for (const auto& f : files) {
    const std::string text = read(f);
    for (const std::string& problem : unchecked(text, f.filename().string())) ADD_FAILURE() << problem;
    const std::string code = code_only(text);
    static const std::regex call_re(R"(\b(MB_CUDA|MB_CUDA_NOTHROW|MB_LT|MB_LT_NOTHROW|MB_NCCL|MB_NCCL_NOTHROW)\(\s*(cuda|cublas|nccl))");
    calls += static_cast<size_t>(std::distance(std::sregex_iterator(code.begin(), code.end(), call_re), std::sregex_iterator()));
    for (size_t at = code.find("<<<"); at != std::string::npos; at = code.find("<<<", at + 3)) ++launches;
  }
  // The scan saw the code it is meant to (a scanner that matched nothing would pass vacuously).
  EXPECT_GE(calls, 80u);
  EXPECT_GE(launches, 20u);

  // And the macros check: they compare with the success value and report call, file:line and the
  // library's error string.
  const std::string common = read(dir / "common.cuh");
  for (const char* needle : {"#define MB_CUDA(call)", "mb_err_ != cudaSuccess", "cudaGetErrorString(mb_err_)",
                             "#call", "__FILE__", "__LINE__", "#define MB_CHECK_LAUNCH() MB_CUDA(cudaGetLastError())"})
    EXPECT_NE(common.find(needle), std::string::npos) << needle;
  const std::string gemm = read(dir / "gemm.cu");
  EXPECT_NE(gemm.find("mb_st_ != CUBLAS_STATUS_SUCCESS"), std::string::npos);
  const std::string nccl = read(dir / "collectives.cu");
  EXPECT_NE(nccl.find("mb_r_ != ncclSuccess"), std::string::npos);
}

}  // namespace
}  // namespace servesim::calibration
