#!/usr/bin/env bash
# A short libFuzzer run of every fuzz target (tests/fuzz), two at a time on the CI's two cores.
#
# Uses the sanitized build the sanitizer step made (scripts/sanitized_build.sh: clang with
# -fsanitize=fuzzer-no-link,address,undefined; built here if that step did not run), then fuzzes
# each target for SERVESIM_FUZZ_SECONDS (default 30) starting from its seed corpus. New inputs go
# to a scratch directory, never into the repository. One JUnit case per target (fuzz.<target>):
# it fails on a crash, a sanitizer report, an oracle failure, a leak or a 25 s hang, and its
# message names the saved input (build-san/artifacts/<target>/) to replay with
# `build-san/tests/fuzz/fuzz_<target> FILE`. Long runs: scripts/fuzz.sh TARGET SECONDS.
#
# Without clang (and libclang-rt-14-dev, which holds libFuzzer) the step fails: scripts/bootstrap.sh
# installs both.
set -uo pipefail
cd "$(dirname "$0")/../.."

seconds=${SERVESIM_FUZZ_SECONDS:-30}
dir=${SERVESIM_SAN_BUILD_DIR:-build-san}
results=build/ci-results
mkdir -p "$results"
scripts/sanitized_build.sh "$dir" || exit 1

mapfile -t targets < <(SERVESIM_SAN_BUILD_DIR="$dir" SERVESIM_FUZZ_NO_BUILD=1 scripts/fuzz.sh --list)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1

fuzz_one() {
  local t=$1
  mkdir -p "$work/$t" "$dir/artifacts/$t"
  local flags=(-max_len=4096 -timeout=25 -rss_limit_mb=2560 -print_final_stats=1 -max_total_time="$seconds"
               -artifact_prefix="$dir/artifacts/$t/")
  [ -f "tests/fuzz/$t.dict" ] && flags+=(-dict="tests/fuzz/$t.dict")
  "$dir/tests/fuzz/fuzz_$t" "${flags[@]}" "$work/$t" "tests/fuzz/corpus/$t" >"$work/$t.log" 2>&1
  echo $? >"$work/$t.status"
}

# Two at a time.
start=$(date +%s)
running=0
for t in "${targets[@]}"; do
  fuzz_one "$t" &
  running=$((running + 1))
  if [ "$running" -ge 2 ]; then
    wait -n
    running=$((running - 1))
  fi
done
wait
done_at=$(date +%s)

failed=0
{
  echo '<?xml version="1.0" encoding="utf-8"?>'
  echo "<testsuite name=\"fuzz\" tests=\"${#targets[@]}\">"
  for t in "${targets[@]}"; do
    status=$(cat "$work/$t.status" 2>/dev/null || echo 1)
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/$t.log" | tail -1)
    echo "30-fuzz: $t: exit $status, ${runs:-?} inputs in ${seconds} s" >&2
    if [ "$status" -eq 0 ]; then
      echo "  <testcase classname=\"fuzz\" name=\"$t\"/>"
    else
      failed=1
      artifact=$(sed -n "s/.*Test unit written to \(.*\)$/\1/p" "$work/$t.log" | tail -1)
      reason=$(grep -m1 -E "ORACLE FAILURE|an exception escaped|ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error" \
                 "$work/$t.log" | sed 's/&/\&amp;/g; s/</\&lt;/g; s/>/\&gt;/g; s/"/\&quot;/g' | cut -c1-400)
      echo "  <testcase classname=\"fuzz\" name=\"$t\"><failure message=\"${reason:-exit $status}; input: ${artifact:-none}\"/></testcase>"
      tail -30 "$work/$t.log" >&2
    fi
  done
  echo "</testsuite>"
} >"$results/fuzz.xml"
echo "30-fuzz: fuzzing $((done_at - start)) s (${#targets[@]} targets x ${seconds} s, 2 at a time)"
exit $failed
