#pragma once
// Fuzz targets: each feeds one input to one of servesim's readers and checks what must hold for ANY
// input (the oracle): the input is accepted, or it is refused with a core::Error whose message names
// where the input came from; nothing else escapes, nothing crashes, what is accepted is sane.
//
// The same functions run under libFuzzer (tests/fuzz/fuzz_main.cc, clang, -Dfuzz=true) and, over the
// seed corpus in tests/fuzz/corpus/<target>/, in the ordinary test suite
// (tests/reliability/fuzz_corpus_test.cc), so every input the fuzzer kept is replayed by g++ and the
// sanitizer build on every CI run.
//
// Adding a reader: write `void fuzz_<name>(std::string_view data, const std::string& scratch)`,
// add it to fuzz_targets() in targets.cc, add the name to tests/fuzz/meson.build, and put a few
// hand-written inputs in tests/fuzz/corpus/<name>/.

#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

namespace servesim::testing {

// An input broke the oracle. Deliberately not a core::Error, so no handler in servesim catches it.
class OracleFailure : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

// `data` runs through one reader. `scratch` is a path the target may overwrite with the input (the
// readers take paths); its directory is private to the caller.
using FuzzFunction = void (*)(std::string_view data, const std::string& scratch);

struct FuzzTarget {
  const char* name;  // also the folder of its seed corpus and the libFuzzer binary's suffix
  FuzzFunction run;
};

std::span<const FuzzTarget> fuzz_targets();
const FuzzTarget* find_fuzz_target(std::string_view name);

// The TOML run configuration: core::parse_config with experiments::run_schema(). Input after a line
// "#--set" is one --set override per line. A configuration that validates must print (to_toml) to
// text that parses back to the same configuration; one that is small enough then runs end to end,
// with the invariant checker on.
void fuzz_config(std::string_view data, const std::string& scratch);
// traces::AzureCsvReader over the input as a file.
void fuzz_azure_csv(std::string_view data, const std::string& scratch);
// traces::MooncakeJsonlReader over the input as a file.
void fuzz_mooncake_jsonl(std::string_view data, const std::string& scratch);
// The `empirical` length distribution (both formats, both fields, joint sampling) over the input:
// the first byte picks the format and field, the rest is the file.
void fuzz_empirical(std::string_view data, const std::string& scratch);
// traces::read_length_column (a JSON array, JSON lines or CSV of token counts): the first byte picks
// the format (bits 0-1), the field's candidate names (bit 2) and an explicit column "n" (bit 3).
// What is accepted holds lengths >= 1; an accepted JSON array is checked against nlohmann::json.
void fuzz_length_file(std::string_view data, const std::string& scratch);
// hwmodels::parse_hf_config (a Hugging Face config.json); an accepted model must be usable at TP 1.
void fuzz_hf_config(std::string_view data, const std::string& scratch);
// hwmodels::parse_calibration_profile; an accepted profile must write and read back unchanged.
void fuzz_calibration_profile(std::string_view data, const std::string& scratch);
// calibration::parse_operator_csv (mlp.csv), or parse_collective_csv when the first byte is 0x01.
void fuzz_operator_csv(std::string_view data, const std::string& scratch);
// calibration::parse_step_latency_csv.
void fuzz_step_latency_csv(std::string_view data, const std::string& scratch);
// experiments::Experiment::parse (an experiment file) beside a small base configuration (base.toml in
// the scratch file's directory); a small accepted experiment is checked (every point resolved and
// built) and its identity must be the same when parsed again.
void fuzz_experiment(std::string_view data, const std::string& scratch);
// The command line: the input's lines are the arguments of `servesim run|sweep|merge|list|estimate|
// report` (the first byte picks the command), run in-process in the scratch directory, which holds a
// small configuration, an experiment and a results database. Whatever the arguments: an exit code
// of 0, 1 or 2, and on failure one line on stderr that starts with "servesim: "; no exception
// escapes, no crash, no hang. Arguments are kept inside the scratch directory (a '/' outside --set
// becomes '_'), and runs are capped at a few requests.
void fuzz_command_line(std::string_view data, const std::string& scratch);

}  // namespace servesim::testing
