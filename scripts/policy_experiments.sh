#!/usr/bin/env bash
# Runs issue 4's policy experiments and prints their tables as markdown (docs/policies.md quotes
# them). Needs build/servesim and the traces in ../shared/traces. About 15 s (docs/policies.md).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/servesim

row() {  # label, then servesim run arguments
  local label=$1
  shift
  "$bin" run "$@" --no-db --json | python3 -c "
import json, sys
j = json.load(sys.stdin)
label = sys.argv[1]
print('| %s | %.1f%% | %.0f | %.0f | %.1f | %.1f | %.2f | %.1f%% | %.3f |' % (
    label, 100 * j['prefix_token_hit_rate'], j['ttft_ms']['p50'], j['ttft_ms']['p99'],
    j['tpot_ms']['p50'], j['tpot_ms']['p99'], j['goodput_req_s'], 100 * j['slo_attainment'],
    j['cost_usd_per_mtok_output']))
" "$label"
}

echo "### (a) Mooncake conversation trace, 16 x Llama-3-8B (128k context) on H100-SXM, prefix caching, chunked prefill"
echo
for scale in 1 4 6; do
  echo "rate_scale = $scale"
  echo
  echo "| router | token hit rate | TTFT p50 ms | TTFT p99 ms | TPOT p50 ms | TPOT p99 ms | goodput req/s | SLO attainment | \$/1M output tokens |"
  echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
  for router in round_robin least_outstanding prefix_affinity; do
    row "$router" experiments/policies/mooncake_routers.toml --set router.kind=$router --set workload.rate_scale=$scale
  done
  row "least_outstanding, oracle = true (upper bound)" experiments/policies/mooncake_routers.toml \
    --set router.kind=least_outstanding --set router.oracle=true --set workload.rate_scale=$scale
  row "prefix_affinity, balance_abs_threshold = 4" experiments/policies/mooncake_routers.toml \
    --set router.kind=prefix_affinity --set router.balance_abs_threshold=4 --set workload.rate_scale=$scale
  echo
done

echo "### (b) Azure conversation trace on 4 x H100-SXM (Llama-3-8B)"
echo
for scale in 8 12 16; do
  echo "rate_scale = $scale"
  echo
  echo "| configuration | token hit rate | TTFT p50 ms | TTFT p99 ms | TPOT p50 ms | TPOT p99 ms | goodput req/s | SLO attainment | \$/1M output tokens |"
  echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
  row "continuous, 4 unified" experiments/policies/azure_schedulers.toml --set workload.rate_scale=$scale
  row "chunked 512, 4 unified" experiments/policies/azure_schedulers.toml --set workload.rate_scale=$scale \
    --set scheduler.kind=chunked --set scheduler.max_num_batched_tokens=512
  row "chunked 2048, 4 unified" experiments/policies/azure_schedulers.toml --set workload.rate_scale=$scale \
    --set scheduler.kind=chunked --set scheduler.max_num_batched_tokens=2048
  row "PD 2 prefill + 2 decode" experiments/policies/azure_pd.toml --set workload.rate_scale=$scale
  row "PD 3 prefill + 1 decode" experiments/policies/azure_pd.toml --set workload.rate_scale=$scale \
    --set cluster.prefill.replicas=3 --set cluster.decode.replicas=1
  echo
done
