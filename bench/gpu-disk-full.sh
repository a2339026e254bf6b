#!/usr/bin/env bash
# A checkpoint save that meets a full disk on a GPU: configs/gpt-1b.toml
# (about 15 GB of checkpoint) with checkpoint.dir on a 2 GiB tmpfs, 6 steps,
# the checkpoint at 3. The pilot must end with a failure record in
# results.json naming the disk, no temporary checkpoint directory left, and
# no crash (a fatal signal prints its stack: runner/app/fatal_signal.h).
# Needs root for the mount; says so and stops otherwise.
#
# Usage: bench/gpu-disk-full.sh     (on the GPU machine; builds build-gpu
#                                    unless PILOT_SKIP_BUILD=1)
source "$(dirname "$0")/lib.sh"
log() { echo "disk-full: $*"; }
out=$out/disk-full
fresh_work /tmp/pilot-disk-full
[[ ${PILOT_SKIP_BUILD:-0} == 1 ]] || gpu_build
small=$work/small
mkdir -p "$small"
if [[ $(id -u) != 0 ]] || ! mount -t tmpfs -o size=2g tmpfs "$small"; then
  log "cannot mount a 2 GiB tmpfs (root needed): nothing measured"
  exit 1
fi
t0=$SECONDS
timeout 300 build-gpu/runner/pilot-runner run --config configs/gpt-1b.toml --set training.steps=6 \
  --set checkpoint.at_step=3 --set training.warmup_steps=1 --set training.precision_check_steps=0 \
  --set training.recompute_check_steps=0 --set training.memory_calibration_steps=0 \
  --set "checkpoint.dir=\"$small/ck\"" --out "$work/run" >"$out/run.log" 2>&1
rc=$?
log "exit $rc after $((SECONDS - t0)) s"
log "left on the tmpfs: $(cd "$small" && find . -maxdepth 2 | tr '\n' ' ')"
log "free on the tmpfs: $(df -h --output=avail "$small" | tail -1)"
if [[ -f $work/run/results.json ]]; then
  cp "$work/run/results.json" "$out/results.json"
  python3 - "$work/run/results.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["stages"]["single"]
print("disk-full: results.json: status", s.get("status"), "failure", json.dumps(s.get("failure"))[:600])
PY
else
  log "no results.json"
fi
grep -E "pilot: |fatal signal|^\S+\(\+0x|\[0x" "$out/run.log" | tail -40
umount "$small"
