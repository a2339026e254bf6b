#!/usr/bin/env bash
# A checkpoint save that meets a full disk on a GPU: configs/gpt-1b.toml
# (about 15.8 GB of checkpoint), 6 steps, the checkpoint at 3, checkpoint.dir
# on a tmpfs:
#   small   a 2 GiB tmpfs: the free-space check refuses before the first byte;
#   filled  a 20 GiB tmpfs, which passes the check; once the save's temporary
#           directory appears, another process takes all but 64 MiB of it
#           (fallocate), so the save's writes fail part way through.
# Each case must end with a failure record in results.json naming the disk,
# no temporary checkpoint directory left, and no crash (a fatal signal prints
# its stack: runner/app/fatal_signal.h). Needs root for the mounts; says so
# and stops otherwise.
#
# Usage: bench/gpu-disk-full.sh     (on the GPU machine; builds build-gpu
#                                    unless PILOT_SKIP_BUILD=1)
source "$(dirname "$0")/lib.sh"
log() { echo "disk-full: $*"; }
out=$out/disk-full
fresh_work /tmp/pilot-disk-full
[[ ${PILOT_SKIP_BUILD:-0} == 1 ]] || gpu_build
for case in small filled; do
  mnt=$work/$case
  mkdir -p "$mnt"
  size=2g
  [[ $case == filled ]] && size=20g
  if [[ $(id -u) != 0 ]] || ! mount -t tmpfs -o size=$size tmpfs "$mnt"; then
    log "cannot mount a tmpfs (root needed): nothing measured"
    exit 1
  fi
  filler=
  if [[ $case == filled ]]; then
    (
      for _ in $(seq 600); do
        compgen -G "$mnt/ck/.step-*.tmp-*" >/dev/null && break
        sleep 0.1
      done
      avail=$(df -B1 --output=avail "$mnt" | tail -1)
      fallocate -l $((avail - (64 << 20))) "$mnt/filler" && echo "disk-full: filled: took $((avail >> 20)) MiB less 64"
    ) &
    filler=$!
  fi
  t0=$SECONDS
  timeout 300 build-gpu/runner/pilot-runner run --config configs/gpt-1b.toml --set training.steps=6 \
    --set checkpoint.at_step=3 --set training.warmup_steps=1 --set training.precision_check_steps=0 \
    --set training.recompute_check_steps=0 --set training.memory_calibration_steps=0 \
    --set "checkpoint.dir=\"$mnt/ck\"" --out "$work/run-$case" >"$out/run-$case.log" 2>&1
  rc=$?
  [[ -n $filler ]] && wait "$filler"
  log "$case: exit $rc after $((SECONDS - t0)) s"
  log "$case: left in checkpoint.dir: $(cd "$mnt" && find ck -maxdepth 1 | tr '\n' ' ')"
  if [[ -f $work/run-$case/results.json ]]; then
    cp "$work/run-$case/results.json" "$out/results-$case.json"
    python3 - "$work/run-$case/results.json" "$case" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["stages"]["single"]
print(f"disk-full: {sys.argv[2]}: results.json: status", s.get("status"), "failure",
      json.dumps(s.get("failure"))[:400])
PY
  else
    log "$case: no results.json"
  fi
  grep -E "pilot: |fatal signal|stack word" "$out/run-$case.log" | grep -v "single step" | tail -12
  umount "$mnt"
done
