#!/usr/bin/env bash
# Is the runner's single-GPU gap to the anchor its code, or its numbers?
# The anchor initialises like torch's modules (N(0, 1) tied embeddings:
# losses near 150), the runner like GPT-2 (N(0, 0.02)). On an H200 that
# runs at its power cap, the clocks follow what the kernels draw, and that
# depends on the data. This runs, on one GPU, alternately:
#   anchor          the anchor as it is;
#   anchor-runinit  the same step after bench/anchor_init.py gives it the
#                   runner's initialisation;
# PILOT_INIT_ROUNDS times (default 2), then the runner as configured
# (PILOT_INIT_RUNNER=0 leaves it out), with nvidia-smi's clock and power
# medians for each run. Log: $OUT/anchor-init.log.
# Usage: bench/gpu-anchor-init.sh [ANCHOR_SCRIPT]   (after scripts/gpu-build build-gpu)
source "$(dirname "$0")/lib.sh"
unset PYTORCH_ALLOC_CONF PYTORCH_CUDA_ALLOC_CONF
fresh_work /tmp/pilot-anchor-init
smi_log=$out/anchor-init.log
log() { echo "anchor-init: $*" | tee -a "$smi_log"; }
flags=(--layers 24 --dmodel 2048 --heads 16 --seq 2048 --mb 8 --warmup 5 --steps 20)
one() {
  local name=$1
  shift
  smi_start "$name"
  log "$name: $(timeout 120 python3 "$@" "${flags[@]}" 2>>"$work/err.log" | tail -1)"
  smi_stop "$name"
}
for ((r = 1; r <= ${PILOT_INIT_ROUNDS:-2}; ++r)); do
  one "anchor-$r" "$anchor"
  one "anchor-runinit-$r" bench/anchor_init.py "$anchor"
done
if [[ ${PILOT_INIT_RUNNER:-1} != 0 ]]; then
  smi_start runner
  timeout 200 build-gpu/runner/pilot-runner run "${throughput_shape[@]}" \
    --set "checkpoint.dir=\"$work/ck\"" --out "$work/runner" >"$work/runner.log" 2>&1
  smi_stop runner
  python3 -c "import json,sys; s=json.load(open(sys.argv[1]))['stages']['single']; print('anchor-init: runner', round(s['tokens_per_second']), 'tok/s, step', round(s['timings']['step_ms'], 2), 'ms, median', round(s['timings']['step_ms_median'], 2))" \
    "$work/runner/results.json" | tee -a "$smi_log"
fi
tail -3 "$work/err.log" 2>/dev/null
