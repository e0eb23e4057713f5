#!/usr/bin/env bash
# Regenerates the leave-one-model-out table of docs/fidelity.md from the shared operator tables.
# usage: scripts/fidelity_tables.sh [build-dir]   (prints markdown rows; takes a few minutes)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$root/build}/servesim
R=${SERVESIM_SHARED_DIR:-$root/../shared}/reference-data/operator-profiles
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
ops="attn_pre_proj attn_post_proj mlp_up_proj mlp_down_proj emb input_layernorm attn_rope post_attention_layernorm mlp_act add"
row() {  # gpu dir model label profile
  local cal=(); [ "$5" = default ] || cal=(--calibration "$5")
  "$bin" validate-ops --profile "$R/compute/$2/$3/mlp.csv" --gpu "$1" "${cal[@]}" --min-tokens 16 --json \
    | python3 -c '
import json, sys
d = json.load(sys.stdin); by = d["mape_by_op"]
cells = [f"{by[o]:.1f}" if o in by else "-" for o in sys.argv[4:]]
print(f"| {sys.argv[1]} | {sys.argv[2]} | {sys.argv[3]} | " + " | ".join(cells) + " | %.1f |" % d["mape_overall"])
' "$1" "$4" "$6" $ops
}
fold() {  # gpu dir held-model label
  local base; base=$(basename "$3")
  "$bin" fit --from-operator-csv "$R" --gpu "$1" --exclude-model "$base" --out "$tmp/$1-$base.toml" >/dev/null
  row "$1" "$2" "$3" "$4" "$tmp/$1-$base.toml" lomo
  row "$1" "$2" "$3" "$4" "$root/calibration/profiles/$1.toml" shipped
  row "$1" "$2" "$3" "$4" default default
}
fold a100-80gb-sxm a100 meta-llama/Llama-2-70b-hf Llama-2-70B
fold a100-80gb-sxm a100 meta-llama/Meta-Llama-3-8B Llama-3-8B
fold h100-sxm h100 meta-llama/Llama-2-70b-hf Llama-2-70B
fold h100-sxm h100 meta-llama/Llama-2-7b-hf Llama-2-7B
