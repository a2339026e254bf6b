#!/usr/bin/env bash
# The full-node benchmark of pilot-runner on two GPUs, in one call:
#   1. build (scripts/gpu-build, with NCCL);
#   2. the single stage on configs/gpt-1b.toml at seq 2048, micro-batch 8,
#      no accumulation (the scaling baseline);
#   3. the node stage, 2 local processes, sharded, the same shape per GPU,
#      then the anchor (plain PyTorch, same model and shape) with FSDP2 on
#      2 GPUs (torch.distributed.run);
#   4. the node stage in DDP, then the anchor on 1 GPU and with DDP on 2;
#   5. FSDP2 again with the runner's allocator settings (expandable
#      segments);
#   6. a summary: per-GPU tokens/s, scaling efficiency against each one's
#      own single-GPU figure, sharded against FSDP2 (tokens/s and peak
#      memory per rank), communication and restore figures.
# Every step runs under `timeout` and the whole fits in 9 minutes: a step
# that would pass the deadline is skipped (and said so).
# Files in $OUT (default /tmp/pilot-bench-out): bench.log (steps and
# summary), build.log, runner.log (the runner's own output), single.json,
# node-ddp.json, node-sharded.json (results.json of each run), anchors.jsonl
# (one line per anchor run, with "run" naming it).
# Usage: bench/gpu-node.sh [ANCHOR_SCRIPT]   (default .carry/py_gpt_step.py)
source "$(dirname "$0")/lib.sh"
# Anchors run with torch's default allocator unless a step says otherwise;
# the runner sets its own (training.alloc_conf).
unset PYTORCH_ALLOC_CONF PYTORCH_CUDA_ALLOC_CONF
deadline=$((SECONDS + ${PILOT_BENCH_SECONDS:-530}))
fresh_work /tmp/pilot-node-bench
: >"$out/anchors.jsonl"
log() { echo "bench: $*" | tee -a "$out/bench.log"; }

# budget WANTED: the seconds a step may take, within the deadline (0: skip).
budget() {
  local left=$((deadline - SECONDS - 10))
  if ((left < 30)); then echo 0; elif ((left < $1)); then echo "$left"; else echo "$1"; fi
}

log "date $(date -u +%FT%TZ) host $(hostname)"
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader | tee -a "$out/bench.log"
nvidia-smi topo -m 2>&1 | head -6 | tee -a "$out/bench.log"
log "NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE TORCH_SYMM_MEM_DISABLE_MULTICAST=$TORCH_SYMM_MEM_DISABLE_MULTICAST NVSHMEM_DISABLE_NVLS=$NVSHMEM_DISABLE_NVLS"
gpu_build
log "$(grep -E 'pilot-runner: (NCCL|no NCCL)' "$out/build.log" | head -1)"
runner=build-gpu/runner/pilot-runner
"$runner" --versions --json 2>&1 | tee -a "$out/bench.log"

# The shape: gpt-1b, seq 2048, micro-batch 8 per GPU, 12 steps, checkpoint
# after step 10 (the restores run steps 11-12), few checks.
shape=(--config configs/gpt-1b.toml --set run.grad_accum=1 --set run.micro_batch=8
       --set run.seq_len=2048 --set training.steps=12 --set training.warmup_steps=3
       --set checkpoint.at_step=10 --set training.precision_check_steps=0
       --set training.recompute_check_steps=0)

# run_runner NAME SECONDS ARGS...: one runner call; results.json -> $out/NAME.json.
run_runner() {
  local name=$1 want=$2 t rc
  shift 2
  t=$(budget "$want")
  if ((t == 0)); then
    log "$name SKIPPED (no time left)"
    return
  fi
  log "$name (timeout ${t} s)"
  local s0=$SECONDS
  timeout --kill-after=10 "$t" "$runner" run "${shape[@]}" "$@" --out "$work/$name" \
    --set "checkpoint.dir=\"$work/ck-$name\"" >"$work/$name.log" 2>&1
  rc=$?
  log "$name exit $rc in $((SECONDS - s0)) s"
  { echo "=== $name (exit $rc)"; cat "$work/$name.log"; } >>"$out/runner.log"
  grep -E "^pilot: (node: |single|[a-z.]+: )" "$work/$name.log" | grep -v " step " | tail -6 |
    sed 's/^/  /' | tee -a "$out/bench.log"
  cp "$work/$name/results.json" "$out/$name.json" 2>/dev/null || log "$name: no results.json"
  rm -rf "$work/ck-$name"
}

# run_anchor NAME SECONDS CMD...: one anchor run; its JSON line, with "run"
# added, goes to anchors.jsonl.
run_anchor() {
  local name=$1 want=$2 t rc line
  shift 2
  t=$(budget "$want")
  if ((t == 0)); then
    log "anchor $name SKIPPED (no time left)"
    return
  fi
  local s0=$SECONDS
  timeout --kill-after=10 "$t" "$@" --layers 24 --dmodel 2048 --heads 16 --seq 2048 --mb 8 \
    >"$work/anchor-$name.out" 2>"$work/anchor-$name.err"
  rc=$?
  line=$(grep '^{' "$work/anchor-$name.out" | tail -1)
  log "anchor $name exit $rc in $((SECONDS - s0)) s: ${line:-no result}"
  if [[ -n $line ]]; then
    python3 -c 'import json,sys; d=json.loads(sys.argv[2]); d["run"]=sys.argv[1]; print(json.dumps(d))' \
      "$name" "$line" >>"$out/anchors.jsonl"
  else
    tail -15 "$work/anchor-$name.err" | tee -a "$out/bench.log"
  fi
}

# PILOT_BENCH_ONLY="a b ...": run only these of single, node-sharded,
# anchor-fsdp, node-ddp, anchor-single, anchor-ddp, anchor-fsdp-exp (default:
# all, in this order; the whole takes about 9.5 minutes, so give
# PILOT_BENCH_SECONDS=575 or the last is skipped).
only=" ${PILOT_BENCH_ONLY:-single node-sharded anchor-fsdp node-ddp anchor-single anchor-ddp anchor-fsdp-exp} "
want() { [[ $only == *" $1 "* ]]; }
dist=(python3 -m torch.distributed.run --standalone --nproc-per-node=2)
want single && run_runner single 120 --stage single
want node-sharded && run_runner node-sharded 170 --stage node --nproc 2 --set parallel.nproc=2 \
  --set 'parallel.mode="sharded"' --set 'parallel.launcher="local"'
want anchor-fsdp && run_anchor fsdp 100 "${dist[@]}" "$anchor" --fsdp
want node-ddp && run_runner node-ddp 170 --stage node --nproc 2 --set parallel.nproc=2 \
  --set 'parallel.mode="ddp"' --set 'parallel.launcher="local"'
want anchor-single && run_anchor single 90 python3 "$anchor"
want anchor-ddp && run_anchor ddp 100 "${dist[@]}" "$anchor"
want anchor-fsdp-exp && PYTORCH_ALLOC_CONF=expandable_segments:True \
  run_anchor fsdp-exp 100 "${dist[@]}" "$anchor" --fsdp
log "total $SECONDS s"

python3 - "$out" <<'PY' | tee -a "$out/bench.log"
import json, os, sys
out = sys.argv[1]
GiB = 2**30

def load(name):
    try:
        return json.load(open(os.path.join(out, name)))
    except Exception as e:
        print(f"summary: {name}: {e}")
        return None

def ratio(a, b):
    return a / b if a and b else None

def fmt(x, spec=".3f"):
    return "n/a" if x is None else format(x, spec)

anchors = {}
try:
    for line in open(os.path.join(out, "anchors.jsonl")):
        d = json.loads(line)
        anchors[d["run"]] = d
except Exception as e:
    print(f"summary: anchors.jsonl: {e}")

single = load("single.json")
s = (single or {}).get("stages", {}).get("single") or {}
s_tps = s.get("tokens_per_second")
s_peak = (s.get("memory") or {}).get("peak_allocated_bytes")
print(f"runner single: {fmt(s_tps, '.0f')} tok/s, peak alloc {fmt((s_peak or 0) / GiB, '.2f')} GiB, "
      f"status {s.get('status')}")
a1 = anchors.get("single", {})
print(f"anchor single: {a1.get('tokens_per_s', 'n/a')} tok/s, peak alloc {a1.get('peak_alloc_gib', 'n/a')} GiB")

nodes = {}
for mode in ("ddp", "sharded"):
    r = load(f"node-{mode}.json")
    n = (r or {}).get("stages", {}).get("node")
    if not n:
        print(f"runner {mode}: no node stage (exit {(r or {}).get('exit_code')})")
        continue
    nodes[mode] = n
    sc, cm, mem = n["scaling"], n["comm"], n["memory"]
    per = sc["tokens_per_second_per_rank"]
    peaks = [((x.get("memory") or {}).get("peak_allocated_bytes") or 0) / GiB for x in n["ranks"]]
    print(f"runner {mode}: status {n['status']}, world {n['world_size']} ({n['launcher']}, {cm['backend']}), "
          f"{sc['tokens_per_second']:.0f} tok/s total, {per:.0f} per GPU "
          f"(ranks {', '.join(format(x['tokens_per_second'], '.0f') for x in n['ranks'])}), "
          f"step {sum(x['step_ms'] for x in n['ranks']) / max(1, len(n['ranks'])):.1f} ms")
    print(f"  comm: {cm['total_ms_per_step']:.1f} ms/step in flight, {cm['exposed_ms_per_step']:.1f} ms exposed "
          f"({100 * cm['exposed_fraction']:.1f}% of the step), {cm['collectives_per_step']:.0f} collectives, "
          f"buckets {cm['buckets']}, units {cm['units']}; data stall {n['data_stall_ms_per_step']:.2f} ms")
    res = [((x.get("memory") or {}).get("peak_reserved_bytes") or 0) / GiB for x in n["ranks"]]
    dev = [((x.get("memory") or {}).get("device_used_bytes") or 0) / GiB for x in n["ranks"]]
    fwd = [((x.get("memory") or {}).get("forward_peak_allocated_bytes") or 0) / GiB for x in n["ranks"]]
    print(f"  memory: peak alloc per rank {', '.join(format(p, '.2f') for p in peaks)} GiB "
          f"(up to the loss {', '.join(format(p, '.2f') for p in fwd)}), reserved "
          f"{', '.join(format(p, '.2f') for p in res)}, device used {', '.join(format(p, '.2f') for p in dev)} "
          f"(allocator {(r or {}).get('alloc_conf') or 'torch default'}); "
          f"fresh max {fmt((mem.get('fresh_peak_bytes') or 0) / GiB, '.2f')}, "
          f"resumed max {fmt((mem.get('resumed_peak_bytes') or 0) / GiB, '.2f')} GiB")
    ck = n["checkpoint"]
    print(f"  checkpoint: {ck['shards']} shards, {ck['bytes'] / 1e9:.2f} GB, save {ck['save_seconds']:.2f} s "
          f"(slowest rank)")
    for rs in n["restore"]:
        print(f"  restore {rs['from_world_size']} -> {rs['world_size']}: ran {rs['ran']} equal {rs['equal']} "
              f"max rel loss diff {rs['max_rel_loss_diff']:.3g} param {rs['max_rel_param_diff']:.3g} "
              f"load {rs['load_seconds']:.2f} s {rs['detail']}")
    if n.get("failure"):
        print(f"  failure: {n['failure']}")

ad, af = anchors.get("ddp", {}), anchors.get("fsdp", {})
for name in ("single", "ddp", "fsdp", "fsdp-exp"):
    a = anchors.get(name)
    if a:
        print(f"anchor {name}: {a.get('tokens_per_s')} tok/s per GPU, GiB peak alloc {a.get('peak_alloc_gib')}, "
              f"reserved {a.get('peak_reserved_gib')}, device used {a.get('device_used_gib')}")

print("--- targets")
eff_r = ratio(nodes.get("ddp", {}).get("scaling", {}).get("tokens_per_second_per_rank"), s_tps)
eff_a = ratio(ad.get("tokens_per_s"), a1.get("tokens_per_s"))
met = eff_r is not None and eff_a is not None and eff_r >= eff_a
print(f"DDP scaling efficiency: runner {fmt(eff_r)} (per GPU / single), anchor {fmt(eff_a)} "
      f"-> target runner >= anchor: {'met' if met else 'NOT met' if eff_r and eff_a else 'n/a'}")
print(f"DDP per GPU tok/s runner/anchor: {fmt(ratio(nodes.get('ddp', {}).get('scaling', {}).get('tokens_per_second_per_rank'), ad.get('tokens_per_s')))}")
sh = nodes.get("sharded")
if sh:
    sh_tps = sh["scaling"]["tokens_per_second_per_rank"]
    sh_peak = max([((x.get("memory") or {}).get("peak_allocated_bytes") or 0) for x in sh["ranks"]] or [0]) / GiB
    r_tps = ratio(sh_tps, af.get("tokens_per_s"))
    r_mem = ratio(sh_peak, af.get("peak_alloc_gib"))
    ok = r_tps is not None and r_mem is not None and r_tps >= 1.0 and r_mem <= 1.0
    print(f"sharded vs FSDP2: tok/s per GPU {sh_tps:.0f} vs {af.get('tokens_per_s', 'n/a')} (ratio {fmt(r_tps)}), "
          f"peak alloc per rank {sh_peak:.2f} vs {af.get('peak_alloc_gib', 'n/a')} GiB (ratio {fmt(r_mem)}) "
          f"-> target tok/s >= and memory <= FSDP2: {'met' if ok else 'NOT met' if r_tps and r_mem else 'n/a'}")
    print(f"sharded scaling efficiency (per GPU / runner single): {fmt(ratio(sh_tps, s_tps))}; "
          f"FSDP2 / anchor single: {fmt(ratio(af.get('tokens_per_s'), a1.get('tokens_per_s')))}")
PY
