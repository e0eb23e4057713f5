#!/usr/bin/env bash
# Issue 13: the policy comparisons of docs/policies.md with 95% intervals. Each configuration runs
# REPS replications (a block bootstrap of the trace per seed, blocks of BLOCK_S trace seconds); the
# same seeds draw the same bootstrap for every configuration, so two configurations are compared
# replication by replication (the paired Student-t interval of their difference). Prints markdown.
# Needs build/servesim and ../shared/traces. Usage: scripts/policy_intervals.sh [REPS] [BLOCK_S]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/servesim
reps=${1:-5}
block=${2:-300}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

run() {  # name, then servesim run arguments
  local name=$1
  shift
  "$bin" run "$@" --set replication.block_s=$block --replications "$reps" --jobs 2 --no-db --json > "$tmp/$name.json"
}

table() {  # title, then names (files in $tmp); the first is the reference of the paired differences
  python3 - "$tmp" "$@" <<'PY'
import json, math, sys
tmp, title, names = sys.argv[1], sys.argv[2], sys.argv[3:]
T = {2: 12.706, 3: 4.303, 4: 3.182, 5: 2.776, 6: 2.571, 7: 2.447, 8: 2.365, 9: 2.306, 10: 2.262}
def ci(v):
    n = len(v); m = sum(v) / n
    sd = math.sqrt(sum((x - m) ** 2 for x in v) / (n - 1))
    return m, T[n] * sd / math.sqrt(n)
runs = {n: json.load(open(f"{tmp}/{n}.json"))["metrics"] for n in names}
print(f"{title}\n")
print("| configuration | SLO attainment | goodput req/s | TTFT p99 ms | attainment minus best's (paired) | real? |")
print("| --- | --- | --- | --- | --- | --- |")
best = max(names, key=lambda n: runs[n]["slo_attainment"]["mean"])
for n in names:
    a = [100 * x for x in runs[n]["slo_attainment"]["values"]]
    g = runs[n]["goodput_req_s"]["values"]
    t = runs[n]["ttft_ms_p99"]["values"]
    (am, ah), (gm, gh), (tm, th) = ci(a), ci(g), ci(t)
    if n == best:
        diff, real = "(best)", ""
    else:
        d = [x - y for x, y in zip(a, [100 * x for x in runs[best]["slo_attainment"]["values"]])]
        dm, dh = ci(d)
        diff = f"{dm:+.1f} [{dm - dh:+.1f}, {dm + dh:+.1f}]"
        real = "yes" if dm + dh < 0 else "no"
    print(f"| {n} | {am:.1f}% +- {ah:.1f} | {gm:.2f} +- {gh:.2f} | {tm:.0f} +- {th:.0f} | {diff} | {real} |")
print()
PY
}

A=experiments/policies/azure_schedulers.toml
P=experiments/policies/azure_pd.toml
for scale in 8 12; do
  run continuous $A --set workload.rate_scale=$scale
  run chunked512 $A --set workload.rate_scale=$scale --set scheduler.kind=chunked --set scheduler.max_num_batched_tokens=512
  run chunked2048 $A --set workload.rate_scale=$scale --set scheduler.kind=chunked --set scheduler.max_num_batched_tokens=2048
  run pd22 $P --set workload.rate_scale=$scale
  run pd31 $P --set workload.rate_scale=$scale --set cluster.prefill.replicas=3 --set cluster.decode.replicas=1
  table "Azure conversation trace, rate_scale = $scale, $reps replications (block bootstrap, ${block} s blocks)" \
    continuous chunked512 chunked2048 pd22 pd31
done

M=experiments/policies/mooncake_routers.toml
for scale in 4 6; do
  run round_robin $M --set router.kind=round_robin --set workload.rate_scale=$scale
  run least_outstanding $M --set router.kind=least_outstanding --set workload.rate_scale=$scale
  run prefix_affinity $M --set router.kind=prefix_affinity --set workload.rate_scale=$scale
  run prefix_affinity_4 $M --set router.kind=prefix_affinity --set router.balance_abs_threshold=4 --set workload.rate_scale=$scale
  table "Mooncake conversation trace, 16 replicas, rate_scale = $scale, $reps replications (block bootstrap, ${block} s blocks)" \
    round_robin least_outstanding prefix_affinity prefix_affinity_4
done
