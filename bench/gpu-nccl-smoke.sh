#!/usr/bin/env bash
# A check of the CUDA build's NCCL path, on one GPU, in about a minute:
# builds build-gpu (scripts/gpu-build), then runs configs/tiny-cpu.toml on
# the GPU with every stage (single, restore, node stage of one NCCL rank,
# its restore) and prints stages.node's status, world size, communication
# and rank hosts. Files in $OUT (default /tmp/pilot-bench-out): bench.log,
# build.log, run.log, results.json.
# Usage: bench/gpu-nccl-smoke.sh
source "$(dirname "$0")/lib.sh"
fresh_work /tmp/pilot-nccl-smoke
log() { echo "bench: $*" | tee -a "$out/bench.log"; }
log "date $(date -u +%FT%TZ) host $(hostname)"
gpu_build
timeout 200 build-gpu/runner/pilot-runner run --config configs/tiny-cpu.toml --out "$work/a" \
  --set training.device=cuda --set parallel.nproc=1 --set parallel.launcher=local --stage all \
  >"$out/run.log" 2>&1
log "run exit $?"
tail -4 "$out/run.log" | tee -a "$out/bench.log"
cp "$work/a/results.json" "$out/results.json" 2>/dev/null
python3 - "$work/a/results.json" <<'PY' | tee -a "$out/bench.log"
import json, sys
n = json.load(open(sys.argv[1]))["stages"]["node"]
print("node:", n["status"], "world", n["world_size"], "comm", n["comm"], "hosts", [r["host"] for r in n["ranks"]])
PY
