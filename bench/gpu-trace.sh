#!/usr/bin/env bash
# Where the single-GPU step's time goes, pilot-runner against the anchor,
# in one call on an H200: builds (scripts/gpu-build), runs pilot-runner on
# configs/gpt-1b.toml at the anchor's shape with --trace (3 steady steps),
# traces the anchor's eager step (bench/anchor_trace.py, 3 steps), and
# prints both kernel summaries and their difference
# (bench/trace_summary.py). The log goes to $OUT/trace.log, the traces
# stay in /tmp/pilot-trace.
# Usage: bench/gpu-trace.sh [ANCHOR_SCRIPT]   (default .carry/py_gpt_step.py)
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/.." || exit 1
out=${OUT:-/tmp/pilot-bench-out}
anchor=${1:-.carry/py_gpt_step.py}
work=/tmp/pilot-trace
rm -rf "$work"
mkdir -p "$out" "$work"
log() { echo "trace: $*" | tee -a "$out/trace.log"; }
t0=$SECONDS
if ! timeout 240 scripts/gpu-build build-gpu >"$out/build.log" 2>&1; then
  tail -60 "$out/build.log"
  log "build FAILED"
  exit 1
fi
log "build ok in $((SECONDS - t0)) s"
runner=build-gpu/runner/pilot-runner
t0=$SECONDS
timeout 200 "$runner" run --config configs/gpt-1b.toml --set run.grad_accum=1 --set training.steps=6 \
  --set checkpoint.at_step=3 --set training.warmup_steps=2 --set training.precision_check_steps=0 \
  --set training.recompute_check_steps=0 --set training.memory_calibration_steps=0 \
  --set "checkpoint.dir=\"$work/ck\"" --out "$work/run" --trace "$work/runner-trace.json" 2>&1 |
  grep -v " step " | tail -8 | tee -a "$out/trace.log"
log "runner exit ${PIPESTATUS[0]} in $((SECONDS - t0)) s"
rm -rf "$work/ck"
timeout 120 python3 bench/anchor_trace.py "$anchor" "$work/anchor-trace.json" \
  --layers 24 --dmodel 2048 --heads 16 --seq 2048 --mb 8 2>&1 | tail -3 | tee -a "$out/trace.log"
python3 bench/trace_summary.py --steps 3 "$work/anchor-trace.json" "$work/runner-trace.json" | tee -a "$out/trace.log"
