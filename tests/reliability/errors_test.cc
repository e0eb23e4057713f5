// Hostile inputs through the real binary: every bad input the reliability issue lists, each run as a
// user would (`servesim run ...` in a directory holding the files, with a time limit), checked for
// the exit code, a one-paragraph message naming the file, line and field, no crash, no hang, and no
// partial output (a results database and a CSV directory holding an earlier run are left exactly as
// they were). The same runs generate docs/errors.md; the test fails when the file differs from what
// the binary says today. Regenerate it with
//   SERVESIM_UPDATE_DOCS=1 meson test -C <build> servesim_tests --test-args=--gtest_filter='Errors*'
#include <gtest/gtest.h>

#include <SQLiteCpp/SQLiteCpp.h>

#include <sys/stat.h>

#include <filesystem>
#include <functional>
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
  std::function<void(const fs::path& dir)> setup{};  // what files cannot say (a named pipe, an earlier sweep)
};

std::vector<ErrorCase> cases() {
  const std::vector<std::string> run_azure = {"run", "run.toml"};
  std::vector<ErrorCase> c;
  auto add = [&](ErrorCase e) { c.push_back(std::move(e)); };

  // Missing and empty files.
  add({"missing_trace", "missing file (trace)", {{"run.toml", azure_config()}}, run_azure, 2,
       {"run.toml:3:8", "workload.path", "trace.csv: no such file (looked for "}});
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
  // ---- issue 14: results never lost or silently stale ----
  add({"timeline_over_db", "an output over another output (`--timeline results.db`, the `--db`)",
       {{"run.toml", poisson_config()}}, {"run", "run.toml", "--timeline", "results.db"}, 2,
       {"--timeline results.db", "--db", "never overwrites"}});
  add({"timeline_over_db_spelt_otherwise", "an output over another output, spelt otherwise (`--timeline ./sub/../results.db`)",
       {{"run.toml", poisson_config()}, {"sub/", ""}}, {"run", "run.toml", "--timeline", "./sub/../results.db"}, 2,
       {"--timeline", "--db"}});
  add({"timeline_over_config", "an output over an input (`--timeline run.toml`)", {{"run.toml", poisson_config()}},
       {"run", "run.toml", "--timeline", "run.toml"}, 2, {"--timeline run.toml", "the configuration"}});
  add({"db_over_trace", "an output over an input (`--db trace.csv`)",
       {{"run.toml", azure_config()}, {"trace.csv", csv_with("2023-11-16 18:15:49,100,20")}},
       {"run", "run.toml", "--db", "trace.csv", "--csv", "csv"}, 2, {"--db trace.csv", "workload.path"}, "", true});
  add({"timeline_over_csv_file", "an output over another output (`--timeline csv/requests.csv`)",
       {{"run.toml", poisson_config()}}, {"run", "run.toml", "--timeline", "csv/requests.csv"}, 2,
       {"--timeline csv/requests.csv", "--csv (requests.csv)"}});
  add({"timeline_over_foreign_file", "a file of another kind at `--timeline` (a text file)",
       {{"run.toml", poisson_config()}, {"notes.txt", "my notes\n"}}, {"run", "run.toml", "--timeline", "notes.txt"}, 1,
       {"notes.txt", "is not a servesim timeline", "never replaces"}});
  add({"db_into_text_file", "a file of another kind at `--db` (a text file)",
       {{"run.toml", poisson_config()}, {"notes.txt", "my notes\n"}},
       {"run", "run.toml", "--db", "notes.txt", "--csv", "csv"}, 1, {"notes.txt", "not an SQLite database"}, "", true});
  add({"db_into_foreign_sqlite", "another program's SQLite database at `--db`", {{"run.toml", poisson_config()}},
       {"run", "run.toml", "--db", "app.db", "--csv", "csv"}, 1, {"app.db", "servesim did not write", "'invoices'"}, "",
       true, [](const fs::path& d) {
         SQLite::Database db((d / "app.db").string(), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
         db.exec("CREATE TABLE invoices (id INTEGER)");
       }});
  add({"merge_into_foreign_sqlite", "`merge` into another program's SQLite database",
       {{"run.toml", poisson_config()},
        {"exp.toml", "base = \"run.toml\"\n[[axis]]\nkey = \"workload.rate\"\nvalues = [10.0, 20.0]\n"}},
       {"merge", "app.db", "sweep.db"}, 1, {"app.db", "servesim did not write"}, "", true, [](const fs::path& d) {
         run_process({servesim_bin(), "sweep", "exp.toml", "--db", "sweep.db", "-q"}, d.string(), kTimeoutS);
         SQLite::Database db((d / "app.db").string(), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
         db.exec("CREATE TABLE invoices (id INTEGER)");
       }});
  add({"run_into_sweep_db", "`run --db` into a sweep's database",
       {{"run.toml", poisson_config()},
        {"exp.toml", "base = \"run.toml\"\n[[axis]]\nkey = \"workload.rate\"\nvalues = [10.0, 20.0]\n"}},
       {"run", "run.toml", "--db", "sweep.db", "--csv", "csv"}, 1, {"sweep.db", "holds the results of an experiment"}, "",
       true, [](const fs::path& d) {
         run_process({servesim_bin(), "sweep", "exp.toml", "--db", "sweep.db", "-q"}, d.string(), kTimeoutS);
       }});
  add({"db_and_no_db", "`--db x.db` with `--no-db`", {{"run.toml", poisson_config()}},
       {"run", "run.toml", "--db", "x.db", "--no-db"}, 2, {"--db x.db", "--no-db"}, "", true});
  add({"timeline_max_events_negative", "`--timeline-max-events -1`", {{"run.toml", poisson_config()}},
       {"run", "run.toml", "--timeline", "t.json", "--timeline-max-events", "-1"}, 2, {"--timeline-max-events -1", "valid"}});

  // ---- issue 14: numbers physical or refused ----
  for (const auto& [set, key] : std::vector<std::pair<std::string, std::string>>{
           {"gpu.peak_tflops=1e-12", "gpu.peak_tflops"},
           {"gpu.hbm_bandwidth_gb_s=1e-12", "gpu.hbm_bandwidth_gb_s"},
           {"engine.schedule_ms=1e300", "engine.schedule_ms"},
           {"cost_model.compute_efficiency=1e-300", "cost_model.compute_efficiency"},
           {"gpu.nvlink_gb_s=1e-300", "gpu.nvlink_gb_s"},
           {"network.nic_gb_s=1e300", "network.nic_gb_s"},
           {"network.pcie_gb_s=1e-300", "network.pcie_gb_s"},
           {"gpu.memory_gib=1e18", "gpu.memory_gib"},
           {"workload.max_requests=1e18", "workload.max_requests"},
           {"workload.rate=1e-300", "workload.rate"}})
    add({"unphysical_" + key, "an unphysical value (`" + set + "`)", {{"run.toml", poisson_config()}},
         {"run", "run.toml", "--set", set}, 2, {"--set " + set, "'" + key + "'", "out of range; valid:"}});
  add({"generator_beyond_clock", "arrivals beyond the clock (`rate = 1e-6`, `max_requests = 1e9`)",
       {{"run.toml", poisson_config()}},
       {"run", "run.toml", "--set", "workload.rate=1e-6", "--set", "workload.max_requests=1000000000"}, 2,
       {"'workload.rate'", "max_requests", "beyond the clock"}});
  add({"time_series_too_long", "a time series no file could hold (200 arrivals at `rate = 1e-6`: 6 years sampled every second)",
       {{"run.toml", poisson_config()}},
       {"run", "run.toml", "--set", "workload.rate=1e-6", "--set", "workload.max_requests=200"}, 2,
       {"output.sample_interval_ms", "time-series rows"}});
  add({"window_far_ahead", "a generator's window far ahead (`window_start_s = 1e9`)",
       {{"run.toml", poisson_config()}}, {"run", "run.toml", "--set", "workload.window_start_s=1e9", "--json"}, 0, {},
       "accepted: the generator starts at the window instead of drawing 10^10 arrivals before it"});
  add({"sessions_window_far_ahead", "a sessions generator's window far ahead (`window_start_s = 1e9`)",
       {{"run.toml", "[workload]\nkind = \"sessions\"\nrate = 10\nmax_requests = 20\nwindow_start_s = 1e9\n"
                     "[workload.turns]\nkind = \"fixed\"\nvalue = 2\n[workload.user]\nkind = \"fixed\"\nvalue = 10\n"
                     "[workload.output]\nkind = \"fixed\"\nvalue = 10\n[workload.system_tokens]\nkind = \"fixed\"\n"
                     "value = 10\n" + std::string(kModelGpu)}},
       run_azure, 2, {"run.toml:5:", "workload.window_start_s", "start the window earlier"}});

  // ---- issue 14: no crash, no hang ----
  add({"jobs_too_many", "`--jobs 100000`",
       {{"run.toml", poisson_config()},
        {"exp.toml", "base = \"run.toml\"\n[[axis]]\nkey = \"workload.rate\"\nvalues = [10.0, 20.0]\n"}},
       {"sweep", "exp.toml", "--db", "s.db", "--jobs", "100000"}, 2, {"--jobs 100000", "1024"}, "", true});
  add({"fifo_trace", "a named pipe as the trace (no writer)", {{"run.toml", azure_config()}}, run_azure, 2,
       {"run.toml:3:8", "workload.path", "named pipe"}, "", false,
       [](const fs::path& d) { ::mkfifo((d / "trace.csv").c_str(), 0600); }});
  add({"dev_zero_config", "`/dev/zero` as the configuration", {}, {"run", "/dev/zero"}, 1,
       {"/dev/zero", "character device"}});
  add({"dev_zero_experiment", "`/dev/zero` as the experiment file", {}, {"sweep", "/dev/zero", "--db", "s.db"}, 1,
       {"/dev/zero", "character device"}, "", true});

  // ---- issue 14: errors a person can act on ----
  add({"huge_unknown_kind", "an unknown kind of 10 MB",
       {{"run.toml", "[workload]\nkind = \"" + std::string(10 << 20, 'p') + "\"\n"}}, run_azure, 2,
       {"run.toml:2:8", "workload.kind", "more bytes", "valid kinds"}});
  add({"bom_in_kind", "an invisible character in a kind (a byte-order mark before `poisson`)",
       {{"run.toml", "[workload]\nkind = \"\xEF\xBB\xBFpoisson\"\n"}}, run_azure, 2,
       {"\\uFEFFpoisson", "invisible", "did you mean 'poisson'"}});
  add({"directory_model_config", "a directory as the model's config.json",
       {{"run.toml", poisson_config().replace(poisson_config().find("[model]\nkind = \"llama-3-8b\"\n"), 27,
                                              "[model]\nkind = \"hf_config\"\npath = \"model\"\n")},
        {"model/", ""}},
       run_azure, 2, {"model.path", "is a directory"}});
  add({"gzip_trace", "a gzip-compressed trace",
       {{"run.toml", azure_config()}, {"trace.csv", std::string("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\x0b\xf1\xf5", 13)}},
       run_azure, 1, {"trace.csv", "looks compressed (gzip)", "gunzip"}});
  add({"duplicate_json_key", "a key given twice in a model's config.json",
       {{"run.toml", poisson_config().replace(poisson_config().find("[model]\nkind = \"llama-3-8b\"\n"), 27,
                                              "[model]\nkind = \"hf_config\"\npath = \"config.json\"\n")},
        {"config.json", "{\"model_type\": \"llama\",\n\"num_hidden_layers\": 32,\n\"num_hidden_layers\": 48}\n"}},
       run_azure, 1, {"config.json:3", "num_hidden_layers", "duplicate key"}});
  add({"report_negative_rate", "`report --rate -5`", {}, {"report", "results.db", "--out", "rep", "--rate", "-5"}, 2,
       {"--rate -5", "valid"}, "", true});
  // Two directories down, so that ../../shared stays inside the case's own directory (one level
  // down it would name <tmp>/../shared, whose existence depends on the machine).
  add({"unresolved_relative_path", "a relative path that leads nowhere (`../../shared/...` from a subdirectory)",
       {{"exp/sub/run.toml",
         "[workload]\nkind = \"azure_csv\"\npath = \"../../shared/traces/none.csv\"\n" + std::string(kModelGpu)}},
       {"run", "exp/sub/run.toml"}, 2, {"exp/sub/run.toml:3:8", "../../shared/traces/none.csv", "looked for"}});
  add({"experiment_given_to_run", "an experiment file given to `run`",
       {{"run.toml", poisson_config()},
        {"exp.toml", "base = \"run.toml\"\n[[axis]]\nkey = \"workload.rate\"\nvalues = [10.0, 20.0]\n"}},
       {"run", "exp.toml"}, 2, {"exp.toml", "experiment file", "servesim sweep"}});
  add({"config_given_to_sweep", "a run configuration given to `sweep`", {{"run.toml", poisson_config()}},
       {"sweep", "run.toml", "--db", "s.db"}, 2, {"run.toml", "run configuration", "servesim run"}, "", true});
  add({"option_with_placeholder", "an option naming Boost's message placeholder (`--%original_token%`; it hung)",
       {{"run.toml", poisson_config()}}, {"run", "run.toml", "--%original_token%"}, 2, {"unrecognised option"}});
  add({"value_with_placeholder", "an option value naming Boost's message placeholder (`--jobs %value%x`; it hung)",
       {{"run.toml", poisson_config()},
        {"exp.toml", "base = \"run.toml\"\n[[axis]]\nkey = \"workload.rate\"\nvalues = [10.0, 20.0]\n"}},
       {"sweep", "exp.toml", "--db", "s.db", "--jobs", "%value%x"}, 2, {"--jobs", "invalid"}, "", true});
  add({"slo_without_unit", "a key without its unit (`slo.ttft`)", {{"run.toml", poisson_config()}},
       {"run", "run.toml", "--set", "slo.ttft=500"}, 2, {"slo.ttft", "did you mean 'ttft_ms'"}});
  // Request classes and admission control (issue 17).
  const std::string classes = "[[workload.classes]]\nname = \"premium\"\n[[workload.classes]]\nname = \"batch\"\n";
  const auto classed_csv = [](const std::string& line7) {
    std::string t = "TIMESTAMP,ContextTokens,GeneratedTokens,class\n";
    for (int i = 0; i < 5; ++i) t += "2023-11-16 18:15:4" + std::to_string(i) + ".5,100,20,batch\n";
    return t + line7 + "\n";
  };
  add({"unknown_class_csv", "a request class the configuration does not define (Azure CSV `class` column `gold`)",
       {{"run.toml", azure_config() + classes}, {"trace.csv", classed_csv("2023-11-16 18:15:49,100,20,gold")}},
       run_azure, 1, {"trace.csv:7", "class", "unknown request class 'gold'", "premium, batch"}});
  add({"class_not_a_string_jsonl", "a request class that is not a string (Mooncake `\"class\": 5`)",
       {{"run.toml", mooncake_config() + classes},
        {"trace.jsonl", "{\"timestamp\": 0, \"input_length\": 5, \"output_length\": 5, \"hash_ids\": [1], "
                        "\"class\": \"batch\"}\n{\"timestamp\": 9, \"input_length\": 5, \"output_length\": 5, "
                        "\"hash_ids\": [1], \"class\": 5}\n"}},
       run_azure, 1, {"trace.jsonl:2", "class", "expected a string naming a request class"}});
  add({"trace_without_classes", "classes without shares and a trace without a `class` column",
       {{"run.toml", azure_config() + classes}, {"trace.csv", csv_with("2023-11-16 18:15:49,100,20")}}, run_azure, 1,
       {"trace.csv", "request 0 names no class", "share"}});
  add({"duplicate_class", "a request class defined twice",
       {{"run.toml", poisson_config("[[workload.classes]]\nname = \"a\"\nshare = 1\n[[workload.classes]]\nname = "
                                    "\"a\"\nshare = 2\n")}},
       run_azure, 2, {"run.toml", "workload.classes[1].name", "defined twice"}});
  add({"partial_class_shares", "a share on some request classes only",
       {{"run.toml", poisson_config("[[workload.classes]]\nname = \"a\"\nshare = 1\n[[workload.classes]]\nname = "
                                    "\"b\"\n")}},
       run_azure, 2, {"run.toml", "workload.classes[1].share", "give every class a share or none"}});
  add({"class_admit_fraction_zero", "a request class's admit_fraction of 0",
       {{"run.toml", poisson_config("[[workload.classes]]\nname = \"a\"\nshare = 1\nadmit_fraction = 0\n")}},
       run_azure, 2, {"run.toml", "workload.classes[0].admit_fraction"}});
  add({"admission_misspelt_key", "a misspelt admission key (`max_queue`)",
       {{"run.toml", poisson_config("", "[admission]\nkind = \"queue_length\"\nmax_queue = 8\n")}}, run_azure, 2,
       {"run.toml", "admission.max_queue", "did you mean 'max_queued'"}});
  add({"admission_unknown_kind", "an unknown admission kind",
       {{"run.toml", poisson_config("", "[admission]\nkind = \"token_bucket\"\n")}}, run_azure, 2,
       {"run.toml", "admission.kind", "queue_length"}});
  // Client retries (issue 17).
  add({"retries_backoff_above_max", "a retry back-off longer than its maximum",
       {{"run.toml", poisson_config("client_timeout_s = 1\n", "[retries]\nmax_attempts = 3\nbackoff_s = 10\n")}},
       run_azure, 2, {"run.toml", "retries.max_backoff_s", "below backoff_s"}});
  add({"retries_nothing_to_retry", "client retries with every kind of failure turned off",
       {{"run.toml", poisson_config("", "[retries]\nmax_attempts = 2\nafter_timeout = false\nafter_shed = false\n"
                                        "after_failure = false\n")}},
       run_azure, 2, {"run.toml", "retries.max_attempts", "nothing would be retried"}});
  add({"retries_zero_attempts", "`max_attempts = 0`",
       {{"run.toml", poisson_config("", "[retries]\nmax_attempts = 0\n")}}, run_azure, 2,
       {"run.toml", "retries.max_attempts"}});
  add({"capacity_headroom_unknown", "an unknown capacity headroom (`headroom = \"gpu\"`)",
       {{"run.toml", poisson_config("", "[slo]\nttft_ms = 500\n")},
        {"exp.toml", "base = \"run.toml\"\n[capacity]\nheadroom = \"gpu\"\n"}},
       {"capacity", "exp.toml", "-q"}, 2, {"exp.toml:3", "capacity.headroom", "\"replica\""}, "", true});
  add({"capacity_headroom_flag", "`--headroom gpus`",
       {{"run.toml", poisson_config("", "[slo]\nttft_ms = 500\n")}, {"exp.toml", "base = \"run.toml\"\n"}},
       {"capacity", "exp.toml", "-q", "--headroom", "gpus"}, 2, {"--headroom", "replica, node or none"}, "", true});
  // Autoscaling (issue 17).
  const std::string as = "[autoscaler]\nkind = \"schedule\"\nmax_replicas = 3\n";
  add({"autoscaler_without_max", "an autoscaler without max_replicas",
       {{"run.toml", poisson_config("", "[autoscaler]\nkind = \"slo\"\nmax_ttft_ms = 500\n")}}, run_azure, 2,
       {"run.toml", "autoscaler.max_replicas"}});
  add({"autoscaler_start_outside_range", "cluster.replicas outside [min_replicas, max_replicas] with an autoscaler",
       {{"run.toml", poisson_config("", "[cluster]\nreplicas = 4\n" + as + "times_s = [1]\nreplicas = [2]\n")}},
       run_azure, 2, {"run.toml", "cluster.replicas", "[1, 3]"}});
  add({"autoscaler_min_above_max", "min_replicas above max_replicas",
       {{"run.toml", poisson_config("", "[autoscaler]\nkind = \"target_utilisation\"\ntarget_requests = 8\n"
                                        "max_replicas = 2\nmin_replicas = 3\n")}},
       run_azure, 2, {"run.toml", "autoscaler.min_replicas", "above max_replicas"}});
  add({"autoscaler_schedule_lengths", "a schedule with more counts than times",
       {{"run.toml", poisson_config("", as + "times_s = [1, 2]\nreplicas = [2, 3, 1]\n")}}, run_azure, 2,
       {"run.toml", "autoscaler.replicas", "one count per time"}});
  add({"autoscaler_schedule_not_increasing", "schedule times that do not increase",
       {{"run.toml", poisson_config("", as + "times_s = [5, 2]\nreplicas = [2, 3]\n")}}, run_azure, 2,
       {"run.toml", "autoscaler.times_s", "must increase"}});
  add({"autoscaler_schedule_fraction", "a schedule count that is not a whole replica",
       {{"run.toml", poisson_config("", as + "times_s = [1]\nreplicas = [1.5]\n")}}, run_azure, 2,
       {"run.toml", "autoscaler.replicas", "whole replicas"}});
  add({"autoscaler_schedule_above_max", "a schedule count above max_replicas",
       {{"run.toml", poisson_config("", as + "times_s = [1]\nreplicas = [5]\n")}}, run_azure, 2,
       {"run.toml", "autoscaler.replicas", "outside [min_replicas, max_replicas]"}});
  add({"autoscaler_unknown_source", "an unknown weights source",
       {{"run.toml", poisson_config("", as + "times_s = [1]\nreplicas = [2]\nweights_source = \"s3\"\n")}},
       run_azure, 2, {"run.toml", "autoscaler.weights_source", "nvme"}});
  add({"autoscaler_disaggregated", "an autoscaler on a disaggregated cluster",
       {{"run.toml", poisson_config("", "[cluster.prefill]\nreplicas = 1\n[cluster.decode]\nreplicas = 1\n" + as +
                                        "times_s = [1]\nreplicas = [2]\n")}},
       run_azure, 2, {"run.toml", "autoscaler.kind", "[cluster.prefill.autoscaler]"}});
  const std::string pd = "[cluster.prefill]\nreplicas = 1\n[cluster.decode]\nreplicas = 1\n";
  add({"pool_autoscaler_tpot_on_prefill", "the tpot kind on the prefill pool",
       {{"run.toml", poisson_config("", pd + "[cluster.prefill.autoscaler]\nkind = \"tpot\"\nmax_replicas = 2\n"
                                             "max_tpot_ms = 40\n")}},
       run_azure, 2, {"run.toml", "cluster.prefill.autoscaler.kind", "only prefills"}});
  add({"pool_autoscaler_slo_on_decode", "the slo kind on the decode pool",
       {{"run.toml", poisson_config("", pd + "[cluster.decode.autoscaler]\nkind = \"slo\"\nmax_replicas = 2\n"
                                             "max_ttft_ms = 500\n")}},
       run_azure, 2, {"run.toml", "cluster.decode.autoscaler.kind", "use tpot"}});
  add({"autoscaler_tpot_unified", "the tpot kind on a unified pool",
       {{"run.toml", poisson_config("", "[autoscaler]\nkind = \"tpot\"\nmax_replicas = 2\nmax_tpot_ms = 40\n")}},
       run_azure, 2, {"run.toml", "autoscaler.kind", "decode pool"}});
  add({"pool_autoscaler_start_outside_range", "a pool's replicas outside its autoscaler's range",
       {{"run.toml", poisson_config("", "[cluster.prefill]\nreplicas = 1\n[cluster.decode]\nreplicas = 3\n"
                                        "[cluster.decode.autoscaler]\nkind = \"target_utilisation\"\n"
                                        "target_requests = 8\nmax_replicas = 2\n")}},
       run_azure, 2, {"run.toml", "cluster.decode.replicas", "[1, 2]"}});
  add({"pool_autoscaler_zero_max", "a pool autoscaler with max_replicas = 0",
       {{"run.toml", poisson_config("", pd + "[cluster.prefill.autoscaler]\nkind = \"target_utilisation\"\n"
                                             "target_requests = 8\nmax_replicas = 0\n")}},
       run_azure, 2, {"run.toml", "cluster.prefill.autoscaler.max_replicas", "out of range"}});
  add({"node_mtbf_without_mttr", "drawn node failures without a repair time",
       {{"run.toml", poisson_config("", "[faults]\nnode_mtbf_s = 100\n")}}, run_azure, 2,
       {"run.toml", "faults.node_mtbf_s", "give node_mtbf_s and node_mttr_s together"}});
  // A host KV tier (issue 16).
  add({"kv_tier_without_prefix_caching", "a host KV tier without prefix caching",
       {{"run.toml", poisson_config("", "[kv_tiers.host]\ncapacity_gb = 64\n")}}, run_azure, 2,
       {"run.toml", "kv_tiers.host.capacity_gb", "prefix_caching"}});
  add({"kv_tier_unknown_load_policy", "an unknown KV-tier load policy",
       {{"run.toml", poisson_config("", "[kv_tiers.host.load]\nkind = \"sometimes\"\n")}}, run_azure, 2,
       {"run.toml", "kv_tiers.host.load.kind", "cost"}});
  // PD backpressure (issue 16).
  add({"pd_pull_unified", "`pd_pull` on a unified cluster",
       {{"run.toml", poisson_config("", "[cluster]\npd_pull = \"push\"\n")}}, run_azure, 2,
       {"run.toml", "cluster.pd_pull", "applies to prefill/decode disaggregation"}});
  // Swap copies on the fabric (issue 16).
  add({"swap_copies_without_swap", "`swap_copies` without swap preemption",
       {{"run.toml", poisson_config("", "[cluster]\nswap_copies = \"flows\"\n")}}, run_azure, 2,
       {"run.toml", "cluster.swap_copies", "applies to preemption = \"swap\""}});
  add({"pd_pull_unknown", "an unknown `pd_pull`",
       {{"run.toml", poisson_config("", "[cluster]\npd_pull = \"pull\"\n[cluster.prefill]\nreplicas = 1\n"
                                        "[cluster.decode]\nreplicas = 1\n")}},
       run_azure, 2, {"run.toml", "cluster.pd_pull", "reserve_first"}});
  // Link failures (issue 17).
  const std::string pd_nodes = "[cluster.prefill]\nreplicas = 1\n[cluster.decode]\nreplicas = 1\n[network]\n"
                               "gpus_per_node = 1\n[faults]\n[[faults.events]]\nkind = \"link\"\nat_s = 0.5\n";
  add({"link_unknown", "a link failure naming a link the topology does not have",
       {{"run.toml", poisson_config("", pd_nodes + "link = \"nic 0\"\n")}}, run_azure, 2,
       {"run.toml", "faults.events[0].link", "no network link is named 'nic 0'", "node 0 nic 0 - leaf"}});
  add({"link_without_network", "a link failure on a cluster with no network (unified, one GPU per replica)",
       {{"run.toml", poisson_config("", "[faults]\n[[faults.events]]\nkind = \"link\"\nlink = \"gpu 0 pcie\"\nat_s = 1\n")}},
       run_azure, 2, {"run.toml", "faults.events[0].link", "this cluster has no network"}});
  add({"link_cut_off_for_good", "a link failure for good that leaves a KV transfer no path (one NIC per node)",
       {{"run.toml", poisson_config("", pd_nodes + "link = \"node 0 nic 0 - leaf\"\n")}}, run_azure, 1,
       {"link 'node 0 nic 0 - leaf' failed for good", "repair_s"}});
  // Drawn link failures and degraded links (issue 17).
  const std::string pd_drawn = "[cluster.prefill]\nreplicas = 1\n[cluster.decode]\nreplicas = 1\n[network]\n"
                               "gpus_per_node = 1\n[faults]\n[[faults.link_mtbf]]\n";
  add({"link_mtbf_class_empty", "drawn link failures of a class the topology does not have (one leaf: no spine)",
       {{"run.toml", poisson_config("", pd_drawn + "links = \"spine\"\nmtbf_s = 100\nmttr_s = 10\n")}}, run_azure, 2,
       {"run.toml", "faults.link_mtbf[0].links", "no link of class 'spine'"}});
  add({"link_mtbf_unknown", "drawn link failures naming neither a class nor a link",
       {{"run.toml", poisson_config("", pd_drawn + "links = \"optics\"\nmtbf_s = 100\nmttr_s = 10\n")}}, run_azure, 2,
       {"run.toml", "faults.link_mtbf[0].links", "no link class or network link is named 'optics'", "\"nic\""}});
  add({"link_mtbf_without_mttr", "drawn link failures without a repair time",
       {{"run.toml", poisson_config("", pd_drawn + "links = \"nic\"\nmtbf_s = 100\n")}}, run_azure, 2,
       {"run.toml", "faults.link_mtbf[0].mtbf_s", "give mtbf_s and mttr_s together"}});
  add({"link_speed_out_of_range", "a degraded link at speed 0",
       {{"run.toml", poisson_config("", pd_nodes + "link = \"node 0 nic 0 - leaf\"\nspeed = 0\n")}}, run_azure, 2,
       {"run.toml", "faults.events[0].speed", "out of range"}});
  add({"speed_on_a_failure", "`speed` on a replica failure",
       {{"run.toml", poisson_config("", "[faults]\n[[faults.events]]\nreplica = 0\nat_s = 1\nspeed = 0.5\n")}},
       run_azure, 2, {"run.toml", "faults.events[0].speed", "a degraded link"}});
  add({"prediction_without_uncertainty", "prediction intervals on a GPU whose profile has no `[uncertainty]` (A100)",
       {{"run.toml", poisson_config()}}, {"run", "run.toml", "--set", "gpu.kind=a100-80gb-sxm", "--prediction-draws", "10"},
       2, {"cost_model.calibration", "has no [uncertainty] table", "fit --from-serving-runs"}});
  add({"prediction_too_few_draws", "`--prediction-draws 3`", {{"run.toml", poisson_config()}},
       {"run", "run.toml", "--prediction-draws", "3"}, 2, {"--prediction-draws", "at least 10"}});
  add({"fair_weight_without_policy", "a fair-sharing weight without `policy = \"fair\"`", {{"run.toml", poisson_config()}},
       {"run", "run.toml", "--set", "scheduler.fair_output_weight=3"}, 2,
       {"scheduler.fair_output_weight", "policy = \"fair\""}});
  add({"fair_weights_zero", "fair sharing with both weights 0", {{"run.toml", poisson_config()}},
       {"run", "run.toml", "--set", "scheduler.policy=fair", "--set", "scheduler.fair_prompt_weight=0", "--set",
        "scheduler.fair_output_weight=0"},
       2, {"scheduler.fair_output_weight", "both 0"}});
  add({"priority_preemption_without_policy", "`priority_preemption` without `policy = \"priority\"`",
       {{"run.toml", poisson_config()}}, {"run", "run.toml", "--set", "scheduler.priority_preemption=admit"}, 2,
       {"scheduler.priority_preemption", "policy = \"priority\""}});
  add({"fair_scope_unknown", "an unknown fair scope (`fair_scope = \"global\"`)", {{"run.toml", poisson_config()}},
       {"run", "run.toml", "--set", "scheduler.policy=fair", "--set", "scheduler.fair_scope=global"}, 2,
       {"scheduler.fair_scope", "cluster"}});
  add({"tenant_weights_disagree", "two classes of one tenant with different weights",
       {{"run.toml", poisson_config("[[workload.classes]]\nname = \"a\"\nshare = 1\ntenant = \"t\"\nweight = 2\n"
                                    "[[workload.classes]]\nname = \"b\"\nshare = 1\ntenant = \"t\"\nweight = 1\n")}},
       run_azure, 2, {"run.toml", "workload.classes[1].weight", "class 'b'", "class 'a'", "one weight"}});
  add({"prediction_too_many_draws", "`--prediction-draws 1000000000`", {{"run.toml", poisson_config()}},
       {"run", "run.toml", "--prediction-draws", "1000000000"}, 2, {"--prediction-draws", "at most 10000"}});
  add({"prediction_zero_step_scale", "a step factor of zero (`prediction.step_scale = 0`)",
       {{"run.toml", poisson_config("", "[prediction]\nstep_scale = 0\n")}}, {"run", "run.toml"}, 2,
       {"run.toml", "prediction.step_scale"}});
  add({"profile_uncertainty_two_residuals", "a profile's `[uncertainty]` from two residuals",
       {{"run.toml", poisson_config("", "[cost_model]\ncalibration = \"p.toml\"\n")},
        {"p.toml", "format = \"servesim-calibration-profile\"\nversion = 1\ngpu = \"h100-sxm\"\n[uncertainty]\n"
                   "residuals = 2\nstep_log_rms = 0.02\nfrontend_rms_ms = 5\n"}},
       {"run", "run.toml"}, 1, {"p.toml:5", "uncertainty.residuals"}});
  // Time-varying rates ([workload.rate_profile], docs/workloads.md): the table file's rows.
  const std::string table_profile = "[workload.rate_profile]\nkind = \"table\"\npath = \"rates.csv\"\n";
  add({"rate_table_header", "a rate table without the header `time_s,factor`",
       {{"run.toml", poisson_config(table_profile)}, {"rates.csv", "time,rate\n0,1\n"}}, {"run", "run.toml"}, 1,
       {"rates.csv:1", "time_s,factor"}});
  add({"rate_table_non_numeric", "a non-numeric factor in a rate table (`10,abc`)",
       {{"run.toml", poisson_config(table_profile)}, {"rates.csv", "time_s,factor\n0,1\n10,abc\n"}},
       {"run", "run.toml"}, 1, {"rates.csv:3", "factor", "abc"}});
  add({"rate_table_non_increasing", "a rate table whose times do not increase (`10` after `10`)",
       {{"run.toml", poisson_config(table_profile)}, {"rates.csv", "time_s,factor\n0,1\n10,2\n10,3\n"}},
       {"run", "run.toml"}, 1, {"rates.csv:4", "time_s", "must increase"}});
  add({"rate_table_negative", "a negative factor in a rate table (`10,-2`)",
       {{"run.toml", poisson_config(table_profile)}, {"rates.csv", "time_s,factor\n0,1\n10,-2\n"}},
       {"run", "run.toml"}, 1, {"rates.csv:3", "factor", ">= 0"}});
  add({"rate_table_late_start", "a rate table whose first row is not at time 0",
       {{"run.toml", poisson_config(table_profile)}, {"rates.csv", "time_s,factor\n3600,1\n"}},
       {"run", "run.toml"}, 1, {"rates.csv:2", "time_s", "time_s = 0"}});
  add({"rate_table_all_zero", "a rate table whose factors are all 0",
       {{"run.toml", poisson_config(table_profile)}, {"rates.csv", "time_s,factor\n0,0\n10,0\n"}},
       {"run", "run.toml"}, 1, {"rates.csv:3", "every factor is 0"}});
  add({"rate_table_missing", "a missing rate table", {{"run.toml", poisson_config(table_profile)}},
       {"run", "run.toml"}, 2, {"workload.rate_profile.path", "rates.csv"}});
  add({"rate_table_ends_at_zero", "a workload that outlasts a rate table ending at factor 0",
       {{"run.toml", poisson_config(table_profile)}, {"rates.csv", "time_s,factor\n0,1\n1,0\n"}},
       {"run", "run.toml"}, 1, {"never sent", "rates.csv", "max_requests"}});
  add({"rate_profile_closed_loop", "a rate profile on closed-loop clients",
       {{"run.toml", std::string("[workload]\nkind = \"synthetic\"\n[workload.prompt]\nkind = \"fixed\"\nvalue = 100\n"
                                 "[workload.output]\nkind = \"fixed\"\nvalue = 10\n[workload.arrival]\nkind = "
                                 "\"closed_loop\"\nconcurrency = 2\nrequests = 20\n[workload.rate_profile]\nkind = "
                                 "\"sinusoid\"\namplitude = 0.5\n") +
                         kModelGpu}},
       {"run", "run.toml"}, 2, {"workload.rate_profile", "closed_loop", "open-loop"}});
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
  if (c.setup) c.setup(dir);
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
    // Messages name resolved (absolute) paths: the case's private directory reads as <dir>.
    std::string message = o.message;
    for (const std::string& d : {fs::canonical(dir.path()).string(), dir.path()})
      for (size_t at; (at = message.find(d)) != std::string::npos;) message.replace(at, d.size(), "<dir>");
    const std::string tmp = fs::canonical(dir.path()).parent_path().string();
    for (size_t at; (at = message.find(tmp + "/")) != std::string::npos;) message.replace(at, tmp.size(), "<tmp>");
    const std::string shown = o.process.exit_code == 0 ? c.note : md_code(message);
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
