// Errors a person can act on (issue 14): a value is shown short and with its invisible characters
// escaped, wherever it is echoed (a kind, a choice, a key, a --set argument); a key without its unit
// or with a word left off gets a "did you mean". Generated over invisible characters, lengths and
// every parameter name the registries declare.
#include <gtest/gtest.h>

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "experiments/run.h"
#include "sim/core/config.h"
#include "sim/core/error.h"
#include "sim/core/format.h"
#include "sim/core/params.h"

namespace servesim::core {
namespace {

const std::string kBase =
    "[workload]\nkind = \"poisson\"\nrate = 5\nmax_requests = 10\n[workload.prompt]\nkind = \"fixed\"\nvalue = 10\n"
    "[workload.output]\nkind = \"fixed\"\nvalue = 5\n[model]\nkind = \"llama-3-8b\"\n[gpu]\nkind = \"h100-sxm\"\n";

std::string error_of(const std::vector<std::string>& sets, const std::string& text = kBase) {
  try {
    parse_config(text, "run.toml", experiments::run_schema(), sets);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

// Invisible characters as UTF-8, with the escape a message shows for each.
const std::vector<std::pair<std::string, std::string>> kInvisible = {
    {"\xEF\xBB\xBF", "\\uFEFF"}, {"\xE2\x80\x8B", "\\u200B"}, {"\xE2\x80\x8C", "\\u200C"}, {"\xE2\x80\x8D", "\\u200D"},
    {"\xE2\x80\x8E", "\\u200E"}, {"\xE2\x80\x8F", "\\u200F"}, {"\xE2\x81\xA0", "\\u2060"}, {"\xC2\xA0", "\\u00A0"},
    {"\xE2\x80\xAE", "\\u202E"}, {"\xC2\xAD", "\\u00AD"}};

TEST(MessagesTest, InvisibleCharactersAreShownEscapedAndTheMeantWordIsSuggested) {
  const std::vector<std::pair<std::string, std::string>> places = {
      {"model.kind", "llama-3-8b"}, {"router.kind", "least_outstanding"}, {"cluster.preemption", "swap"},
      {"gpu.kind", "h100-sxm"}};
  for (const auto& [key, word] : places)
    for (const auto& [ch, escape] : kInvisible)
      for (size_t at : {size_t{0}, size_t{1}, word.size()}) {
        std::string value = word;
        value.insert(at, ch);
        SCOPED_TRACE(key + " with " + escape + " at " + std::to_string(at));
        const std::string m = error_of({key + "=" + value});
        ASSERT_FALSE(m.empty()) << "accepted";
        EXPECT_NE(m.find(escape), std::string::npos) << m;
        EXPECT_NE(m.find("invisible"), std::string::npos) << m;
        EXPECT_NE(m.find("did you mean '" + word + "'"), std::string::npos) << m;
        EXPECT_EQ(m.find(ch), std::string::npos) << "the raw character is in the message: " << m;
      }
}

TEST(MessagesTest, LongValuesAreCutShortWhereverTheyAreEchoed) {
  for (size_t n : {size_t{100}, size_t{1000}, size_t{100000}, size_t{1000000}}) {
    const std::string big(n, 'q');
    for (const auto& m : {error_of({"model.kind=" + big}), error_of({"cluster.preemption=" + big}),
                          error_of({"router." + big + "=1"}),
                          error_of({}, kBase + "[router]\nkind = \"" + big + "\"\n"),
                          error_of({}, kBase + "[scheduler]\n" + big + " = 3\n")}) {
      SCOPED_TRACE(std::to_string(n) + ": " + m.substr(0, 200));
      ASSERT_FALSE(m.empty());
      EXPECT_LT(m.size(), 1200u);
      if (n > 200) {
        EXPECT_NE(m.find("more bytes)"), std::string::npos);
      }
    }
  }
}

TEST(MessagesTest, ControlCharactersAndBrokenUtf8NeverReachTheTerminal) {
  for (unsigned c = 0; c < 256; ++c) {
    if (c == '"' || c == '\\' || (c >= 0x20 && c < 0x7f)) continue;
    const std::string value = std::string("rou") + static_cast<char>(c) + "nd_robin";
    const std::string m = error_of({"router.kind=" + value});
    if (m.empty()) continue;  // TOML may refuse the byte itself, which parse_config also reports
    for (unsigned char ch : m) EXPECT_TRUE(ch >= 0x20 && ch != 0x7f) << "byte " << c << ": " << m;
  }
}

// Every declared parameter name that ends in a unit or has several words: its first part alone (the
// name without "_ms", "_gb_s", ...) is answered with the full name when that is the only candidate.
TEST(MessagesTest, AKeyWithoutItsUnitGetsADidYouMean) {
  int checked = 0;
  for (const KindFamily* family : all_families())
    for (const KindInfo* kind : family->kinds()) {
      std::vector<std::string> names;
      for (const auto& s : kind->params) names.push_back(s.name);
      for (const auto& name : names) {
        const size_t cut = name.rfind('_');
        if (cut == std::string::npos || cut < 3) continue;
        const std::string stem = name.substr(0, cut);
        int starting = 0;
        for (const auto& n : names) starting += n.rfind(stem + "_", 0) == 0 || n == stem;
        if (starting != 1) continue;
        SCOPED_TRACE(family->name() + "/" + kind->name + ": " + stem);
        const std::string hint = did_you_mean(stem, names);
        EXPECT_EQ(hint, " (did you mean '" + name + "'?)");
        ++checked;
      }
    }
  EXPECT_GE(checked, 40);
  EXPECT_NE(error_of({"slo.ttft=500"}).find("did you mean 'ttft_ms'"), std::string::npos);
  EXPECT_NE(error_of({"slo.e2e=500"}).find("did you mean 'e2e_ms'"), std::string::npos);
}

TEST(MessagesTest, PrintableKeepsTextAndEscapesTheRest) {
  EXPECT_EQ(printable("plain text, ünïcödé"), "plain text, ünïcödé");
  EXPECT_EQ(printable(std::string("a\x00" "b\n\xff", 5)), "a\\x00b\\x0a\\xff");
  EXPECT_EQ(in_quotes("\xEF\xBB\xBFx"), "'\\uFEFFx' (with invisible characters, shown escaped)");
  EXPECT_EQ(in_quotes(std::string(90, 'z'), 10), "'zzzzzzzzzz'... (80 more bytes)");
  EXPECT_EQ(visible("\xEF\xBB\xBFll\xE2\x80\x8B" "ama\x01"), "llama");
}

}  // namespace
}  // namespace servesim::core
