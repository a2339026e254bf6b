#!/usr/bin/env bash
# The single-GPU benchmark of pilot-runner, in one call on an H200:
#   1. build (scripts/gpu-build);
#   2. pilot-runner on configs/gpt-1b.toml at the anchor's shape (seq 2048,
#      micro-batch 8, no accumulation), with the instrumentation check;
#   3. the anchor (plain PyTorch, same model and shape), eager, with its
#      torch.save / torch.load checkpoint of model + optimizer;
#   4. a shape that does not fit (micro-batch 64): OOM recorded, no crash;
#   5. the anchor with torch.compile;
#   6. the ratios against the targets in bench/RESULTS.md.
# Logs and JSON go to $OUT (default /tmp/pilot-bench-out).
# Usage: bench/gpu-single.sh [ANCHOR_SCRIPT]   (default .carry/py_gpt_step.py)
#        PILOT_BENCH_SKIP="noclip recompute" bench/gpu-single.sh   (leaves out
#            the run without clipping and the recompute-check run, so the
#            call fits in under ten minutes with the compile anchor)
source "$(dirname "$0")/lib.sh"
fresh_work /tmp/pilot-bench
log() { echo "bench: $*" | tee -a "$out/bench.log"; }

log "date $(date -u +%FT%TZ) host $(hostname)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee -a "$out/bench.log"
gpu_build
runner=build-gpu/runner/pilot-runner
"$runner" --versions --json | tee -a "$out/bench.log"

shape=(--config configs/gpt-1b.toml --set run.grad_accum=1 --set training.steps=20
       --set checkpoint.at_step=10 --set training.warmup_steps=5
       --set training.precision_check_steps=2 --set 'checkpoint.dir="/tmp/pilot-bench/ck"')

log "runner gpt-1b"
t0=$SECONDS
timeout 330 "$runner" run "${shape[@]}" --out "$work/run" --overhead-steps 4 2>&1 | tee "$out/runner.log"
log "runner exit ${PIPESTATUS[0]} in $((SECONDS - t0)) s"
cp "$work/run/results.json" "$out/runner-results.json" 2>/dev/null
log "verify (what the epilog runs)"
t0=$SECONDS
timeout 150 "$runner" verify "${shape[@]}" --checkpoint /tmp/pilot-bench/ck/step-000010 \
  --expect "$work/run/results.json" 2>&1 | tee -a "$out/bench.log"
log "verify exit ${PIPESTATUS[0]} in $((SECONDS - t0)) s"
rm -rf "$work/ck"

log "anchor eager + torch.save/torch.load"
timeout 150 python3 "$anchor" --layers 24 --dmodel 2048 --heads 16 --seq 2048 --mb 8 \
  --ckpt "$work/anchor.pt" >"$out/anchor-eager.json" 2>>"$out/anchor.err"
log "anchor eager exit $?: $(cat "$out/anchor-eager.json")"
rm -f "$work/anchor.pt"

log "runner gpt-1b micro_batch 64 (does not fit)"
timeout 120 "$runner" run --config configs/gpt-1b.toml --set run.micro_batch=64 \
  --set 'checkpoint.dir="/tmp/pilot-bench/ck-oom"' --out "$work/oom" 2>&1 | tail -5 | tee -a "$out/bench.log"
log "runner oom exit ${PIPESTATUS[0]}"
cp "$work/oom/results.json" "$out/oom-results.json" 2>/dev/null

skip=" ${PILOT_BENCH_SKIP:-} "
if [[ $skip != *" noclip "* ]]; then
log "runner gpt-1b without gradient clipping (the anchor does not clip)"
timeout 120 "$runner" run --config configs/gpt-1b.toml --set run.grad_accum=1 --set training.steps=16 \
  --set checkpoint.at_step=15 --set training.warmup_steps=5 --set training.precision_check_steps=0 \
  --set training.grad_clip=0 --set 'checkpoint.dir="/tmp/pilot-bench/ck-noclip"' --out "$work/noclip" \
  2>&1 | grep -v " step " | tee -a "$out/bench.log"
log "runner noclip exit ${PIPESTATUS[0]}"
python3 -c "import json,sys; s=json.load(open(sys.argv[1]))['stages']['single']; print('bench: noclip tokens/s', round(s['tokens_per_second']), 'step_ms', round(s['timings']['step_ms'], 1), 'peak alloc GiB', round(s['memory']['peak_allocated_bytes']/2**30, 2))" "$work/noclip/results.json" | tee -a "$out/bench.log"
rm -rf "$work/ck-noclip"
fi

if [[ $skip != *" recompute "* ]]; then
log "runner gpt-1b with activation checkpointing (recompute check)"
timeout 150 "$runner" run --config configs/gpt-1b.toml --set run.grad_accum=1 --set training.steps=8 \
  --set checkpoint.at_step=4 --set training.warmup_steps=2 --set training.precision_check_steps=0 \
  --set training.activation_checkpointing=true --set training.recompute_check_steps=4 \
  --set 'checkpoint.dir="/tmp/pilot-bench/ck-ac"' --out "$work/ac" 2>&1 | grep -v " step " | tee -a "$out/bench.log"
log "runner recompute exit ${PIPESTATUS[0]}"
python3 -c "import json,sys; print('bench: recompute', json.dumps(json.load(open(sys.argv[1]))['stages']['single']['recompute_check']))" "$work/ac/results.json" | tee -a "$out/bench.log"
rm -rf "$work/ck-ac"
fi

log "anchor torch.compile"
timeout 240 python3 "$anchor" --layers 24 --dmodel 2048 --heads 16 --seq 2048 --mb 8 --compile \
  >"$out/anchor-compile.json" 2>>"$out/anchor.err"
log "anchor compile exit $?: $(cat "$out/anchor-compile.json")"

python3 - "$out" <<'PY' | tee -a "$out/bench.log"
import json, sys, os
out = sys.argv[1]
def load(name, line=False):
    p = os.path.join(out, name)
    try:
        t = open(p).read().strip()
        return json.loads(t.splitlines()[-1]) if line else json.loads(t)
    except Exception as e:
        print(f"summary: {name}: {e}")
        return None
r, e, c, o = load("runner-results.json"), load("anchor-eager.json", True), load("anchor-compile.json", True), load("oom-results.json")
GiB = 2**30
if r and r.get("stages", {}).get("single"):
    s = r["stages"]["single"]
    m, ck, ins = s["memory"], s["checkpoint"], s["instrumentation"]
    print(f"runner: {s['tokens_per_second']:.0f} tok/s, step {s['timings']['step_ms']:.1f} ms, "
          f"peak alloc {(m['peak_allocated_bytes'] or 0)/GiB:.2f} GiB, reserved {(m['peak_reserved_bytes'] or 0)/GiB:.2f}, "
          f"device used {(m['device_used_bytes'] or 0)/GiB:.2f}, first step alloc {(s['memory_first_step']['peak_allocated_bytes'] or 0)/GiB:.2f}, "
          f"resumed alloc {((s.get('memory_resumed') or {}).get('peak_allocated_bytes') or 0)/GiB:.2f}")
    print(f"runner: checkpoint {ck['bytes']/1e9:.2f} GB save {ck['save_seconds']:.2f} s ({ck['save_gb_per_s']:.2f} GB/s), "
          f"load {ck['load_seconds']:.2f} s ({ck['load_gb_per_s']:.2f} GB/s); restore equal {s['restore']['equal']} "
          f"max rel loss diff {s['restore']['max_rel_loss_diff']:.3g} param {s['restore']['max_rel_param_diff']:.3g}")
    print(f"runner: instrumentation {ins['step_ms_instrumented']:.2f} vs {ins['step_ms_plain']:.2f} ms/step: "
          f"overhead {100*ins['overhead_fraction']:+.2f}% (target <= 1%)")
    print(f"runner: precision check {s['precision_check']}")
    print(f"runner: memory first step {s['memory_first_step']}")
    print(f"runner: memory steady {m}")
    print(f"runner: memory resumed {s.get('memory_resumed')}")
    if e:
        print(f"ratio tokens/s runner/eager {s['tokens_per_second']/e['tokens_per_s']:.3f} (target >= 1.0)")
        print(f"ratio peak alloc runner/eager {(m['peak_allocated_bytes'] or 0)/GiB/e['peak_alloc_gib']:.3f} (target <= 1.05)")
        if e.get("ckpt_save_s"):
            ts, tl = e["ckpt_bytes"]/e["ckpt_save_s"]/1e9, e["ckpt_bytes"]/e["ckpt_load_s"]/1e9
            print(f"anchor: torch.save {e['ckpt_bytes']/1e9:.2f} GB {e['ckpt_save_s']} s ({ts:.2f} GB/s), torch.load {e['ckpt_load_s']} s ({tl:.2f} GB/s)")
            print(f"ratio checkpoint save GB/s runner/torch.save {ck['save_gb_per_s']/ts:.2f} (target >= 1.6, and >= 1.0 GB/s)")
            print(f"ratio checkpoint load GB/s runner/torch.load {ck['load_gb_per_s']/tl:.2f} (target >= 1.0)")
    if c:
        print(f"ratio tokens/s runner/compile {s['tokens_per_second']/c['tokens_per_s']:.3f} (compass >= 1.05)")
if o and o.get("stages", {}).get("single"):
    f = o["stages"]["single"].get("failure") or {}
    print(f"oom run: exit {o['exit_code']} status {o['stages']['single']['status']} step {f.get('step')} phase {f.get('phase')} "
          f"peak alloc {((f.get('memory') or {}).get('peak_allocated_bytes') or 0)/GiB:.1f} GiB")
PY
