#!/usr/bin/env bash
# Memory-model accuracy on one GPU: runs pilot-runner at a calibration shape
# and at other shapes of configs/gpt-1b.toml, and keeps each results.json
# (under $OUT/memory-model/). The predictions are made afterwards, from the
# calibration run alone, by `pilot plan` (bench/RESULTS.md shows the table).
#
# Usage: bench/memory-model.sh     (on the GPU machine; builds build-gpu)
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/pilot-bench-out}/memory-model
work=/tmp/pilot-mm
rm -rf "$work"
mkdir -p "$out" "$work"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt"
if ! scripts/gpu-build build-gpu >"$out/build.log" 2>&1; then
  tail -40 "$out/build.log"
  echo "memory-model: build FAILED"
  exit 1
fi
runner=build-gpu/runner/pilot-runner
# name micro_batch seq_len recompute
shapes=("calib 8 2048 false" "mb4 4 2048 false" "mb2 2 2048 false" "mb12 12 2048 false"
        "seq1024 8 1024 false" "seq4096 4 4096 false" "ac8 8 2048 true" "ac16 16 2048 true")
for s in "${shapes[@]}"; do
  read -r name mb seq ac <<<"$s"
  t0=$SECONDS
  timeout 150 "$runner" run --config configs/gpt-1b.toml --set run.grad_accum=1 \
    --set run.micro_batch="$mb" --set run.seq_len="$seq" \
    --set training.activation_checkpointing="$ac" --set training.steps=6 \
    --set checkpoint.at_step=3 --set training.warmup_steps=2 \
    --set training.precision_check_steps=0 --set training.recompute_check_steps=0 \
    --set "checkpoint.dir=\"$work/ck-$name\"" --out "$work/$name" >"$out/$name.log" 2>&1
  rc=$?
  cp "$work/$name/results.json" "$out/$name.json" 2>/dev/null
  python3 - "$work/$name/results.json" "$name" "$rc" "$((SECONDS - t0))" <<'PY'
import json, sys
try:
    s = json.load(open(sys.argv[1]))["stages"]["single"]
    m = s["memory"]
    g = lambda k: round((m.get(k) or 0) / 2**30, 3)
    print(f"memory-model: {sys.argv[2]} exit {sys.argv[3]} {sys.argv[4]}s alloc {g('peak_allocated_bytes')} "
          f"reserved {g('peak_reserved_bytes')} device {g('device_used_bytes')} GiB")
except Exception as e:
    print(f"memory-model: {sys.argv[2]} exit {sys.argv[3]}: no results ({e})")
PY
  rm -rf "$work/ck-$name"
done
