#!/usr/bin/env bash
# Runs every libFuzzer harness of tests/fuzz (one per parser) in turn for a
# share of a total time, and prints each one's executions and crashes and
# the totals. CPU only. A crash, leak, timeout or undefined behaviour stops
# that harness; its input is kept in BUILD/tests/fuzz/artifacts/ and the
# script exits 1.
#
# Usage: bench/fuzz.sh [TOTAL_SECONDS]
#   TOTAL_SECONDS  all harnesses together (also PILOT_FUZZ_TOTAL_SECONDS;
#                  default 600), split evenly
#   PILOT_FUZZ_BUILD  the build with the harnesses (default
#                  build-fuzz, the one scripts/test makes); configured and
#                  built here (clang, -DPILOT_FUZZ=ON) when it has none
#   PILOT_JOBS     build jobs (default: the CPU count)
# Each harness keeps its corpus in BUILD/tests/fuzz/corpus/NAME (grown from
# the seeds in tests/fuzz/corpus/NAME), so a later run starts where this one
# stopped. The harnesses run one at a time under `nice`.
set -euo pipefail
cd "$(dirname "$0")/.."
total=${1:-${PILOT_FUZZ_TOTAL_SECONDS:-600}}
build=${PILOT_FUZZ_BUILD:-build-fuzz}
jobs=${PILOT_JOBS:-$(nproc)}
if [[ ! $total =~ ^[0-9]+$ ]] || ((total < 1)); then
  echo "pilot: fuzz: total seconds must be a positive integer, got \"$total\"" >&2
  exit 2
fi

list=$build/tests/fuzz/harnesses.txt
if [[ ! -f $list ]]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
    -DPILOT_FUZZ=ON -DPILOT_BUILD_TESTS=OFF -DPILOT_BUILD_RUNNER=OFF -DPILOT_BUILD_SPANK=OFF >/dev/null
fi
mapfile -t rows <"$list"
targets=()
for row in "${rows[@]}"; do targets+=("fuzz_${row%% *}"); done
cmake --build "$build" -j "$jobs" --target "${targets[@]}" >/dev/null

each=$((total / ${#rows[@]}))
((each >= 1)) || each=1
out=$build/tests/fuzz
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT
echo "pilot: fuzz: ${#rows[@]} harnesses, $each s each, commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
printf '%-16s %8s %14s %10s %8s\n' harness seconds executions exec/s crashes
sum_execs=0
sum_crashes=0
for row in "${rows[@]}"; do
  read -r name max_len <<<"$row"
  mkdir -p "$out/corpus/$name" "$out/artifacts"
  t0=$SECONDS
  rc=0
  nice -n 10 "$out/fuzz_$name" -max_total_time="$each" -max_len="$max_len" -timeout=20 \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$out/artifacts/$name-" \
    "$out/corpus/$name" "tests/fuzz/corpus/$name" >"$log/$name" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log/$name" | tail -1)
  execs=${execs:-0}
  crashes=0
  if ((rc != 0)); then
    crashes=1
    echo "pilot: fuzz: $name: exit $rc; its output ends:" >&2
    tail -30 "$log/$name" >&2
  fi
  secs=$((SECONDS - t0))
  printf '%-16s %8d %14d %10d %8d\n' "$name" "$secs" "$execs" $((execs / (secs > 0 ? secs : 1))) "$crashes"
  sum_execs=$((sum_execs + execs))
  sum_crashes=$((sum_crashes + crashes))
done
printf '%-16s %8s %14d %10s %8d\n' total "" "$sum_execs" "" "$sum_crashes"
if ((sum_crashes > 0)); then
  echo "pilot: fuzz: $sum_crashes harness(es) stopped on a finding; inputs in $out/artifacts/" >&2
  exit 1
fi
