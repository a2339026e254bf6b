#!/usr/bin/env bash
# A sharded run whose training state does not fit one GPU: the single stage
# of configs/llama-8b.toml (8B parameters, ~120 GiB of fp32 weights,
# gradients and AdamW state before any activation) on one GPU runs at the
# depth that fits (runner/single/depth.h), and `pilot plan` extends its
# figures per layer to full depth, sharded over the run's GPUs. The
# prediction is recorded for the day an 8-GPU machine checks it.
#
# Random tokens (the config's u32 files are not on the GPU machine), 8
# steps with the checkpoint at 4, and training.memory_cap_mb (default 32768
# here, PILOT_DEPTH_CAP_MB) so that the checkpoint of the reduced model
# (12 bytes per parameter) stays well inside the machine's disk.
#
# Usage: bench/gpu-depth.sh           (on the GPU machine; builds build-gpu
#                                      unless PILOT_SKIP_BUILD=1)
#        bench/gpu-depth.sh predict DIR [PILOT]   (anywhere pilot is built)
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/pilot-bench-out}/depth
log() { echo "depth: $*"; }
plan() {
  local dir=$1 pilot=${2:-build/cli/pilot} policy
  policy=$(mktemp)
  printf 'state_dir = "%s"\nhardware_catalog = "%s"\n' "$(mktemp -d)" "$PWD/etc/hardware.toml" >"$policy"
  for g in 8 32; do
    local nodes=$((g / 8))
    "$pilot" plan --json --policy "$policy" --config "$dir/config.toml" --nodes "$nodes" \
      --gpus-per-node 8 --gpu H200-141 "$dir/results.json" >"$dir/plan-$g.json"
    python3 - "$dir/plan-$g.json" "$g" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
o = next(x for x in p["options"] if x["gpu"] == "H200-141")
print(f"depth: plan sharded over {sys.argv[2]} GPUs: predicted {o['predicted_bytes'] / 2**30:.2f} GiB per GPU "
      f"({o['memory_basis']}), {o['tokens_per_second_per_gpu']:.0f} tokens/s per GPU, "
      f"step {o['step_ms_at_scale']:.0f} ms, fits {o['fits']}")
for n in p.get("assumptions", []):
    if n.startswith("depth") or "checkpointed" in n:
        print("depth:   " + n)
PY
  done
}
if [[ ${1:-} == predict ]]; then
  plan "${2:-$out}" "${3:-build/cli/pilot}"
  exit 0
fi
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
work=/tmp/pilot-depth
rm -rf "$work" "$out"
mkdir -p "$out" "$work"
if [[ ${PILOT_SKIP_BUILD:-0} != 1 ]]; then
  scripts/gpu-build build-gpu >"$out/build.log" 2>&1 || { tail -40 "$out/build.log"; log "build FAILED"; exit 1; }
fi
# The config with random tokens instead of its files.
sed -e 's/^format = "u32".*/format = "random"/' -e '/^train = /d' -e '/^eval = /d' \
  configs/llama-8b.toml >"$work/llama-8b-random.toml"
cp "$work/llama-8b-random.toml" "$out/config.toml"
t0=$SECONDS
timeout 420 build-gpu/runner/pilot-runner run --config "$work/llama-8b-random.toml" --stage single \
  --set training.steps=8 --set checkpoint.at_step=4 \
  --set training.warmup_steps=2 --set training.precision_check_steps=0 \
  --set training.recompute_check_steps=0 --set training.memory_calibration_steps=2 \
  --set training.memory_cap_mb="${PILOT_DEPTH_CAP_MB:-32768}" \
  --set "checkpoint.dir=\"$work/ck\"" --out "$work/run" >"$out/run.log" 2>&1
rc=$?
cp "$work/run/results.json" "$out/results.json" 2>/dev/null
grep -E "reduced depth|pilot: single" "$out/run.log" | head -8
python3 - "$out/results.json" "$rc" "$((SECONDS - t0))" <<'PY'
import json, sys
try:
    s = json.load(open(sys.argv[1]))["stages"]["single"]
except Exception as e:
    print(f"depth: exit {sys.argv[2]}: no results ({e})"); sys.exit(0)
r = s.get("reduced_depth") or {}
m = s["memory"]
print(f"depth: exit {sys.argv[2]} in {sys.argv[3]} s, status {s['status']}, layers {r.get('layers')} of "
      f"{r.get('full_layers')}, params {s['shape']['params']}, peak allocated "
      f"{(m.get('peak_allocated_bytes') or 0) / 2**30:.2f} GiB (predicted {r.get('predicted_bytes', 0) / 2**30:.2f} "
      f"by the analytic rule), device {(m.get('device_used_bytes') or 0) / 2**30:.2f} GiB, "
      f"restore equal {s['restore']['equal']}, {s['tokens_per_second']:.0f} tokens/s")
PY
rm -rf "$work/ck"
