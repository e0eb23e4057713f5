#!/usr/bin/env bash
# Prints docs/fidelity.md's end-to-end table: every stage of the real vLLM serving runs
# (../shared/reference-data/serving-runs) simulated out of the box (the shipped H100 profile, no
# per-run tuning), measured against simulated, as markdown. About a second.
# usage: scripts/serving_fidelity_table.sh [build-dir] [validate-serving options...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$root/build}/servesim
shift || true
runs=${SERVESIM_SHARED_DIR:-$root/../shared}/reference-data/serving-runs/stages.tsv
"$bin" validate-serving "$runs" --json "$@" | python3 -c '
import json, sys
j = json.load(sys.stdin)
def fig(s, m, st):
    for f in s["figures"]:
        if f["metric"] == m and f["stat"] == st:
            return f
    return None
def cell(s, m, st, scale=1e3, digits=1):
    f = fig(s, m, st)
    if not f: return "-"
    return "%.*f / %.*f (%+.1f%%)" % (digits, f["measured"] * scale, digits, f["simulated"] * scale, 100 * f["error"])
print("| stage | TTFT mean ms | TTFT p90 | TTFT p99 | ITL mean ms | E2E mean s | E2E p90 | E2E p99 |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
for s in j["stages"]:
    label = s["label"].replace("mixtral-8x7b-v0-1", "mixtral").replace("llama-2-7b", "llama")
    if s["overloaded"]:
        f = fig(s, "failed", "requests"); t = fig(s, "throughput", "req/s")
        label += " (overloaded: %d / %d failed; %.3f / %.3f req/s)" % (f["measured"], f["simulated"], t["measured"], t["simulated"])
    print("| %s | %s | %s | %s | %s | %s | %s | %s |" % (label, cell(s, "ttft", "mean"), cell(s, "ttft", "p90"),
          cell(s, "ttft", "p99"), cell(s, "itl", "mean", 1e3, 2), cell(s, "e2e", "mean", 1, 2), cell(s, "e2e", "p90", 1, 2),
          cell(s, "e2e", "p99", 1, 2)))
print()
print("mean |error| over the stages the server kept up with: " +
      ", ".join("%s %.1f%%" % (k.replace("_mae", "").replace("_", " "), 100 * v) for k, v in j["summary"].items()))
'
