#!/bin/sh
# A protocol-only program for the container case: busybox sh in an image
# the test builds, reporting through program.loss_pattern on stdout
# ("iter N: loss=X"). It saves a one-tensor safetensors file at step K,
# with the torch.save state (model and optimizer) the image carries, and,
# resumed, reads them and starts at K+1. It prints the file only the image
# has, which proves where it ran, what it sees of the node, and its cgroup.
steps=${PILOT_STEPS:-10}
k=${PILOT_CHECKPOINT_STEP:-5}
cat /etc/pilot-image >&2 || exit 4
# What it can see of the node: its root folder (the image's, with the
# pilot's binds), and the cgroup it was put in.
echo "root: $(ls / | tr '\n' ' ')" >&2
grep -E '^[0-9]+:memory:|^0::' /proc/self/cgroup | sed 's/^/cgroup /' >&2
# A reference process may be told to wait until the test has moved the
# image's tag (WAIT_FOR, a file the test makes), at most a minute.
if [ -n "$WAIT_FOR" ] && [ -z "$PILOT_RESUME_DIR" ]; then
  n=0
  while [ ! -e "$WAIT_FOR" ] && [ "$n" -lt 60 ]; do
    sleep 1
    n=$((n + 1))
  done
fi
first=1
if [ -n "$PILOT_RESUME_DIR" ]; then
  cat "$PILOT_RESUME_DIR/model.safetensors" >/dev/null || exit 3
  if [ -f /ckpt/state.pt ]; then cat "$PILOT_RESUME_DIR/state.pt" >/dev/null || exit 3; fi
  first=$((k + 1))
fi
i=$first
while [ "$i" -le "$steps" ]; do
  echo "iter $i: loss=$((100 - i)).5"
  if [ "$i" -eq "$k" ] && [ -z "$PILOT_RESUME_DIR" ]; then
    header='{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}'
    mkdir -p "$PILOT_CHECKPOINT_DIR"
    {
      printf "\\$(printf %o ${#header})\\000\\000\\000\\000\\000\\000\\000"
      printf '%s' "$header"
      printf '\000\000\200\077'
    } >"$PILOT_CHECKPOINT_DIR/model.safetensors"
    # The model's and optimizer's state as torch.save wrote it, where the
    # image carries one (the test makes it with the node's torch).
    if [ -f /ckpt/state.pt ]; then cp /ckpt/state.pt "$PILOT_CHECKPOINT_DIR/state.pt"; fi
  fi
  i=$((i + 1))
done
