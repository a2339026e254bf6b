#!/usr/bin/env bash
# SIGKILL at random points of a checkpoint save, many times (CPU): each
# trial runs a pilot under pilot-supervisor (stage single, a 3.3M-parameter
# GPT on the CPU), kills its runner at a random moment between the save's
# temp directory appearing and a quarter past the save's measured length,
# then runs `pilot-runner verify` and a fresh-process restore on every entry
# of the checkpoint folder. A partial checkpoint that verifies or restores,
# or a record that does not name the kill, stops the run (exit 1). Prints
# the seed (pass it again to repeat the same delays) and a table of
# outcomes.
#
# Usage: bench/kill-save.sh [TRIALS [SEED]]   (default 50 trials, a random seed)
#   PILOT_BUILD_DIR  the build with pilot-runner and pilot-supervisor (default build)
#   PILOT_BENCH_WORK scratch folder (default: a fresh one under /tmp, removed after)
set -euo pipefail
cd "$(dirname "$0")/.."
trials=${1:-50}
build=${PILOT_BUILD_DIR:-build}
if [[ ! $trials =~ ^[0-9]+$ ]] || ((trials < 1)); then
  echo "pilot: kill-save: trials must be a positive integer, got \"$trials\"" >&2
  exit 2
fi
for exe in runner/pilot-runner supervisor/pilot-supervisor; do
  if [[ ! -x $build/$exe ]]; then
    echo "pilot: kill-save: $build/$exe: not built" >&2
    echo "HINT: cmake --build $build" >&2
    exit 2
  fi
done
work=${PILOT_BENCH_WORK:-$(mktemp -d)}
if [[ -z ${PILOT_BENCH_WORK:-} ]]; then trap 'rm -rf "$work"' EXIT; fi
start=$SECONDS
python3 tests/runner/save_faults.py "$build/runner/pilot-runner" "$build/supervisor/pilot-supervisor" \
  . "$work" kill_save "$trials" ${2:+"$2"}
echo "pilot: kill-save: $trials trials in $((SECONDS - start)) s"
