// Hostile inputs through the real binary: every bad input the reliability issue lists, each run as a
// user would (`servesim run ...` in a directory holding the files, with a time limit), checked for
// the exit code, a one-paragraph message naming the file, line and field, no crash, no hang, and no
// partial output (a results database and a CSV directory holding an earlier run are left exactly as
// they were). The same runs generate docs/errors.md; the test fails when the file differs from what
// the binary says today. Regenerate it with
//   SERVESIM_UPDATE_DOCS=1 meson test -C <build> servesim_tests --test-args=--gtest_filter='Errors*'
#include <gtest/gtest.h>

#include <SQLiteCpp/SQLiteCpp.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/reliability/process.h"
#include "tests/test_paths.h"

namespace servesim::testing {
namespace {

namespace fs = std::filesystem;

constexpr double kTimeoutS = 60;  // generous for the sanitizer build; a healthy case takes < 1 s

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void spit(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

// ---- the inputs ------------------------------------------------------------------------------------

const char* kModelGpu = "[model]\nkind = \"llama-3-8b\"\n[gpu]\nkind = \"h100-sxm\"\n";

std::string azure_config() { return std::string("[workload]\nkind = \"azure_csv\"\npath = \"trace.csv\"\n") + kModelGpu; }
std::string mooncake_config() {
  return std::string("[workload]\nkind = \"mooncake_jsonl\"\npath = \"trace.jsonl\"\n") + kModelGpu;
}
std::string poisson_config(const std::string& extra_workload = "", const std::string& tail = "") {
  return "[workload]\nkind = \"poisson\"\nrate = 10\nmax_requests = 20\n" + extra_workload +
         "[workload.prompt]\nkind = \"fixed\"\nvalue = 100\n[workload.output]\nkind = \"fixed\"\nvalue = 10\n" +
         kModelGpu + tail;
}

const char* kCsvHeader = "TIMESTAMP,ContextTokens,GeneratedTokens\n";
// Five good rows (lines 2-6), so that a bad line 7 fails a run that has already started writing.
std::string csv_rows() {
  std::string s;
  for (int i = 0; i < 5; ++i) s += "2023-11-16 18:15:4" + std::to_string(i) + ".5000000,100,20\n";
  return s;
}
std::string csv_with(const std::string& line7) { return kCsvHeader + csv_rows() + line7 + "\n"; }
// A synthetic workload whose lengths come from lengths.json (a JSON array), sent offline; `arrival`
// replaces the arrival section.
std::string length_file_config(const std::string& format = "json",
                               const std::string& arrival = "[workload.arrival]\nkind = \"offline\"\nrequests = 20\n") {
  std::string t = "[workload]\nkind = \"synthetic\"\n";
  for (const char* field : {"prompt", "output"})
    t += std::string("[workload.") + field + "]\nkind = \"empirical\"\npath = \"lengths." + format +
         "\"\nformat = \"" + format + "\"\nfield = \"" + field + "\"\n";
  return t + arrival + kModelGpu;
}
std::string jsonl_line(const std::string& ts, const std::string& in, const std::string& out) {
  return "{\"timestamp\": " + ts + ", \"input_length\": " + in + ", \"output_length\": " + out +
         ", \"hash_ids\": [1, 2]}\n";
}
std::string jsonl_rows() {
  std::string s;
  for (int i = 0; i < 6; ++i) s += jsonl_line(std::to_string(i * 1000), "100", "20");
  return s;
}
std::string jsonl_with(const std::string& line7) { return jsonl_rows() + line7 + "\n"; }

struct ErrorCase {
  std::string id;       // stable name, also the test-case name in messages
  std::string input;    // the bad input, for the table
  std::vector<std::pair<std::string, std::string>> files;  // name -> content; a name ending in '/' is a directory
  std::vector<std::string> args;  // after `servesim`; --db results.db --csv csv are added unless outputs_given
  int exit_code = 0;
  std::vector<std::string> needles{};  // must appear in the message (file:line, field, ...)
  std::string note{};   // how the input is handled, for the table
  bool outputs_given = false;
};

std::vector<ErrorCase> cases() {
  const std::vector<std::string> run_azure = {"run", "run.toml"};
  std::vector<ErrorCase> c;
  auto add = [&](ErrorCase e) { c.push_back(std::move(e)); };

  // Missing and empty files.
  add({"missing_trace", "missing file (trace)", {{"run.toml", azure_config()}}, run_azure, 2,
       {"run.toml:3:8", "workload.path", "no such file: trace.csv"}});
  add({"missing_config", "missing file (configuration)", {}, {"run", "nothere.toml"}, 1, {"nothere.toml"}});
  add({"empty_csv", "empty file (Azure CSV)", {{"run.toml", azure_config()}, {"trace.csv", ""}}, run_azure, 1,
       {"trace.csv:1", "empty file"}});
  add({"empty_jsonl", "empty file (Mooncake JSONL)", {{"run.toml", mooncake_config()}, {"trace.jsonl", ""}},
       run_azure, 1, {"trace.jsonl"}});
  add({"empty_config", "empty file (configuration)", {{"run.toml", ""}}, run_azure, 2,
       {"run.toml", "workload.kind", "missing section [workload]"}});
  add({"header_only", "header only (Azure CSV)", {{"run.toml", azure_config()}, {"trace.csv", kCsvHeader}},
       run_azure, 1, {"trace.csv:1", "no requests"}});
  add({"wrong_column", "wrong column (Azure CSV header `TIMESTAMP,PromptTokens,GeneratedTokens`)",
       {{"run.toml", azure_config()},
        {"trace.csv", "TIMESTAMP,PromptTokens,GeneratedTokens\n2023-11-16 18:15:46,100,20\n"}},
       run_azure, 1, {"trace.csv:1", "ContextTokens", "PromptTokens"}});
  add({"missing_key_jsonl", "missing key (Mooncake line without `hash_ids`)",
       {{"run.toml", mooncake_config()},
        {"trace.jsonl", jsonl_with("{\"timestamp\": 9000, \"input_length\": 5, \"output_length\": 5}")}},
       run_azure, 1, {"trace.jsonl:7", "hash_ids"}});
  add({"too_few_fields", "missing field (Azure row `2023-11-16 18:15:49,100`)",
       {{"run.toml", azure_config()}, {"trace.csv", csv_with("2023-11-16 18:15:49,100")}}, run_azure, 1,
       {"trace.csv:7", "GeneratedTokens"}});

  // Non-numeric, negative and zero values.
  add({"non_numeric_csv", "non-numeric field (ContextTokens `abc`)",
       {{"run.toml", azure_config()}, {"trace.csv", csv_with("2023-11-16 18:15:49,abc,20")}}, run_azure, 1,
       {"trace.csv:7", "ContextTokens", "abc"}});
  add({"non_numeric_jsonl", "non-numeric field (input_length `\"x\"`)",
       {{"run.toml", mooncake_config()}, {"trace.jsonl", jsonl_with(jsonl_line("9000", "\"x\"", "5"))}}, run_azure,
       1, {"trace.jsonl:7", "input_length"}});
  add({"non_numeric_timestamp", "non-numeric field (TIMESTAMP `yesterday`)",
       {{"run.toml", azure_config()}, {"trace.csv", csv_with("yesterday,100,20")}}, run_azure, 1,
       {"trace.csv:7", "TIMESTAMP"}});
  add({"non_numeric_config", "non-numeric field (configuration `rate = \"fast\"`)",
       {{"run.toml", poisson_config()}}, {"run", "run.toml", "--set", "workload.rate=\"fast\""}, 2,
       {"--set workload.rate", "expected a float"}});
  add({"negative_length_csv", "negative length (ContextTokens `-5`)",
       {{"run.toml", azure_config()}, {"trace.csv", csv_with("2023-11-16 18:15:49,-5,20")}}, run_azure, 1,
       {"trace.csv:7", "ContextTokens", ">= 1"}});
  add({"zero_prompt_jsonl", "zero length (input_length `0`)",
       {{"run.toml", mooncake_config()}, {"trace.jsonl", jsonl_with(jsonl_line("9000", "0", "5"))}}, run_azure, 1,
       {"trace.jsonl:7", "input_length", ">= 1"}});
  add({"zero_output_csv", "zero output tokens (GeneratedTokens `0`)",
       {{"run.toml", azure_config()}, {"trace.csv", csv_with("2023-11-16 18:15:49,100,0")}}, run_azure, 1,
       {"trace.csv:7", "GeneratedTokens", ">= 1"}});
  add({"zero_output_jsonl", "zero output tokens (output_length `0`)",
       {{"run.toml", mooncake_config()}, {"trace.jsonl", jsonl_with(jsonl_line("9000", "5", "0"))}}, run_azure, 1,
       {"trace.jsonl:7", "output_length", ">= 1"}});
  add({"zero_length_config", "zero length (configuration `[workload.output] value = 0`)",
       {{"run.toml", poisson_config()}}, {"run", "run.toml", "--set", "workload.output.value=0"}, 2,
       {"workload.output.value", "out of range"}});

  // Order and limits.
  add({"decreasing_csv", "decreasing timestamps (Azure CSV)",
       {{"run.toml", azure_config()}, {"trace.csv", csv_with("2023-11-16 18:15:01,100,20")}}, run_azure, 1,
       {"trace.csv:7", "TIMESTAMP", "backwards"}});
  add({"decreasing_jsonl", "decreasing timestamps (Mooncake JSONL)",
       {{"run.toml", mooncake_config()}, {"trace.jsonl", jsonl_with(jsonl_line("10", "5", "5"))}}, run_azure, 1,
       {"trace.jsonl:7", "timestamp", "backwards"}});
  {
    ErrorCase e{"prompt_beyond_context", "prompt beyond the model's context (ContextTokens `9000`, Llama-3-8B: 8192)",
                {{"run.toml", azure_config()}, {"trace.csv", csv_with("2023-11-16 18:15:49,9000,20")}},
                {"run", "run.toml", "--json"}, 0, {}};
    e.note = "accepted: the request is rejected on arrival and counted (`requests_rejected`, `rejected_context`); "
             "the other requests run";
    add(e);
  }
  add({"model_does_not_fit", "a model that does not fit the GPU at that TP (Llama-3-70B on one H100)",
       {{"run.toml", azure_config()}, {"trace.csv", csv_with("2023-11-16 18:15:49,100,20")}},
       {"run", "run.toml", "--set", "model.kind=llama-3-70b"}, 2, {"cluster.tensor_parallel", "does not fit"}});
  add({"tp_not_dividing_heads", "TP not dividing the heads (`tensor_parallel = 3`)",
       {{"run.toml", poisson_config("", "[cluster]\ntensor_parallel = 3\n")}}, run_azure, 2,
       {"run.toml:16:19", "cluster.tensor_parallel", "does not divide"}});
  add({"unknown_model", "unknown model", {{"run.toml", poisson_config()}},
       {"run", "run.toml", "--set", "model.kind=llama-9-1t"}, 2, {"model.kind", "llama-9-1t", "llama-3-8b"}});
  add({"unknown_gpu", "unknown GPU", {{"run.toml", poisson_config()}}, {"run", "run.toml", "--set", "gpu.kind=h900"},
       2, {"gpu.kind", "h900", "h100-sxm"}});
  add({"unknown_router", "unknown router", {{"run.toml", poisson_config("", "[router]\nkind = \"fastest\"\n")}},
       run_azure, 2, {"run.toml:16:8", "router.kind", "fastest", "round_robin"}});
  add({"rate_zero", "rate 0", {{"run.toml", poisson_config()}}, {"run", "run.toml", "--set", "workload.rate=0"}, 2,
       {"workload.rate", "out of range"}});
  add({"rate_scale_zero", "rate 0 (`rate_scale = 0`)", {{"run.toml", azure_config()}},
       {"run", "run.toml", "--set", "workload.rate_scale=0"}, 2, {"workload.rate_scale", "out of range"}});

  // NaN, infinities and overflow.
  add({"nan_config", "NaN (configuration `rate = nan`)",
       {{"run.toml", "[workload]\nkind = \"poisson\"\nmax_requests = 5\nrate = nan\n" + std::string(kModelGpu)}},
       run_azure, 2, {"run.toml:4:8", "workload.rate", "finite"}});
  add({"inf_config", "infinity (configuration `--set slo.ttft_ms=inf`)", {{"run.toml", poisson_config()}},
       {"run", "run.toml", "--set", "slo.ttft_ms=inf"}, 2, {"slo.ttft_ms", "finite"}});
  add({"nan_jsonl", "NaN (Mooncake `\"timestamp\": NaN`)",
       {{"run.toml", mooncake_config()}, {"trace.jsonl", jsonl_with(jsonl_line("NaN", "5", "5"))}}, run_azure, 1,
       {"trace.jsonl:7", "timestamp", "NaN"}});
  add({"inf_csv", "infinity (ContextTokens `inf`)",
       {{"run.toml", azure_config()}, {"trace.csv", csv_with("2023-11-16 18:15:49,inf,20")}}, run_azure, 1,
       {"trace.csv:7", "ContextTokens"}});
  add({"overflow_config", "integer overflow (configuration `replicas = 99999999999999999999`)",
       {{"run.toml", poisson_config("", "[cluster]\nreplicas = 99999999999999999999\n")}}, run_azure, 2,
       {"run.toml:16:32", "64 bits"}});
  add({"overflow_set", "integer overflow (`--set seed=1e30`)", {{"run.toml", poisson_config()}},
       {"run", "run.toml", "--set", "seed=1e30"}, 2, {"--set seed=1e30", "seed", "expected an integer"}});
  add({"overflow_csv", "integer overflow (ContextTokens `99999999999999999999`)",
       {{"run.toml", azure_config()}, {"trace.csv", csv_with("2023-11-16 18:15:49,99999999999999999999,20")}},
       run_azure, 1, {"trace.csv:7", "ContextTokens"}});
  add({"overflow_jsonl", "integer overflow (input_length `9223372036854775808`)",
       {{"run.toml", mooncake_config()},
        {"trace.jsonl", jsonl_with(jsonl_line("9000", "9223372036854775808", "5"))}},
       run_azure, 1, {"trace.jsonl:7", "input_length", "out of range"}});
  add({"overflow_timestamp_jsonl", "integer overflow (timestamp `9223372036854775807` ms)",
       {{"run.toml", mooncake_config()},
        {"trace.jsonl", jsonl_with(jsonl_line("9223372036854775807", "5", "5"))}},
       run_azure, 1, {"trace.jsonl:7", "timestamp", "out of range"}});
  add({"overflow_sum", "integer overflow (prompt + output beyond int64)",
       {{"run.toml", azure_config()},
        {"trace.csv", csv_with("2023-11-16 18:15:49,9223372036854775807,9223372036854775807")}},
       {"run", "run.toml", "--json"}, 0, {}, "accepted: the request is rejected on arrival (`rejected_context`)"});

  // Length files and load shapes (issue 12).
  add({"length_file_string", "non-numeric field (length file, JSON `\"prompt_len\": \"x\"`)",
       {{"run.toml", length_file_config()},
        {"lengths.json", "[\n  {\"prompt_len\": 100, \"output_len\": 20},\n  {\"prompt_len\": \"x\", \"output_len\": 20}\n]\n"}},
       run_azure, 1, {"lengths.json:3", "prompt_len", "got a string"}});
  add({"length_file_missing_key", "missing key (length file, JSONL line without `output_len`)",
       {{"run.toml", length_file_config("jsonl")},
        {"lengths.jsonl", "{\"prompt_len\": 100, \"output_len\": 20}\n{\"prompt_len\": 100, \"output_len\": 20}\n"
                          "{\"prompt_len\": 100}\n"}},
       run_azure, 1, {"lengths.jsonl:3", "output_len", "missing key"}});
  add({"length_file_no_column", "no length column (length file, CSV header `id,text`)",
       {{"run.toml", length_file_config("csv")}, {"lengths.csv", "id,text\n1,hello\n"}}, run_azure, 1,
       {"lengths.csv:1", "no length column", "input_length"}});
  add({"length_file_truncated", "a truncated JSON array (length file)",
       {{"run.toml", length_file_config()}, {"lengths.json", "[{\"prompt_len\": 100, \"output_len\": 20},\n {\"prom"}},
       run_azure, 1, {"lengths.json:2", "not closed"}});
  add({"stages_empty", "an empty list of load stages (`stages = []`)",
       {{"run.toml", length_file_config("json", "[workload.arrival]\nkind = \"stages\"\nstages = []\n")},
        {"lengths.json", "[{\"prompt_len\": 100, \"output_len\": 20}]"}},
       run_azure, 2, {"run.toml:15:10", "workload.arrival.stages", "empty"}});
  add({"closed_loop_endless", "a closed loop without an end (no `requests` nor `duration_s`)",
       {{"run.toml", length_file_config("json", "[workload.arrival]\nkind = \"closed_loop\"\nconcurrency = 4\n")},
        {"lengths.json", "[{\"prompt_len\": 100, \"output_len\": 20}]"}},
       run_azure, 2, {"workload.arrival.requests", "never ends"}});
  add({"client_timeout_zero", "client time-out 0 (`--set workload.client_timeout_s=0`)", {{"run.toml", poisson_config()}},
       {"run", "run.toml", "--set", "workload.client_timeout_s=0"}, 2, {"workload.client_timeout_s", "out of range"}});

  // Truncation and encodings.
  add({"truncated_jsonl", "a truncated JSON line",
       {{"run.toml", mooncake_config()}, {"trace.jsonl", jsonl_with("{\"timestamp\": 9000, \"input_length\": 5, \"outp")}},
       run_azure, 1, {"trace.jsonl:7", "truncated"}});
  add({"bom_csv", "UTF-8 BOM (Azure CSV)",
       {{"run.toml", azure_config()}, {"trace.csv", "\xEF\xBB\xBF" + csv_with("2023-11-16 18:15:49,100,20")}},
       {"run", "run.toml", "--json"}, 0, {}, "accepted: the byte-order mark is skipped"});
  add({"bom_jsonl", "UTF-8 BOM (Mooncake JSONL)",
       {{"run.toml", mooncake_config()}, {"trace.jsonl", "\xEF\xBB\xBF" + jsonl_rows()}}, {"run", "run.toml", "--json"},
       0, {}, "accepted: the byte-order mark is skipped"});
  add({"bom_config", "UTF-8 BOM (configuration)", {{"run.toml", "\xEF\xBB\xBF" + poisson_config()}},
       {"run", "run.toml", "--json"}, 0, {}, "accepted: the byte-order mark is skipped"});
  {
    std::string crlf_csv, crlf_jsonl, crlf_toml;
    for (char ch : csv_with("2023-11-16 18:15:49,100,20")) crlf_csv += ch == '\n' ? std::string("\r\n") : std::string(1, ch);
    for (char ch : jsonl_rows()) crlf_jsonl += ch == '\n' ? std::string("\r\n") : std::string(1, ch);
    for (char ch : poisson_config()) crlf_toml += ch == '\n' ? std::string("\r\n") : std::string(1, ch);
    add({"crlf_csv", "CRLF line endings (Azure CSV)", {{"run.toml", azure_config()}, {"trace.csv", crlf_csv}},
         {"run", "run.toml", "--json"}, 0, {}, "accepted"});
    add({"crlf_jsonl", "CRLF line endings (Mooncake JSONL)", {{"run.toml", mooncake_config()}, {"trace.jsonl", crlf_jsonl}},
         {"run", "run.toml", "--json"}, 0, {}, "accepted"});
    add({"crlf_config", "CRLF line endings (configuration)", {{"run.toml", crlf_toml}}, {"run", "run.toml", "--json"},
         0, {}, "accepted"});
  }
  add({"binary_csv", "a binary file as a trace (NUL bytes, no newline)",
       {{"run.toml", azure_config()}, {"trace.csv", std::string("\x00\x01\x02\xff\xfe", 5) + std::string(300, '\x00')}},
       run_azure, 1, {"trace.csv:1", "TIMESTAMP", "\\x00\\x01"}});

  // Paths.
  add({"directory_trace", "a directory given as a file (trace)", {{"run.toml", azure_config()}, {"trace.csv/", ""}},
       run_azure, 2, {"run.toml:3:8", "workload.path", "is a directory"}});
  add({"directory_config", "a directory given as a file (configuration)", {{"conf/", ""}}, {"run", "conf"}, 1,
       {"conf", "is a directory"}});
  add({"directory_db", "a directory given as a file (`--db`)", {{"run.toml", poisson_config()}, {"out/", ""}},
       {"run", "run.toml", "--db", "out"}, 1, {"out", "is a directory"}, "", true});
  add({"unwritable_db", "an unwritable output path (`--db` under a regular file)",
       {{"run.toml", poisson_config()}, {"file.txt", "x"}}, {"run", "run.toml", "--db", "file.txt/results.db"}, 1,
       {"file.txt/results.db", "cannot open"}, "", true});
  add({"unwritable_db_dir", "an unwritable output path (`--db` in a missing directory)",
       {{"run.toml", poisson_config()}}, {"run", "run.toml", "--db", "no/such/dir/results.db"}, 1,
       {"no/such/dir/results.db"}, "", true});
  add({"unwritable_csv", "an unwritable output path (`--csv` under a regular file)",
       {{"run.toml", poisson_config()}, {"file.txt", "x"}}, {"run", "run.toml", "--no-db", "--csv", "file.txt/csv"},
       1, {"file.txt/csv"}, "", true});

  add({"set_invalid_utf8", "invalid UTF-8 in a `--set` value", {{"run.toml", poisson_config()}},
       {"run", "run.toml", "--set", "router.kind=\xff"}, 2, {"--set router.kind", "router.kind", "not valid"}});
  add({"toml_error_line_end", "TOML syntax error at a line end (`rate = i`)",
       {{"run.toml", "[workload]\nkind = \"poisson\"\nrate = i\n"}}, run_azure, 2,
       {"run.toml:3:9", "TOML syntax error"}});
  return c;
}

// ---- running a case ----------------------------------------------------------------------------------

struct Outcome {
  ProcessResult process;
  std::string message;  // stderr, one paragraph expected
};

// A results database and a CSV directory holding one earlier run, made once and copied into each
// case's directory, so that "no partial output" can be checked byte for byte.
const fs::path& template_outputs() {
  static TempDir dir;
  static bool made = false;
  if (!made) {
    spit(fs::path(dir.path()) / "good.toml", poisson_config());
    const ProcessResult r =
        run_process({servesim_bin(), "run", "good.toml", "--db", "results.db", "--csv", "csv"}, dir.path(), kTimeoutS);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    made = true;
  }
  static const fs::path p = dir.path();
  return p;
}

int64_t count(const fs::path& db, const std::string& sql) {
  SQLite::Database d(db.string());
  return d.execAndGet(sql).getInt64();
}

Outcome run_case(const ErrorCase& c, const fs::path& dir) {
  for (const auto& [name, content] : c.files) {
    if (!name.empty() && name.back() == '/') fs::create_directories(dir / name);
    else spit(dir / name, content);
  }
  const fs::path& tmpl = template_outputs();
  fs::copy_file(tmpl / "results.db", dir / "results.db");
  fs::copy(tmpl / "csv", dir / "csv", fs::copy_options::recursive);
  const std::string db_before = slurp(dir / "results.db");
  const std::string csv_before = slurp(dir / "csv" / "runs.csv") + slurp(dir / "csv" / "requests.csv") +
                                 slurp(dir / "csv" / "replica_timeseries.csv");

  std::vector<std::string> argv = {servesim_bin()};
  argv.insert(argv.end(), c.args.begin(), c.args.end());
  if (!c.outputs_given) argv.insert(argv.end(), {"--db", "results.db", "--csv", "csv"});
  Outcome o;
  o.process = run_process(argv, dir.string(), kTimeoutS);
  o.message = o.process.err;
  while (!o.message.empty() && o.message.back() == '\n') o.message.pop_back();

  const ProcessResult& r = o.process;
  EXPECT_FALSE(r.timed_out) << c.id << ": still running after " << kTimeoutS << " s";
  EXPECT_EQ(r.signal, 0) << c.id << ": killed by signal " << r.signal << "\n" << r.err;
  for (const char* crash : {"AddressSanitizer", "runtime error:", "terminate called", "LeakSanitizer"})
    EXPECT_EQ(r.err.find(crash), std::string::npos) << c.id << ": " << r.err;
  EXPECT_EQ(r.exit_code, c.exit_code) << c.id << ": " << r.err;
  for (const auto& needle : c.needles)
    EXPECT_NE(o.message.find(needle), std::string::npos) << c.id << ": '" << needle << "' not in: " << o.message;
  if (r.exit_code != 0) {
    EXPECT_EQ(o.message.rfind("servesim: ", 0), 0u) << c.id << ": " << o.message;
    EXPECT_EQ(o.message.find('\n'), std::string::npos) << c.id << ": more than one paragraph: " << o.message;
    for (unsigned char ch : o.message) EXPECT_GE(ch, 0x20) << c.id << ": a control character in the message: " << o.message;
    EXPECT_TRUE(r.out.empty()) << c.id << ": printed a result although it failed: " << r.out;
    // Nothing of the failed run anywhere: the earlier outputs are byte for byte what they were.
    EXPECT_EQ(slurp(dir / "results.db"), db_before) << c.id << ": the results database changed";
    EXPECT_FALSE(fs::exists(dir / "results.db-journal")) << c.id;
    EXPECT_EQ(slurp(dir / "csv" / "runs.csv") + slurp(dir / "csv" / "requests.csv") +
                  slurp(dir / "csv" / "replica_timeseries.csv"),
              csv_before)
        << c.id << ": the CSV files changed";
    for (const auto& entry : fs::directory_iterator(dir / "csv"))
      EXPECT_EQ(entry.path().filename().string().front() == '.', false)
          << c.id << ": left a staging file " << entry.path();
  } else {
    // Accepted: the run is there, whole, next to the earlier one.
    EXPECT_TRUE(o.message.empty()) << c.id << ": " << o.message;
    EXPECT_EQ(count(dir / "results.db", "SELECT COUNT(*) FROM runs"), 2) << c.id;
    EXPECT_EQ(count(dir / "results.db", "SELECT COUNT(*) FROM requests WHERE run_id = 2"),
              count(dir / "results.db", "SELECT requests_total FROM runs WHERE run_id = 2"))
        << c.id;
  }
  return o;
}

std::string md_code(const std::string& s) {
  std::string t;
  for (unsigned char ch : s) {
    if (ch == '|') {
      t += "\\|";
    } else if (ch == '\n') {
      t += "<br>";
    } else if (ch < 0x20 || ch >= 0x7f) {  // bytes of a binary input stay readable (and the file valid UTF-8)
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", ch);
      t += buf;
    } else {
      t += static_cast<char>(ch);
    }
  }
  return "`` " + t + " ``";
}

std::string command_line(const ErrorCase& c) {
  std::string s = "servesim";
  for (const auto& a : c.args) {
    std::string shown;
    for (unsigned char ch : a) {
      if (ch < 0x20 || ch >= 0x7f) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\x%02x", ch);
        shown += buf;
      } else {
        shown += static_cast<char>(ch);
      }
    }
    s += " " + shown;
  }
  return s;
}

TEST(ErrorsTest, EveryHostileInputFailsCleanlyAndDocsErrorsMdIsCurrent) {
  ASSERT_FALSE(servesim_bin().empty()) << "SERVESIM_BIN is set by tests/meson.build";
  std::ostringstream doc;
  doc << "# What servesim says to bad input\n\n"
         "Generated by `tests/reliability/errors_test.cc`, which runs each case through the real binary (in a\n"
         "directory holding `run.toml` and its trace) and fails when this file differs from what the binary\n"
         "says. Regenerate: `SERVESIM_UPDATE_DOCS=1 meson test -C build servesim_tests`.\n\n"
         "Every case is also checked for: no crash (no signal, no sanitizer report), no hang (60 s limit),\n"
         "a message of one paragraph naming the file, line and field (or the `--set` argument), nothing on\n"
         "stdout, and no partial output: a results database and a CSV directory holding an earlier run are\n"
         "left byte for byte as they were (`--db results.db --csv csv` are added to every command that does\n"
         "not name its own output). Exit code 2 is a configuration or usage error, 1 an input or run-time\n"
         "error, 0 an input that is legitimately accepted.\n\n"
         "| input | command | exit | message (stderr) |\n| --- | --- | --- | --- |\n";
  for (const auto& c : cases()) {
    SCOPED_TRACE(c.id);
    TempDir dir;
    const Outcome o = run_case(c, dir.path());
    const std::string shown = o.process.exit_code == 0 ? c.note : md_code(o.message);
    doc << "| " << c.input << " | `" << command_line(c) << "` | " << o.process.exit_code << " | " << shown << " |\n";
  }
  const fs::path target = fs::path(source_dir()) / "docs" / "errors.md";
  if (!env_or_empty("SERVESIM_UPDATE_DOCS").empty()) {
    spit(target, doc.str());
    GTEST_SKIP() << "wrote " << target;
  }
  EXPECT_EQ(slurp(target), doc.str()) << target
                                      << " is out of date: regenerate it with SERVESIM_UPDATE_DOCS=1 (see the top of "
                                         "tests/reliability/errors_test.cc)";
}

}  // namespace
}  // namespace servesim::testing
