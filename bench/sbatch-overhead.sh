#!/usr/bin/env bash
# What spank_pilot.so adds to a submission: sbatch wall time on the local
# cluster (scripts/local-slurm up) without the plugin, with the plugin but
# no --pilot, and with --pilot=configs/tiny-cpu.toml (config validation).
# Jobs are submitted held (--hold) and cancelled, so only submission is
# measured; "without" uses a copy of slurm.conf whose PlugStackConfig is
# empty (the client reads its own plugin stack).
#
#   bench/sbatch-overhead.sh [N] [--append]     N submissions per variant
#                                              (default 40); --append adds
#                                              the table to bench/RESULTS.md
# Target: at most 5 ms added to a plain sbatch.
set -euo pipefail
cd "$(dirname "$0")/.."
N=40
APPEND=0
for a in "$@"; do
  case $a in
    --append) APPEND=1 ;;
    *) N=$a ;;
  esac
done
CLUSTER=${PILOT_CLUSTER_DIR:-/tmp/slurm-pilot-cluster}
CONF=$CLUSTER/etc/slurm.conf
[[ -f $CONF ]] || { echo "pilot: bench: no cluster at $CLUSTER (scripts/local-slurm up)" >&2; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
: >"$TMP/plugstack-empty.conf"
sed "s|^PlugStackConfig=.*|PlugStackConfig=$TMP/plugstack-empty.conf|" "$CONF" >"$TMP/slurm-noplugin.conf"
CONFIG=$(pwd)/configs/tiny-cpu.toml

# One timed submission (µs) with the given SLURM_CONF and sbatch arguments.
submit_us() {
  local conf=$1 t0 t1 id
  shift
  t0=$(date +%s%N)
  id=$(SLURM_CONF=$conf sbatch --parsable --hold -o /dev/null "$@" --wrap true)
  t1=$(date +%s%N)
  SLURM_CONF=$CONF scancel "${id%%;*}"
  echo $(((t1 - t0) / 1000))
}

# The three variants take turns, so load from other processes of the machine
# spreads over all of them instead of biasing one.
: >"$TMP/base" && : >"$TMP/plug" && : >"$TMP/pilot"
for ((i = 0; i < N + 3; i++)); do
  b=$(submit_us "$TMP/slurm-noplugin.conf")
  p=$(submit_us "$CONF")
  q=$(submit_us "$CONF" --pilot="$CONFIG")
  ((i < 3)) && continue   # warm-up: page cache, munge, controller
  echo "$b" >>"$TMP/base" && echo "$p" >>"$TMP/plug" && echo "$q" >>"$TMP/pilot"
done
stats() {  # median and p90 of a file of µs, in ms
  sort -n "$1" | awk '{a[NR]=$1} END {printf "%.2f %.2f\n", a[int((NR+1)/2)]/1000, a[int(NR*0.9+0.5)]/1000}'
}
read -r base base90 < <(stats "$TMP/base")
read -r plug plug90 < <(stats "$TMP/plug")
read -r pil pil90 < <(stats "$TMP/pilot")
# The front part's own load cost, without sbatch around it: dlopen() in a
# small C program (the spank_* symbols it needs exist only inside Slurm, so
# the load ends with "undefined symbol" after the object was mapped and
# relocated, which is the cost being measured).
cat >"$TMP/dl.c" <<'C'
#include <dlfcn.h>
#include <stdio.h>
#include <time.h>
int main(int argc, char** argv) {
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  void* h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  clock_gettime(CLOCK_MONOTONIC, &b);
  printf("%.3f\n", (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6);
  return h == NULL && argc > 2;
}
C
cc -O2 -o "$TMP/dl" "$TMP/dl.c" -ldl
load_ms=$(for ((i = 0; i < 20; i++)); do "$TMP/dl" "$CLUSTER/bin/spank_pilot.so"; done)
load_ms=$(sort -n <<<"$load_ms" | awk '{a[NR]=$1} END {printf "%.2f", a[int((NR+1)/2)]}')
table=$(awk -v b="$base" -v b9="$base90" -v p="$plug" -v p9="$plug90" -v q="$pil" -v q9="$pil90" 'BEGIN {
  printf "| variant | median ms | p90 ms | added (median) | ratio |\n|---|---|---|---|---|\n";
  printf "| sbatch, no plugin | %.2f | %.2f | - | 1.00 |\n", b, b9;
  printf "| sbatch, plugin loaded, no --pilot | %.2f | %.2f | %+.2f ms | %.2f |\n", p, p9, p - b, p / b;
  printf "| sbatch --pilot=configs/tiny-cpu.toml | %.2f | %.2f | %+.2f ms | %.2f |\n", q, q9, q - b, q / b }')
table+=$'\n\n'"Loading spank_pilot.so alone (dlopen, median of 20): $load_ms ms."
echo "$table"
if ((APPEND)); then
  {
    echo
    echo "## sbatch overhead of spank_pilot.so ($(date -u +%Y-%m-%d))"
    echo
    echo "Command: \`bench/sbatch-overhead.sh $N --append\` on the one-node cluster of"
    echo "\`scripts/local-slurm up\` ($(nproc) CPUs, Slurm $(SLURM_CONF=$CONF sbatch --version | awk '{print $2}'), load average $(cut -d' ' -f1 /proc/loadavg))."
    echo "Wall time of \`sbatch --hold --wrap true\` (submission only), $N runs per"
    echo "variant after 3 warm-up rounds, variants taking turns. Target: at most 5 ms"
    echo "added by the plugin to a submission without --pilot. spank_pilot.so needs"
    echo "only libc and loads spank_pilot_impl.so (pilot_core, TOML, OpenSSL) only"
    echo "for --pilot, which pays for loading it and validating the config."
    echo
    echo "$table"
  } >>bench/RESULTS.md
fi
