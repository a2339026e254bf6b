# Sourced by bench/gpu-*.sh (after their own header): the environment every
# GPU benchmark runs in and the paths they share. Leaves the caller in the
# repository root with
#   out     the folder that comes back ($OUT, default /tmp/pilot-bench-out)
#   anchor  the anchor script (the caller's first argument, default
#           .carry/py_gpt_step.py)
#   throughput_shape  the runner's flags for the 30-step gpt-1b run of
#           gpu-throughput.sh and gpu-anchor-init.sh
# and gives fresh_work DIR: an empty work folder in $work, and $out;
# gpu_build: builds build-gpu (scripts/gpu-build, 240 s at most, log in
# $out/build.log), says how long through the caller's `log`, and on failure
# shows the log's end and exits;
# smi_start NAME / smi_stop NAME: while a run works, nvidia-smi samples the
# SM clock, power and temperature of the first GPU of CUDA_VISIBLE_DEVICES
# (read only) every 200 ms; smi_stop prints their medians over the busy
# samples (and appends them to $smi_log when set).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
out=${OUT:-/tmp/pilot-bench-out}
anchor=${1:-.carry/py_gpt_step.py}
fresh_work() {
  work=$1
  rm -rf "$work"
  mkdir -p "$out" "$work"
}
gpu_build() {
  local t0=$SECONDS
  if ! timeout 240 scripts/gpu-build build-gpu >"$out/build.log" 2>&1; then
    tail -60 "$out/build.log"
    log "build FAILED"
    exit 1
  fi
  log "build ok in $((SECONDS - t0)) s"
}

# The runner's throughput shape: configs/gpt-1b.toml at its micro-batch, no
# accumulation, 30 steps with the checks off. After the warm-up and the
# steps around the two synchronisations (memory measured, checkpoint) about
# 22 are timed, so one slow step moves the mean by well under 1%.
throughput_shape=(--config configs/gpt-1b.toml --set run.grad_accum=1 --set training.steps=30
                  --set checkpoint.at_step=7 --set training.warmup_steps=3
                  --set training.precision_check_steps=0 --set training.recompute_check_steps=0
                  --set training.memory_calibration_steps=0)

gpu=${CUDA_VISIBLE_DEVICES:-0}
gpu=${gpu%%,*}
smi_pid=
smi_start() {
  nvidia-smi -i "$gpu" --query-gpu=clocks.sm,power.draw,temperature.gpu \
    --format=csv,noheader,nounits -lms 200 >"$work/smi-$1.csv" 2>/dev/null &
  smi_pid=$!
}
smi_stop() {
  [[ -n $smi_pid ]] && kill "$smi_pid" 2>/dev/null && wait "$smi_pid" 2>/dev/null
  smi_pid=
  python3 - "$work/smi-$1.csv" "$1" <<'PY' | tee -a "${smi_log:-/dev/null}"
import statistics, sys
rows = []
for line in open(sys.argv[1]):
    try:
        clk, pw, temp = (float(x) for x in line.split(","))
        rows.append((clk, pw, temp))
    except ValueError:
        pass
busy = [r for r in rows if r[1] > 250]
if not busy:
    print(f"gpu {sys.argv[2]}: no busy samples ({len(rows)} in all)")
else:
    print(f"gpu {sys.argv[2]}: {len(busy)} busy samples: SM clock median "
          f"{statistics.median(r[0] for r in busy):.0f} MHz (min {min(r[0] for r in busy):.0f}), "
          f"power median {statistics.median(r[1] for r in busy):.0f} W, temperature max "
          f"{max(r[2] for r in busy):.0f} C")
PY
}
