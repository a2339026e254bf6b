#!/usr/bin/env bash
# Single-GPU throughput of pilot-runner against the eager anchor, with the
# anchor measured before and after the runner (its spread is the noise),
# and a kernel-level comparison of the two steps (bench/trace_summary.py).
# One call on an H200; logs to $OUT/throughput.log.
#   anchor eager -> runner (as configured: clipping, expandable segments)
#   -> runner with torch's default allocator (training.alloc_conf = "")
#   -> runner without clipping (the anchor does not clip), traced
#   -> runner with the unfused loss (training.fused_loss = false), whose
#      losses are compared with the first run's step by step
#   -> anchor eager -> anchor traced -> summary.
# While each run works, nvidia-smi samples the GPU's SM clock and power
# (read only) every 200 ms; the log gives their medians over the busy
# samples, so a difference of clocks between the processes shows.
# The GPU is the first of CUDA_VISIBLE_DEVICES (default 0).
# Usage: bench/gpu-throughput.sh [ANCHOR_SCRIPT]   (default .carry/py_gpt_step.py)
#        PILOT_TP_RUNS="clip" bench/gpu-throughput.sh   (only these runner runs,
#            of clip torchalloc noclip eagerloss; default the first three;
#            the traces and their comparison need noclip)
#        PILOT_TP_ANCHOR_WINDOW="3 27" bench/gpu-throughput.sh   (the anchor's
#            warm-up and timed steps, default "5 20"; "3 27" times the same
#            stretch of a run as the runner's timed steps, 4 to 30, so both
#            see the GPU equally long at its power cap)
source "$(dirname "$0")/lib.sh"
# The anchor runs with torch's default allocator; the runner sets its own
# (training.alloc_conf).
unset PYTORCH_ALLOC_CONF PYTORCH_CUDA_ALLOC_CONF
fresh_work /tmp/pilot-throughput
log() { echo "throughput: $*" | tee -a "$out/throughput.log"; }
smi_log=$out/throughput.log
gpu_build
runner=build-gpu/runner/pilot-runner
read -r anchor_warmup anchor_steps <<<"${PILOT_TP_ANCHOR_WINDOW:-5 20}"
anchor_run() {
  smi_start "anchor-$1"
  timeout 120 python3 "$anchor" --layers 24 --dmodel 2048 --heads 16 --seq 2048 --mb 8 \
    --warmup "$anchor_warmup" --steps "$anchor_steps" 2>>"$work/anchor.err" | tail -1 >"$work/anchor-$1.json"
  log "anchor $1: $(cat "$work/anchor-$1.json")"
  smi_stop "anchor-$1"
}
runner_run() {
  local name=$1
  shift
  smi_start "$name"
  timeout 200 "$runner" run "${throughput_shape[@]}" --set "checkpoint.dir=\"$work/ck-$name\"" --out "$work/$name" "$@" 2>&1 |
    grep -v " step " | tail -4 | tee -a "$out/throughput.log"
  rm -rf "$work/ck-$name"
  python3 -c "import json,sys; s=json.load(open(sys.argv[1]))['stages']['single']; t=s['timings']; print('throughput: runner', sys.argv[2], round(s['tokens_per_second']), 'tok/s, step', round(t['step_ms'], 2), 'ms, median', round(t['step_ms_median'], 2), 'fb', round(t['forward_backward_ms'], 2), 'opt', round(t['optimizer_ms'], 2), '; memory GiB alloc/reserved/device', *(round((s['memory'].get(k) or 0) / 2**30, 2) for k in ('peak_allocated_bytes', 'peak_reserved_bytes', 'device_used_bytes')))" \
    "$work/$name/results.json" "$name" | tee -a "$out/throughput.log"
  python3 - "$work/$name/metrics.jsonl" "$name" <<'PY' | tee -a "$out/throughput.log"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
ref = [r for r in rows if r.get("process") == "reference"]
print(f"throughput: runner {sys.argv[2]} step ms (* = timed): " +
      " ".join(f"{r['step']}:{r['step_ms']:.1f}{'*' if r.get('timed') else ''}" for r in ref))
PY
  smi_stop "$name"
}
anchor_run before
runs=" ${PILOT_TP_RUNS:-clip torchalloc noclip} "
[[ $runs == *" clip "* ]] && runner_run clip
[[ $runs == *" torchalloc "* ]] && runner_run torchalloc --set 'training.alloc_conf=""'
[[ $runs == *" noclip "* ]] && runner_run noclip --set training.grad_clip=0 --trace "$work/runner-trace.json"
[[ $runs == *" eagerloss "* ]] && runner_run eagerloss --set training.fused_loss=false
anchor_run after
if [[ $runs == *" noclip "* ]]; then
  timeout 120 python3 bench/anchor_trace.py "$anchor" "$work/anchor-trace.json" \
    --layers 24 --dmodel 2048 --heads 16 --seq 2048 --mb 8 2>&1 | tail -1 | tee -a "$out/throughput.log"
  python3 bench/trace_summary.py --steps 3 --top 14 "$work/anchor-trace.json" "$work/runner-trace.json" |
    tee -a "$out/throughput.log"
fi
python3 - "$work" <<'PY' | tee -a "$out/throughput.log"
import json, sys, os
w = sys.argv[1]
def j(p):
    try:
        return json.load(open(os.path.join(w, p)))
    except Exception:
        return None
a = [x["tokens_per_s"] for x in (j("anchor-before.json"), j("anchor-after.json")) if x]
if a:
    mean = sum(a) / len(a)
    print(f"summary: anchor eager {a} tok/s, mean {mean:.0f}, spread {100 * (max(a) - min(a)) / mean:.2f}%")
    for name in ("clip", "torchalloc", "noclip", "eagerloss"):
        r = j(f"{name}/results.json")
        if r:
            t = r["stages"]["single"]["tokens_per_second"]
            print(f"summary: runner {name} {t:.0f} tok/s = {t / mean:.3f} x anchor mean "
                  f"({t / max(a):.3f} x the faster anchor run)")
f, e = j("clip/results.json"), j("eagerloss/results.json")
if f and e:
    fl, el = f["stages"]["single"]["losses"], e["stages"]["single"]["losses"]
    rel = [abs(x - y) / abs(y) for x, y in zip(fl, el)]
    print(f"summary: fused against unfused loss: first step {fl[0]:.6f} vs {el[0]:.6f}, "
          f"last {fl[-1]:.4f} vs {el[-1]:.4f}, worst relative difference {max(rel):.2e} "
          f"over {len(rel)} steps")
    for k in ("peak_allocated_bytes", "peak_reserved_bytes"):
        print(f"summary: {k} fused {f['stages']['single']['memory'][k] / 2**30:.2f} GiB, "
              f"unfused {e['stages']['single']['memory'][k] / 2**30:.2f} GiB")
PY
