#!/usr/bin/env bash
# Memory- and step-time-model accuracy on one GPU: runs pilot-runner at a
# calibration shape and at other shapes of configs/gpt-1b.toml, and keeps
# each results.json (under $OUT/memory-model/). Every run also measures its
# own memory calibration (training.memory_calibration_steps: a few steps at
# half the micro-batch, peaks and forward/backward time), so each
# results.json carries the second point the calibrated models need.
#
# The predictions are made afterwards, from one run's results.json alone,
# by `pilot plan --json` (bench/RESULTS.md shows the tables): device memory
# against each shape's measured device bytes, and tokens/s against each
# shape's measured tokens/s.
#   calib.json (micro-batch 8, checkpointing off, calibrated by its own
#   micro-batch 4 steps) predicts every shape; shapes with checkpointing on
#   come from the model's rule anchored to calib's recompute check (its
#   steps with checkpointing on; "by rule" for results of runners before
#   the check ran both ways), and their step time from the check's measured
#   recompute cost. ac8.json (checkpointing on, calibrated by its own
#   micro-batch 4 steps) predicts the checkpointing shapes as measured.
#
# Shapes named in PILOT_MM_CAPS ("ac12=26225,26487 ac8seq4096=29358": MiB,
# one run per figure) run again as NAME-capMIB under training.memory_cap_mb (the runner holds
# every process to it): a run that passes under the memory a prediction
# gave has shown that it needs no more, whatever its allocator caches when
# it has room. Shapes other than calib and ac8 (the two bases) skip the
# checks after the reference (recompute, calibrations): their steady steps
# are the truth, and the checks only cost time.
#
# PILOT_MM_ALLOC_TRACE=1 records every process's allocator events
# (pilot-runner's PILOT_RUNNER_ALLOC_TRACE: each request, free and page
# mapping) and packs them with the runs' results.json files into
# $OUT/memory-model/alloc-traces.tar.xz (.tar.gz without xz), after each run (a call stopped at
# its time limit keeps the runs it finished).
#
# PILOT_MM_CONFIG names another config (default configs/gpt-1b.toml; for
# example bench/llama-1b.toml, the Llama family), and PILOT_MM_SHAPE_LIST
# replaces the shapes below ("name mb seq recompute;...": calib must be one,
# the basis of every prediction). Give both to the predict step too.
#
# Usage: bench/memory-model.sh            (on the GPU machine; builds build-gpu)
#        PILOT_MM_SHAPES="calib mb2" bench/memory-model.sh   (only these shapes;
#            calls may share $OUT)
#        bench/memory-model.sh predict [DIR] [PILOT] [TRACES]
#            (anywhere `pilot` is built; DIR defaults to $OUT/memory-model,
#            PILOT to build/cli/pilot; TRACES, the unpacked
#            alloc-traces.tar.xz, adds the replay's table)
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/pilot-bench-out}/memory-model
config=${PILOT_MM_CONFIG:-configs/gpt-1b.toml}
# name micro_batch seq_len recompute
shapes=("calib 8 2048 false" "mb2 2 2048 false" "mb12 12 2048 false"
        "seq1024 8 1024 false" "seq4096 4 4096 false" "ac8 8 2048 true" "ac16 16 2048 true"
        "mb16seq1024 16 1024 false" "ac4seq4096 4 4096 true" "ac16seq1024 16 1024 true"
        "ac12 12 2048 true" "ac8seq4096 8 4096 true"
        "ac10 10 2048 true" "ac14 14 2048 true")
default_shapes=" calib mb2 mb12 seq1024 seq4096 ac8 ac16 mb16seq1024 ac4seq4096 ac16seq1024 ac12 ac8seq4096 "
if [[ -n ${PILOT_MM_SHAPE_LIST:-} ]]; then
  IFS=';' read -ra shapes <<<"$PILOT_MM_SHAPE_LIST"
  default_shapes=" "
  for s in "${shapes[@]}"; do
    read -r name _ <<<"$s"
    default_shapes+="$name "
  done
fi

# Every shape predicted from FROM.json (pilot plan --json): device bytes
# and tokens/s on the H200 against the shape's own measurements. KIND is
# "memory" or "throughput" (the table printed).
predict() {
  local dir=$1 pilot=$2 from=$3 only_ac=$4 kind=$5
  local policy
  policy=$(mktemp)
  printf 'state_dir = "%s"\nhardware_catalog = "%s"\n' "$(mktemp -d)" "$PWD/etc/hardware.toml" >"$policy"
  for s in "${shapes[@]}"; do
    read -r name mb seq ac <<<"$s"
    [[ $only_ac == true && $ac != true ]] && continue
    [[ -f $dir/$name.json ]] || { echo "memory-model: $name: no results"; continue; }
    local rc=off
    [[ $ac == true ]] && rc=on
    "$pilot" plan --json --policy "$policy" --config "$config" --nodes 1 --gpus-per-node 1 \
      --gpu H200-141 --micro-batch "$mb" --seq-len "$seq" --grad-accum 1 --recompute "$rc" \
      "$dir/$from.json" >"$dir/plan-$from-$name.json" 2>&1
    python3 - "$dir/plan-$from-$name.json" "$dir/$name.json" "$from" "$name" "$mb" "$seq" "$rc" "$kind" <<'PY'
import json, sys
plan, measured, src, name, mb, seq, rc, kind = sys.argv[1:9]
try:
    p = json.load(open(plan))
except ValueError:
    print(f"memory-model: {name} from {src}: no prediction: {open(plan).read()[-400:]}")
    sys.exit(0)
o = next(x for x in p["options"] if x["gpu"] == "H200-141")
s = json.load(open(measured))["stages"]["single"]
if kind == "memory":
    m = s["memory"]
    dev = (m.get("device_used_bytes") or 0) / 2**30
    pred = o["predicted_bytes"] / 2**30
    err = (pred - dev) / dev * 100 if dev else float("nan")
    print(f"| {o['memory_basis']} | {name} (from {src}) | {mb} | {seq} | {rc} | "
          f"{(m.get('peak_allocated_bytes') or 0) / 2**30:.2f} | {dev:.2f} | {pred:.2f} | {err:+.1f}% |")
else:
    meas = s["tokens_per_second"]
    pred = o["tokens_per_second_per_gpu"]
    err = (pred - meas) / meas * 100 if meas else float("nan")
    st = p.get("step_time") or {}
    print(f"| {name} (from {src}) | {mb} | {seq} | {rc} | {s['timings']['step_ms']:.1f} | "
          f"{st.get('step_ms', 0):.1f} | {meas:,.0f} | {pred:,.0f} | {err:+.1f}% |")
PY
  done
  rm -f "$policy"
}

# The capped runs: NAME-cap.json against NAME.json and calib's prediction.
capped() {
  local dir=$1 f name
  for f in "$dir"/*-cap*.json; do
    [[ -f $f ]] || continue
    local run
    run=$(basename "$f" .json)
    name=${run%-cap*}
    python3 - "$f" "$dir/$name.json" "$dir/plan-calib-$name.json" "$run" "$(cat "$dir/$run.cap" 2>/dev/null)" <<'PY'
import json, sys
capf, freef, planf, name, cap = sys.argv[1:6]
c = json.load(open(capf))
s = c["stages"]["single"]
try:
    p = json.load(open(planf))
    pred = next(x for x in p["options"] if x["gpu"] == "H200-141")["predicted_bytes"] / 2**30
except (OSError, ValueError, StopIteration):
    pred = float("nan")
free = None
try:
    free = json.load(open(freef))["stages"]["single"]
except (OSError, ValueError):
    pass
m = s.get("memory") or {}
g = lambda d, k: (d.get(k) or 0) / 2**30
fail = (s.get("failure") or {}).get("kind") or ""
ms = s["timings"]["step_ms"] if s.get("timings") else 0
free_ms = free["timings"]["step_ms"] if free else 0
free_dev = g(free["memory"], "device_used_bytes") if free else 0
print(f"| {name} | {s.get('status')} {fail} | {int(cap or 0) / 1024:.2f} | {pred:.2f} | {g(m, 'peak_allocated_bytes'):.2f} | "
      f"{g(m, 'peak_reserved_bytes'):.2f} | {g(m, 'device_used_bytes'):.2f} | {free_dev:.2f} | "
      f"{ms:.1f} | {free_ms:.1f} | {(ms / free_ms - 1) * 100 if free_ms else float('nan'):+.1f}% | "
      f"{'yes' if s.get('restore', {}).get('equal') else 'no'} |")
PY
  done
}

# Each traced run's processes (TRACES/NAME/alloc-PID.trace, the unpacked
# alloc-traces.tar.xz) against calib's replayed prediction for NAME: what
# each process needed, by bench/alloc_replay.py --needs on its own trace (at
# full speed and to run at all, plus the runtime's memory its results
# measured), and the device bytes it used, against pilot plan's
# memory_replay (the most a replayed process needed at full speed, plus
# calib's runtime; the range of what they mapped unlimited).
replayed() {
  local dir=$1 traces=$2 t name
  for t in "$traces"/*/; do
    name=$(basename "$t")
    [[ -f $dir/plan-calib-$name.json && -f $dir/$name.json ]] || continue
    for f in "$t"alloc-*.trace; do
      python3 bench/alloc_replay.py "$f" --needs >"$f.needs" || continue
      python3 - "$f" "$f.needs" "$dir/$name.json" "$dir/plan-calib-$name.json" "$name" <<'PY'
import json, sys
trace, needs, res, plan, name = sys.argv[1:6]
first = next((int(l.split()[2]) for l in open(trace) if l.startswith("# step ")), 0)
n = json.load(open(needs))
s = json.load(open(res))["stages"]["single"]
m = s["memory"] if first == 1 else (s.get("memory_resumed") or {})
dev, rsv = m.get("device_used_bytes"), m.get("peak_reserved_bytes")
runtime = dev - rsv if dev and rsv else 0
p = json.load(open(plan))
r = p.get("memory_replay")
G = 2**30
if not r:
    print(f"| {name} | no replay: {p.get('memory_replay_why_not')} |")
    sys.exit(0)
pr = r["runtime_bytes"]
pred = r["full_speed_bytes"]["most"] + pr
need = n["full_speed"] + runtime
lo, hi = r["unlimited_bytes"]["least"] + pr, r["unlimited_bytes"]["most"] + pr
near = min(max(dev or 0, lo), hi)
print(f"| {name} | {'reference' if first == 1 else 'restored'} | {need / G:.2f} | {(n['to_run'] + runtime) / G:.2f} | "
      f"{pred / G:.2f} ({(r['full_speed_bytes']['least'] + pr) / G:.2f}) | {(pred / need - 1) * 100:+.1f}% | "
      f"{(dev or 0) / G:.2f} | {lo / G:.2f} to {hi / G:.2f} | {((near / dev - 1) * 100 if dev else float('nan')):+.1f}% |")
PY
    done
  done
}

if [[ ${1:-} == predict ]]; then
  dir=${2:-$out}
  pilot=${3:-build/cli/pilot}
  traces=${4:-}
  echo "| basis | shape | micro-batch | seq_len | recompute | allocated GiB | device GiB | predicted GiB | error |"
  echo "|---|---|---|---|---|---|---|---|---|"
  predict "$dir" "$pilot" calib false memory
  [[ -f $dir/ac8.json ]] && predict "$dir" "$pilot" ac8 true memory
  echo
  echo "| shape | micro-batch | seq_len | recompute | step ms | predicted step ms | tokens/s | predicted tokens/s | error |"
  echo "|---|---|---|---|---|---|---|---|---|"
  predict "$dir" "$pilot" calib false throughput
  if [[ -n $traces ]]; then
    echo
    echo "| shape | process | needs at full speed GiB | needs to run GiB | predicted GiB (least) | error | device GiB | predicted unlimited GiB | error |"
    echo "|---|---|---|---|---|---|---|---|---|"
    replayed "$dir" "$traces"
  fi
  if compgen -G "$dir/*-cap*.json" >/dev/null; then
    echo
    echo "| shape | status under the cap | cap GiB | predicted device GiB | allocated GiB | reserved GiB | device GiB | device GiB uncapped | step ms | step ms uncapped | change | restore equal |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
    capped "$dir"
  fi
  exit 0
fi

gpus=${CUDA_VISIBLE_DEVICES:-all}
work=/tmp/pilot-mm-${gpus//,/-}
rm -rf "$work"
mkdir -p "$out" "$work"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu-$gpus.txt"
if ! scripts/gpu-build build-gpu >"$out/build-$gpus.log" 2>&1; then
  tail -40 "$out/build-$gpus.log"
  echo "memory-model: build FAILED"
  exit 1
fi
runner=build-gpu/runner/pilot-runner
only=" ${PILOT_MM_SHAPES:-$default_shapes} "
runs=()
for s in "${shapes[@]}"; do
  read -r name mb seq ac <<<"$s"
  [[ $only == *" $name "* ]] && runs+=("$name $mb $seq $ac 0")
done
for c in ${PILOT_MM_CAPS:-}; do
  for s in "${shapes[@]}"; do
    read -r name mb seq ac <<<"$s"
    [[ $name == "${c%%=*}" ]] || continue
    IFS=, read -ra mibs <<<"${c#*=}"
    for mib in "${mibs[@]}"; do runs+=("$name-cap$mib $mb $seq $ac $mib"); done
  done
done
for s in "${runs[@]}"; do
  read -r name mb seq ac cap <<<"$s"
  checks=(--set training.recompute_check_steps=5 --set training.memory_calibration_steps=2)
  [[ $name == calib || $name == ac8 ]] ||
    checks=(--set training.recompute_check_steps=0 --set training.memory_calibration_steps=0)
  [[ $cap != 0 ]] && echo "$cap" >"$out/$name.cap"
  t0=$SECONDS
  trace_env=()
  if [[ ${PILOT_MM_ALLOC_TRACE:-0} == 1 ]]; then
    mkdir -p "$work/traces/$name"
    trace_env=(env "PILOT_RUNNER_ALLOC_TRACE=$work/traces/$name")
  fi
  timeout 180 "${trace_env[@]}" "$runner" run --config "$config" --set run.grad_accum=1 \
    --set run.micro_batch="$mb" --set run.seq_len="$seq" \
    --set training.activation_checkpointing="$ac" --set training.steps=12 \
    --set checkpoint.at_step=3 --set training.warmup_steps=2 \
    --set training.precision_check_steps=0 "${checks[@]}" --set training.memory_cap_mb="$cap" \
    --set "checkpoint.dir=\"$work/ck-$name\"" --out "$work/$name" >"$out/$name.log" 2>&1
  rc=$?
  cp "$work/$name/results.json" "$out/$name.json" 2>/dev/null
  python3 - "$work/$name/results.json" "$name" "$rc" "$((SECONDS - t0))" <<'PY'
import json, sys
try:
    s = json.load(open(sys.argv[1]))["stages"]["single"]
    m = s["memory"]
    g = lambda d, k: round((d.get(k) or 0) / 2**30, 3)
    c = s.get("memory_calibration") or {}
    print(f"memory-model: {sys.argv[2]} exit {sys.argv[3]} {sys.argv[4]}s alloc {g(m, 'peak_allocated_bytes')} "
          f"reserved {g(m, 'peak_reserved_bytes')} device {g(m, 'device_used_bytes')} GiB; "
          f"calibration {c.get('status')} micro_batch {c.get('micro_batch')} "
          f"alloc {g(c, 'peak_allocated_bytes')} GiB {c.get('detail') or ''}")
except Exception as e:
    print(f"memory-model: {sys.argv[2]} exit {sys.argv[3]}: no results ({e})")
PY
  rm -rf "$work/ck-$name"
  if [[ ${PILOT_MM_ALLOC_TRACE:-0} == 1 ]]; then
    cp "$work/$name/results.json" "$work/traces/$name/results.json" 2>/dev/null
    if command -v xz >/dev/null; then
      tar -C "$work/traces" -cJf "$out/alloc-traces.tar.xz" .
    else
      tar -C "$work/traces" -czf "$out/alloc-traces.tar.gz" .
    fi
  fi
done
echo "memory-model: predictions: bench/memory-model.sh predict $out (where pilot is built)"
