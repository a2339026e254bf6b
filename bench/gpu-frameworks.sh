#!/usr/bin/env bash
# The framework integrations and the resume faults on one GPU, in one call,
# without Slurm. Each program is piloted as a job would be: pilot-prolog pins
# it, pilot-supervisor runs the single stage (reference to N with its save at
# K, the folder listed, a fresh resumed process from K+1 and, where its losses
# pass the tolerance, a second one from the same checkpoint that measures the
# kernels' noise), the checkpoint is verified as the epilog's verify step does,
# and pilot-epilog decides, signs and stores the verdict, which `pilot verdict`
# prints. Every program runs with the GPU's default kernels unless named:
#   hf_trainer      examples/hf_trainer.py (transformers Trainer, bf16, saves
#                   every K steps, an evaluation every 5): GO
#   hf_trainer_again the same again (the noise differs run to run): GO
#   hf_trainer_deterministic
#                   the same with training.deterministic: GO, for its step time
#   lightning       bench/programs/lightning_gpt.py (Lightning, bf16-mixed,
#                   two micro-batches a step): GO
#   leaky           bench/programs/leaky_gpt.py (a plain loop through
#                   slurm_pilot.loop that keeps every step's logits on the
#                   GPU): NO-GO naming the memory growth
#   hf_lost_warmup  bench/programs/hf_lost_warmup.py (a Trainer whose warm-up
#                   lives in a callback the Trainer does not save): NO-GO
#                   naming the learning rate after the resume
#   tiny            tests/program/tiny.py on cuda: GO
#   tiny_faults     the same with each resume fault (rng_not_restored,
#                   optimizer_not_saved, scheduler_reset,
#                   scheduler_stepped_twice, data_not_restored, state_outside,
#                   resume_ignored): NO-GO naming the cause
# For each restore the log shows, step by step, the relative difference of
# the resumed losses from the reference's and from the second resumed
# process's (the noise), which is what restore_first_tolerance and
# restore_noise_margin (pilot.conf(5)) are chosen from.
# Needs torch, transformers 5.x and lightning 2.x installed; nothing is
# downloaded. Logs, results.json, verify output and verdicts go to $OUT
# (default /tmp/pilot-bench-out), the summary to $OUT/bench.log.
# PILOT_BENCH_ANCHOR=FILE runs the anchor (../shared/anchors' py_gpt_step.py,
# carried) first, in the same call, for the step times' machine.
# Usage: [PILOT_BENCH_PROGRAMS="leaky hf_trainer"] [PILOT_BENCH_NO_CLI=1] [PILOT_BENCH_ANCHOR=FILE]
#        bench/gpu-frameworks.sh
source "$(dirname "$0")/lib.sh"
fresh_work /tmp/pilot-fw
log() { echo "bench: $*" | tee -a "$out/bench.log"; }

log "date $(date -u +%FT%TZ) host $(hostname) commit $(git rev-parse --short HEAD 2>/dev/null || echo none)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee -a "$out/bench.log"
python3 -c 'import torch, transformers, lightning; print("torch", torch.__version__, "transformers", transformers.__version__, "lightning", lightning.__version__)' 2>&1 | tee -a "$out/bench.log"
if [[ -n ${PILOT_BENCH_ANCHOR:-} ]]; then
  log "anchor: $(timeout 120 python3 "$PILOT_BENCH_ANCHOR" --mb 8 2>&1 | tail -1)"
fi
gpu_build
b=$PWD/build-gpu
# `pilot verdict` is the CLI's; gpu-build makes the root parts only
# (PILOT_BENCH_NO_CLI=1: the verdicts are summed up from their JSON).
t0=$SECONDS
if [[ -z ${PILOT_BENCH_NO_CLI:-} ]] &&
   timeout 180 cmake --build build-gpu --target pilot -j "$(nproc)" >>"$out/build.log" 2>&1; then
  log "pilot CLI built in $((SECONDS - t0)) s"
else
  log "pilot CLI did not build: verdicts summed up from their JSON"
fi
cli=$b/cli/pilot

state=$work/state
mkdir -p "$state"
cat >"$work/pilot.conf" <<CONF
state_dir = "$state"
runner_path = "$b/runner/pilot-runner"
probe_path = "$PWD/python"
hardware_catalog = "$PWD/etc/hardware.toml"
key_file = "$work/verdict.key"
signing_key_file = "$work/verdict-ed25519.key"
public_key_file = "$work/verdict-ed25519.pub"
# This machine's kernel has no Yama: ptrace_scope is named, not failed.
require_ptrace_scope = false
prolog_timeout_seconds = 120
verify_timeout_seconds = 200
epilog_timeout_seconds = 300
CONF
[[ -x $cli ]] && "$cli" keygen --policy "$work/pilot.conf" >>"$out/bench.log" 2>&1

# program_toml NAME STEPS AT COMMAND...: the pilot config of one program, one GPU.
program_toml() {
  local name=$1 steps=$2 at=$3
  shift 3
  local quoted
  quoted=$(printf '"%s", ' "$@")
  cat >"$work/$name.toml" <<TOML
[run]
name = "$name"
seq_len = 1024
micro_batch = 8
target_steps = 5000
gpus_per_node = 1
[program]
command = [${quoted%, }]
workdir = "$work"
step_timeout = 120
[training]
steps = $steps
warmup_steps = 2
device = "cuda"
deterministic = ${DETERMINISTIC:-false}
[checkpoint]
at_step = $at
[eval]
restore_tolerance = 1e-3
[parallel]
nproc = 1
TOML
}

# pilot NAME JOB EXPECT PATTERN: prolog, supervisor (single stage), verify,
# epilog and the verdict of $work/NAME.toml; EXPECT is GO or NO-GO, and a
# NO-GO's verdict must match PATTERN (grep -E, case-insensitive).
pilot() {
  local name=$1 job=$2 expect=$3 pattern=$4 t0=$SECONDS
  export SLURM_JOB_ID=$job SLURM_JOB_UID=$(id -u) SLURM_JOB_GID=$(id -g) SLURM_JOB_USER=$(id -un) \
         SLURM_JOB_NUM_NODES=1 SLURMD_NODENAME=$(hostname -s) SLURM_SUBMIT_DIR=$work \
         SPANK__SLURM_SPANK_OPTION_pilot_pilot=$work/$name.toml SPANK_SLURM_PILOT_CONFIG=$work/$name.toml \
         SPANK_SLURM_PILOT_CONFIG_SHA256=$(sha256sum "$work/$name.toml" | cut -d' ' -f1)
  "$b/prolog/pilot-prolog" --policy "$work/pilot.conf" >"$out/$name-prolog.log" 2>&1
  unset SPANK__SLURM_SPANK_OPTION_pilot_pilot SPANK_SLURM_PILOT_CONFIG SPANK_SLURM_PILOT_CONFIG_SHA256
  timeout 400 "$b/supervisor/pilot-supervisor" --job "$job" --uid "$(id -u)" --gid "$(id -g)" \
    --policy "$work/pilot.conf" --stage single --cwd "$work" >"$out/$name-supervisor.log" 2>&1
  log "$name: supervisor exit $? in $((SECONDS - t0)) s"
  cp "$state/jobs/$job/results.json" "$out/$name-results.json" 2>/dev/null
  python3 - "$out/$name-results.json" <<'PY' | tee -a "$out/bench.log"
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except (OSError, ValueError) as e:
    sys.exit("  no results: %s" % e)
s = d.get("stages", {}).get("single", {})
r = s.get("restore", {})
prog = d.get("program", {})
print("  processes %s" % [(p.get("process"), p.get("exit_code"), round(p.get("wall_seconds", 0), 1))
                         for p in prog.get("processes", [])])
print("  restore %s equal %s max_rel_loss_diff %s (steps %s->%s) %s" % (
    r.get("mode"), r.get("equal"), r.get("max_rel_loss_diff"), r.get("from_step"), r.get("to_step"),
    r.get("detail") or ""))
print("  first step rel %s (<= %s), noise steps %s, max ratio %s (margin %s)" % (
    r.get("first_rel_loss_diff"), r.get("first_tolerance"), r.get("noise_steps"),
    r.get("noise_max_ratio"), r.get("noise_margin")))
k = r.get("from_step") or 0
ref = s.get("losses", [])[k:]
res, rep = r.get("resumed_losses", []), r.get("repeat_losses", [])
rel = lambda a, b: abs(a - b) / max(abs(b), 1e-12)
print("  rel(res,ref) %s" % " ".join("%.1e" % rel(a, b) for a, b in zip(res, ref)))
if rep:
    print("  rel(rep,res) %s" % " ".join("%.1e" % rel(a, b) for a, b in zip(rep, res)))
    print("  rel(rep,ref) %s" % " ".join("%.1e" % rel(a, b) for a, b in zip(rep, ref)))
print("  step_ms median %s, mean %s" % (s.get("timings", {}).get("step_ms_median"),
                                        s.get("timings", {}).get("step_ms")))
print("  checkpoint %s files, %.2f GiB; problems %s" % (
    prog.get("checkpoint_file_count"), (prog.get("checkpoint_bytes") or 0) / 2**30, prog.get("problems")))
PY
  # The epilog's verify step, for its own output (the epilog runs it again).
  timeout 200 "$b/runner/pilot-runner" verify --program-checkpoint "$state/jobs/$job/work/pilot-checkpoints/single" \
    --expect-manifest "$state/jobs/$job/checkpoint-files-single.json" --json >"$out/$name-verify.json" 2>"$out/$name-verify.err"
  log "$name: verify exit $?: $(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["format"], d["tensors"], "tensors, optimizer", d["optimizer_state"], "manifest_ok", d["manifest_ok"])' "$out/$name-verify.json" 2>&1 | tail -1)"
  export SPANK__SLURM_SPANK_OPTION_pilot_pilot=$work/$name.toml SPANK_SLURM_PILOT_CONFIG=$work/$name.toml \
         SPANK_SLURM_PILOT_CONFIG_SHA256=$(sha256sum "$work/$name.toml" | cut -d' ' -f1) SLURM_JOB_EXIT_CODE2=0:0
  timeout 310 "$b/epilog/pilot-epilog" --policy "$work/pilot.conf" >"$out/$name-epilog.log" 2>&1
  log "$name: epilog exit $?: $(tail -1 "$out/$name-epilog.log")"
  unset SPANK__SLURM_SPANK_OPTION_pilot_pilot SPANK_SLURM_PILOT_CONFIG SPANK_SLURM_PILOT_CONFIG_SHA256 SLURM_JOB_EXIT_CODE2
  cp "$state/verdicts/$job.json" "$out/$name-verdict.json" 2>/dev/null
  if [[ -x $cli ]]; then
    "$cli" verdict --policy "$work/pilot.conf" "$job" >"$out/$name-verdict.txt" 2>&1
  else
    python3 - "$out/$name-verdict.json" >"$out/$name-verdict.txt" 2>&1 <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print("job", d.get("job", {}).get("id"), d.get("decision"))
for c in d.get("checks", []):
    print("  %-20s %-5s %s%s" % (c.get("name"), c.get("status"), c.get("measured", ""),
                                 (": " + c["detail"]) if c.get("detail") else ""))
PY
  fi
  sed 's/^/  /' "$out/$name-verdict.txt" | tee -a "$out/bench.log"
  local got
  got=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("decision", "none"))' \
        "$out/$name-verdict.json" 2>/dev/null || echo none)
  got=${got^^}
  got=${got//_/-}
  if [[ $got == "$expect" ]] && { [[ $expect == GO ]] || grep -qiE "$pattern" "$out/$name-verdict.txt"; }; then
    log "$name: $got as expected ($((SECONDS - t0)) s)"
  else
    log "$name: UNEXPECTED: $got, expected $expect${pattern:+ naming /$pattern/} ($((SECONDS - t0)) s)"
  fi
}

gpt=(--layers 6 --d-model 512 --heads 8 --vocab 32768 --seq-len 1024 --micro-batch 8)

hf_trainer() {
  program_toml hf_trainer 30 10 python3 "$PWD/examples/hf_trainer.py" "${gpt[@]}" \
    --bf16 --eval-steps 5 --output-dir "$work/hf-out"
  pilot hf_trainer 11 GO ""
}

# The same once more: the kernels' noise differs from run to run.
hf_trainer_again() {
  program_toml hf_trainer_again 30 10 python3 "$PWD/examples/hf_trainer.py" "${gpt[@]}" \
    --bf16 --eval-steps 5 --output-dir "$work/hf-again-out"
  pilot hf_trainer_again 17 GO ""
}

# The same Trainer with deterministic kernels: GO as well; its step time is
# what training.deterministic costs.
hf_trainer_deterministic() {
  DETERMINISTIC=true program_toml hf_trainer_det 30 10 python3 "$PWD/examples/hf_trainer.py" "${gpt[@]}" \
    --bf16 --eval-steps 5 --output-dir "$work/hf-det-out"
  pilot hf_trainer_det 15 GO ""
}

lightning() {
  program_toml lightning 30 10 python3 "$PWD/bench/programs/lightning_gpt.py" "${gpt[@]}" \
    --precision bf16-mixed --grad-accum 2
  pilot lightning 12 GO ""
}

leaky() {
  # Logits of 8 x 1024 x 50304 in bf16: 0.8 GiB more each step.
  program_toml leaky 24 12 python3 "$PWD/bench/programs/leaky_gpt.py" --layers 4 --d-model 512 \
    --heads 8 --vocab 50304 --seq-len 1024 --micro-batch 8 --device cuda --precision bf16
  pilot leaky 13 NO-GO "memory_growth|memory.*grow"
}

hf_lost_warmup() {
  program_toml hf_lost_warmup 20 10 python3 "$PWD/bench/programs/hf_lost_warmup.py" "${gpt[@]}" --bf16 \
    --output-dir "$work/hf-lost-out"
  pilot hf_lost_warmup 14 NO-GO "learning rate|lr|schedul"
}

tiny_cmd=(python3 "$PWD/tests/program/tiny.py" --device cuda --seq-len 1024 --micro-batch 8)

tiny() {
  program_toml tiny 16 8 "${tiny_cmd[@]}"
  pilot tiny 16 GO ""
}

# fault:pattern, the pattern what the verdict must name.
tiny_faults() {
  local job=20 f
  for f in "rng_not_restored:rng|random" "optimizer_not_saved:optimizer" \
           "scheduler_reset:learning rate|schedul" "scheduler_stepped_twice:learning rate|schedul" \
           "data_not_restored:data" "state_outside:outside" "resume_ignored:resume|step 1"; do
    program_toml "tiny_${f%%:*}" 16 8 "${tiny_cmd[@]}" --fault "${f%%:*}"
    pilot "tiny_${f%%:*}" $((job++)) NO-GO "${f#*:}"
  done
}

# PILOT_BENCH_PROGRAMS: which, in that order (default all).
t_all=$SECONDS
for p in ${PILOT_BENCH_PROGRAMS:-hf_trainer lightning tiny tiny_faults hf_trainer_deterministic leaky hf_lost_warmup}; do
  "$p"
done
log "all in $((SECONDS - t_all)) s"
rm -rf "$work"
