#!/usr/bin/env bash
# Long local fuzzing of one servesim reader with libFuzzer (clang; Debian's clang and
# libclang-rt-14-dev).
#
#   scripts/fuzz.sh TARGET SECONDS [libFuzzer flags...]   fuzz TARGET for SECONDS
#   scripts/fuzz.sh --merge TARGET                        fold what it found into the seed corpus
#   scripts/fuzz.sh --list                                the targets
#
# Uses the sanitized build build-san/ (scripts/sanitized_build.sh: clang, libFuzzer coverage, ASan
# + UBSan; override with SERVESIM_SAN_BUILD_DIR), building it on first use. The inputs a run finds
# are kept in build-san/corpus/TARGET/ (grown from the seed corpus tests/fuzz/corpus/TARGET/, which is only
# read); a crash, an oracle failure or a timeout stops the run and is saved under
# build-san/artifacts/TARGET/. Replay one with `build-san/tests/fuzz/fuzz_TARGET FILE`, then make
# it a test in tests/reliability/ before fixing it.
#
# --merge minimizes (libFuzzer -merge=1) the found inputs into tests/fuzz/corpus/TARGET/: the
# hand-written seed-* files always stay, an input is added only when it reaches a code edge the
# others do not, inputs larger than 4 KiB are never kept and at most 100 are (the smallest), so the
# repository's corpus stays small. Every input there is replayed by the ordinary test suite
# (tests/reliability/fuzz_corpus_test.cc).
set -euo pipefail
cd "$(dirname "$0")/.."

dir=${SERVESIM_SAN_BUILD_DIR:-${SERVESIM_FUZZ_BUILD_DIR:-build-san}}
max_len=4096
max_kept=100  # merged inputs kept in the repository per target

usage() {
  sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
}

setup() {
  # SERVESIM_FUZZ_NO_BUILD=1: use the binaries as built (to run several targets side by side).
  if [ -n "${SERVESIM_FUZZ_NO_BUILD:-}" ]; then return 0; fi
  scripts/sanitized_build.sh "$dir" >/dev/null
}

targets() { sed -n "s/^fuzz_target_names = \[\(.*\)\]/\1/p" tests/fuzz/meson.build | tr -d "' " | tr ',' '\n'; }
known() { sed -n "s/^fuzz_target_names = \[\(.*\)\]/\1/p" tests/fuzz/meson.build | grep -q "'$1'"; }

# libFuzzer flags shared with the CI step: leaks are real failures, a 25 s input is a hang.
common_flags() {
  local target=$1
  local flags=(-max_len=$max_len -timeout=25 -rss_limit_mb=2560 -print_final_stats=1
               -artifact_prefix="$dir/artifacts/$target/")
  [ -f "tests/fuzz/$target.dict" ] && flags+=(-dict="tests/fuzz/$target.dict")
  printf '%s\n' "${flags[@]}"
}

[ $# -ge 1 ] || usage
case "$1" in
  --list)
    targets
    ;;
  --merge)
    [ $# -eq 2 ] || usage
    target=$2
    known "$target" || { echo "fuzz: unknown target '$target'; targets: $(targets | xargs)" >&2; exit 2; }
    setup
    seeds="tests/fuzz/corpus/$target"
    work="$dir/corpus/$target"
    fresh=$(mktemp -d)
    trap 'rm -rf "$fresh"' EXIT
    cp "$seeds"/seed-* "$fresh"/ 2>/dev/null || true
    mkdir -p "$work" "$dir/artifacts/$target"
    mapfile -t flags < <(common_flags "$target")
    # -use_counters=0: an input is kept for a new edge, not for a new hit count of an edge; the
    # repository's corpus stays a few dozen small files per target.
    "$dir/tests/fuzz/fuzz_$target" -merge=1 -use_counters=0 "${flags[@]}" "$fresh" "$seeds" "$work" 2>&1 | tail -1
    find "$seeds" -type f ! -name 'seed-*' -delete
    # At most $max_kept inputs besides the seeds, the smallest first.
    find "$fresh" -type f ! -name 'seed-*' -size -$((max_len + 1))c -printf '%s %p\n' | sort -n |
      head -n "$max_kept" | cut -d' ' -f2- | xargs -r cp -t "$seeds"/
    echo "fuzz: $seeds now holds $(ls "$seeds" | wc -l) inputs, $(du -sk "$seeds" | cut -f1) KiB"
    ;;
  -*)
    usage
    ;;
  *)
    [ $# -ge 2 ] || usage
    target=$1 seconds=$2
    shift 2
    known "$target" || { echo "fuzz: unknown target '$target'; targets: $(targets | xargs)" >&2; exit 2; }
    setup
    mkdir -p "$dir/corpus/$target" "$dir/artifacts/$target"
    mapfile -t flags < <(common_flags "$target")
    export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
    export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
    exec "$dir/tests/fuzz/fuzz_$target" "${flags[@]}" -max_total_time="$seconds" "$@" \
      "$dir/corpus/$target" "tests/fuzz/corpus/$target"
    ;;
esac
