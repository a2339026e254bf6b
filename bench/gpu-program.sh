#!/usr/bin/env bash
# Program mode on an H200, in one call, without Slurm:
#   1. build (scripts/gpu-build: runner for the checkpoint listing,
#      supervisor, prolog);
#   2. examples/train_gpt.py at gpt-1b's shape (24 layers, d_model 2048,
#      16 heads, seq 2048, micro-batch 8, bf16 autocast, AdamW) alone, the
#      probe inactive: its own step times and torch.cuda.max_memory_allocated;
#   3. the same program as the pilot under pilot-supervisor (program mode,
#      single stage: reference with a checkpoint at K, the folder listed,
#      a fresh resumed process, compared in tolerance mode), the probe
#      writing every step's record to the supervisor's FIFO;
#   4. the anchor (plain PyTorch, gpt-1b shape) in the same call.
# Figures: the program's own median step time alone and supervised (the
# cost of probe + supervisor), the supervisor's clock for the same steps,
# the probe's peak allocated against the program's own, the restore's
# relative loss difference, the whole pilot's wall time.
# Usage: bench/gpu-program.sh [ANCHOR_SCRIPT]   (default .carry/py_gpt_step.py)
source "$(dirname "$0")/lib.sh"
fresh_work /tmp/pilot-prog
log() { echo "bench: $*" | tee -a "$out/bench.log"; }

log "date $(date -u +%FT%TZ) host $(hostname) commit $(git rev-parse --short HEAD 2>/dev/null || echo none)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee -a "$out/bench.log"
python3 -c 'import torch; print("torch", torch.__version__)' | tee -a "$out/bench.log"
gpu_build
b=$PWD/build-gpu
steps=${PILOT_BENCH_STEPS:-16}
at=$((steps / 2))
shape=(--layers 24 --d-model 2048 --heads 16 --seq-len 2048 --micro-batch 8 --vocab 50304
       --device cuda --precision bf16)

log "program alone ($steps steps, probe inactive)"
t0=$SECONDS
timeout 240 env -u PILOT_METRICS python3 examples/train_gpt.py "${shape[@]}" --steps "$steps" \
  >"$out/alone.log" 2>&1
log "alone exit $? in $((SECONDS - t0)) s"

state=$work/state
mkdir -p "$state"
cat >"$work/pilot.conf" <<CONF
state_dir = "$state"
runner_path = "$b/runner/pilot-runner"
probe_path = "$PWD/python"
key_file = "$work/verdict.key"
prolog_timeout_seconds = 120
verify_timeout_seconds = 300
CONF
quoted=$(printf '"%s", ' "${shape[@]}")
cat >"$work/program.toml" <<TOML
[run]
name = "gpt-1b-program"
seq_len = 2048
micro_batch = 8
target_tokens = 2.6e10
gpus_per_node = 1
[program]
command = ["python3", "$PWD/examples/train_gpt.py", ${quoted%, }]
workdir = "$work"
step_timeout = 300
[training]
steps = $steps
warmup_steps = 4
device = "cuda"
[checkpoint]
at_step = $at
[eval]
restore_tolerance = 1e-3
[parallel]
nproc = 1
TOML
job=7
export SLURM_JOB_ID=$job SLURM_JOB_UID=$(id -u) SLURM_JOB_GID=$(id -g) SLURM_JOB_USER=$(id -un) \
       SLURM_JOB_NUM_NODES=1 SLURMD_NODENAME=$(hostname -s) SLURM_SUBMIT_DIR=$work \
       SPANK__SLURM_SPANK_OPTION_pilot_pilot=$work/program.toml \
       SPANK_SLURM_PILOT_CONFIG=$work/program.toml
log "prolog"
"$b/prolog/pilot-prolog" --policy "$work/pilot.conf" 2>&1 | tee -a "$out/bench.log"
unset SPANK__SLURM_SPANK_OPTION_pilot_pilot SPANK_SLURM_PILOT_CONFIG
log "supervisor: program, single stage (reference, listing, resumed)"
t0=$SECONDS
timeout 400 "$b/supervisor/pilot-supervisor" --job $job --uid "$(id -u)" --gid "$(id -g)" \
  --policy "$work/pilot.conf" --stage single --cwd "$work" >"$out/supervised.log" 2>&1
log "supervisor exit $? in $((SECONDS - t0)) s"
grep "pilot: supervisor" "$out/supervised.log" | tee -a "$out/bench.log"
cp "$state/jobs/$job/results.json" "$out/program-results.json" 2>/dev/null
cp "$state/jobs/$job/checkpoint-files-single.json" "$out/" 2>/dev/null
python3 - "$out/alone.log" "$out/supervised.log" "$out/program-results.json" "$at" <<'PY' | tee -a "$out/bench.log"
import json, re, statistics, sys
alone_log, sup_log, res_path, at = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
def steps(path):
    out = {}
    for line in open(path, errors="replace"):
        m = re.match(r"step (\d+) loss (\S+) lr \S+ ms (\S+)", line)
        if m:
            out.setdefault(int(m.group(1)), []).append((float(m.group(2)), float(m.group(3))))
    return out
def median_ms(s, skip):
    v = [ms for k, rows in s.items() for (_, ms) in rows[:1] if k > 4 and k not in skip]
    return statistics.median(v) if v else float("nan")
a, s = steps(alone_log), steps(sup_log)
peak = [int(m.group(1)) for m in re.finditer(r"max_memory_allocated (\d+)", open(alone_log).read())]
ma, ms = median_ms(a, set()), median_ms(s, {at, at + 1})
print("program alone: median step %.1f ms over %d steps; max_memory_allocated %.3f GiB" %
      (ma, len(a), (peak[0] if peak else 0) / 2**30))
print("program supervised (reference): median step %.1f ms (its own clock); cost %+.2f%%" %
      (ms, (ms / ma - 1) * 100))
d = json.load(open(res_path))
st = d["stages"]["single"]
t, r = st["timings"], st["restore"]
probe_peak = max(x or 0 for x in (st["memory"]["peak_allocated_bytes"], st["memory_first_step"]["peak_allocated_bytes"]))
print("supervisor's clock: median step %.1f ms, %.0f tokens/s" % (t["step_ms_median"], st["tokens_per_second"]))
own = peak[0] if peak else 0
print("probe peak allocated %.3f GiB (step %d; first step %.3f); program's own %.3f GiB; diff %.2f MiB (%.4f%%)" %
      (probe_peak / 2**30, st["memory"]["step"],
       (st["memory_first_step"]["peak_allocated_bytes"] or 0) / 2**30,
       own / 2**30, (probe_peak - own) / 2**20, (probe_peak / own - 1) * 100 if own else float("nan")))
print("restore: mode %s equal %s max_rel_loss_diff %.3g (steps %d->%d) detail %s" %
      (r["mode"], r["equal"], r["max_rel_loss_diff"], r["from_step"], r["to_step"], r["detail"] or "-"))
sup = d["supervisor"]
print("pilot wall %.1f s; processes %s" % (sup["wall_seconds"],
      [(p["process"], p["exit_code"], round(p["wall_seconds"], 1)) for p in d["program"]["processes"]]))
print("checkpoint: %d files, %.2f GiB; problems %s" % (d["program"]["checkpoint_file_count"],
      d["program"]["checkpoint_bytes"] / 2**30, d["program"]["problems"]))
for g in sup["device_memory"]:
    if g["peak_used_bytes"]:
        print("nvml gpu %d peak used %.2f GiB" % (g["index"], g["peak_used_bytes"] / 2**30))
PY
log "verify the program's checkpoint as the epilog would"
timeout 200 "$b/runner/pilot-runner" verify --program-checkpoint "$work/state/jobs/$job/work/pilot-checkpoints/single" \
  --expect-manifest "$state/jobs/$job/checkpoint-files-single.json" --json >"$out/verify.json" 2>"$out/verify.err"
log "verify exit $?: $(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["format"], d["tensors"], "tensors, optimizer", d["optimizer_state"], "manifest_ok", d["manifest_ok"])' "$out/verify.json" 2>&1)"

log "anchor eager (same shape)"
timeout 150 python3 "$anchor" --layers 24 --dmodel 2048 --heads 16 --seq 2048 --mb 8 \
  >"$out/anchor-eager.json" 2>>"$out/anchor.err"
log "anchor exit $?: $(cat "$out/anchor-eager.json")"
rm -rf "$work"
