#!/usr/bin/env bash
# Step-to-step variation of the runner's single-GPU step, from the device's
# own record: a short pilot of configs/gpt-1b.toml (the shape of
# gpu-throughput.sh), then --trace of PILOT_TRACE_STEPS steps (default 12)
# cut into steps by bench/trace_summary.py --per-step, which compares the
# slowest step with the median one kernel by kernel.
# One call on an H200 (about 3 minutes with the build); log in
# $OUT/step-trace.log.
# Usage: bench/gpu-step-trace.sh
source "$(dirname "$0")/lib.sh"
fresh_work /tmp/pilot-step-trace
smi_log=$out/step-trace.log
log() { echo "step-trace: $*" | tee -a "$smi_log"; }
gpu_build
smi_start runner
timeout 200 build-gpu/runner/pilot-runner run --config configs/gpt-1b.toml --set run.grad_accum=1 \
  --set training.steps=6 --set checkpoint.at_step=5 --set training.warmup_steps=2 \
  --set training.precision_check_steps=0 --set training.recompute_check_steps=0 \
  --set training.memory_calibration_steps=0 --set "checkpoint.dir=\"$work/ck\"" --out "$work/runner" \
  --trace "$work/trace.json" --trace-steps "${PILOT_TRACE_STEPS:-12}" 2>&1 | grep -v " step " | tail -3 | tee -a "$smi_log"
smi_stop runner
python3 bench/trace_summary.py --per-step --top 12 "$work/trace.json" | tee -a "$smi_log"
