#!/usr/bin/env bash
# The probe's cost on an H200, and whether a Trainer resumes exactly, in one
# call:
#   anchor      the anchor's GPT-2 124M step (eager, sequence 1024,
#               micro-batch 8): the machine's speed in this call
#   probe_cost  bench/programs/probe_cost.py: GPT-2 124M at sequence 1024,
#               micro-batch 12, bf16, blocks of steps alternating between the
#               program alone and the program reporting every step; with
#               the probe of this tree, and with an earlier probe when
#               .carry/old-probe/slurm_pilot exists (an earlier probe for the
#               comparison: git archive COMMIT python/slurm_pilot |
#               tar -x --strip-components=1 -C .carry/old-probe)
#   hf_resume   bench/programs/hf_resume_check.py: examples/hf_trainer.py's
#               Trainer at the framework bench's shape, reference / fresh
#               resumed / second reference, without a pilot
#   hf_trainer  bench/gpu-frameworks.sh's Trainer program through the pilot
#               (builds the root parts), when the time left allows
# Needs torch and transformers; nothing is downloaded. The summary goes to
# $OUT/bench.log (default /tmp/pilot-bench-out).
# Usage: [PILOT_BENCH_PARTS="anchor probe_cost hf_resume hf_trainer"] bench/gpu-probe-cost.sh [ANCHOR]
source "$(dirname "$0")/lib.sh"
fresh_work /tmp/pilot-probe-cost
log() { echo "bench: $*" | tee -a "$out/bench.log"; }
log "date $(date -u +%FT%TZ) host $(hostname) commit $(git rev-parse --short HEAD 2>/dev/null || echo none)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee -a "$out/bench.log"
python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)' 2>&1 | tee -a "$out/bench.log"
parts=${PILOT_BENCH_PARTS:-anchor probe_cost hf_resume hf_trainer}
start=$SECONDS

for part in $parts; do
  t0=$SECONDS
  case $part in
    anchor)
      timeout 120 python3 "$anchor" --mb 8 2>&1 | tail -1 | tee -a "$out/bench.log" ;;
    probe_cost)
      timeout 150 python3 bench/programs/probe_cost.py 2>"$out/probe-cost.err" | tee -a "$out/bench.log"
      if [[ -d .carry/old-probe/slurm_pilot ]]; then
        log "the earlier probe:"
        timeout 150 python3 bench/programs/probe_cost.py --probe .carry/old-probe 2>>"$out/probe-cost.err" |
          tee -a "$out/bench.log"
      fi ;;
    hf_resume)
      timeout 330 python3 bench/programs/hf_resume_check.py --variants "${PILOT_BENCH_HF_VARIANTS:-as_bench,no_dropout}" \
        --layers 6 --d-model 512 --heads 8 --vocab 32768 --seq-len 1024 --micro-batch 8 2>&1 |
        tail -20 | tee -a "$out/bench.log" ;;
    hf_trainer)
      if ((SECONDS - start > ${PILOT_BENCH_HF_TRAINER_AFTER:-330})); then
        log "hf_trainer: left out, $((SECONDS - start)) s gone"
        continue
      fi
      OUT=$work/fw PILOT_BENCH_NO_CLI=1 PILOT_BENCH_PROGRAMS=hf_trainer timeout 280 bench/gpu-frameworks.sh >/dev/null 2>&1
      cat "$work/fw/bench.log" >>"$out/bench.log"
      cp "$work/fw/hf_trainer-results.json" "$out/" 2>/dev/null ;;
  esac
  log "$part: $((SECONDS - t0)) s"
done
