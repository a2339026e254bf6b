#!/usr/bin/env bash
# A pilot under pilot-supervisor on an H200, in one call, without Slurm:
#   1. build (scripts/gpu-build: runner, supervisor, prolog, epilog);
#   2. pilot-prolog pins a job by hand (the job's variables as slurmd would
#      set them), so the supervisor finds a lock as in a job;
#   3. pilot-supervisor runs the single stage, the fresh restore process and
#      compares (tolerance mode on the GPU), sampling device memory (NVML);
#   4. the same shape with pilot-runner alone (it starts its own restore
#      process), for the supervisor's overhead;
#   5. the anchor (plain PyTorch, gpt-1b shape) in the same call.
# Logs and JSON go to $OUT (default /tmp/pilot-bench-out).
# Usage: bench/gpu-supervised.sh [ANCHOR_SCRIPT]   (default .carry/py_gpt_step.py)
source "$(dirname "$0")/lib.sh"
fresh_work /tmp/pilot-sup
log() { echo "bench: $*" | tee -a "$out/bench.log"; }

log "date $(date -u +%FT%TZ) host $(hostname) commit $(git rev-parse --short HEAD 2>/dev/null || echo none)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee -a "$out/bench.log"
gpu_build
b=$PWD/build-gpu
state=$work/state
mkdir -p "$state"
cat >"$work/pilot.conf" <<CONF
state_dir = "$state"
runner_path = "$b/runner/pilot-runner"
key_file = "$work/verdict.key"
prolog_timeout_seconds = 120
CONF
# The user's config: gpt-1b at the anchor's shape, a short pilot.
sed -e 's/^grad_accum = .*/grad_accum = 1/' -e 's/^steps = .*/steps = 16/' \
    -e 's/^warmup_steps = .*/warmup_steps = 4/' -e 's/^at_step = .*/at_step = 8/' \
    -e "s|^dir = .*|dir = \"$work/ck\"|" configs/gpt-1b.toml >"$work/gpt-1b.toml"
job=7
export SLURM_JOB_ID=$job SLURM_JOB_UID=$(id -u) SLURM_JOB_GID=$(id -g) SLURM_JOB_USER=$(id -un) \
       SLURM_JOB_NUM_NODES=1 SLURMD_NODENAME=$(hostname -s) \
       SPANK__SLURM_SPANK_OPTION_pilot_pilot=$work/gpt-1b.toml \
       SPANK_SLURM_PILOT_CONFIG=$work/gpt-1b.toml
log "prolog"
"$b/prolog/pilot-prolog" --policy "$work/pilot.conf" 2>&1 | tee -a "$out/bench.log"
unset SPANK__SLURM_SPANK_OPTION_pilot_pilot SPANK_SLURM_PILOT_CONFIG
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("lock instance", d["instance"], "problems", d["problems"])' \
  "$state/jobs/$job/lock.json" | tee -a "$out/bench.log"

log "supervisor: single + restore"
t0=$SECONDS
timeout 300 "$b/supervisor/pilot-supervisor" --job $job --uid "$(id -u)" --gid "$(id -g)" \
  --policy "$work/pilot.conf" --stage single --cwd "$work" >"$out/supervisor.log" 2>&1
log "supervisor exit $? in $((SECONDS - t0)) s"
grep "pilot: supervisor" "$out/supervisor.log" | tee -a "$out/bench.log"
cp "$state/jobs/$job/results.json" "$out/supervised-results.json" 2>/dev/null
python3 - "$out/supervised-results.json" <<'PY' | tee -a "$out/bench.log"
import json, sys
d = json.load(open(sys.argv[1]))
s, sup = d["stages"]["single"], d["supervisor"]
r = s["restore"]
print("supervised: exit", d["exit_code"], "instance", d["instance"][:8],
      "restore", r["mode"], "equal", r["equal"], "max_rel_loss_diff %.3g" % r["max_rel_loss_diff"],
      "compared_by_supervisor", sup["restore_compared"])
print("processes:", [(p["role"], p["exit_code"], round(p["wall_seconds"], 1)) for p in sup["processes"]])
print("tokens/s %.0f" % s["tokens_per_second"], "step_ms %.1f" % s["timings"]["step_ms"])
print("device memory source:", sup["device_memory_source"])
for g in sup["device_memory"]:
    if g["peak_used_bytes"]:
        print("  nvml gpu %d peak used %.2f GiB of %.2f" % (g["index"], g["peak_used_bytes"] / 2**30, g["total_bytes"] / 2**30))
m = s["memory"]
print("workload: device_used %.2f GiB, peak_reserved %.2f GiB" % ((m["device_used_bytes"] or 0) / 2**30, (m["peak_reserved_bytes"] or 0) / 2**30))
print("manifest sha256", sup["checkpoint_manifest_sha256"][:16], "env", len(sup["environment"]), "names")
PY
rm -rf "$work/ck"

log "runner alone: single (its own restore process)"
t0=$SECONDS
timeout 300 "$b/runner/pilot-runner" run --config "$work/gpt-1b.toml" --out "$work/plain" --stage single \
  >"$out/plain.log" 2>&1
log "runner alone exit $? in $((SECONDS - t0)) s"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); s=d["stages"]["single"]; print("plain: tokens/s %.0f step_ms %.1f restore equal %s" % (s["tokens_per_second"], s["timings"]["step_ms"], s["restore"]["equal"]))' \
  "$work/plain/results.json" | tee -a "$out/bench.log"
rm -rf "$work/ck"

log "anchor eager (same shape)"
timeout 150 python3 "$anchor" --layers 24 --dmodel 2048 --heads 16 --seq 2048 --mb 8 \
  >"$out/anchor-eager.json" 2>>"$out/anchor.err"
log "anchor exit $?: $(cat "$out/anchor-eager.json")"
rm -rf "$work"
