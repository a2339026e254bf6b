#!/usr/bin/env bash
# The fused loss's CUDA kernel against the unfused loss, on a GPU, in one
# short call: configs/tiny-cpu.toml moved to the GPU, for both model
# families, bf16 and fp32, and a vocabulary that is not a multiple of 8
# (the kernel's scalar path). Each pair runs from the same seed; the script
# prints the worst relative difference of the losses and gradient norms,
# whether each restore was equal, and any CUDA-context warning in the logs.
# Logs to $OUT/fused-loss.log.
# Usage: bench/gpu-fused-loss.sh
source "$(dirname "$0")/lib.sh"
fresh_work /tmp/pilot-fused-loss
log() { echo "fused-loss: $*" | tee -a "$out/fused-loss.log"; }
gpu_build
runner=build-gpu/runner/pilot-runner
base=(--config configs/tiny-cpu.toml --set 'training.device="cuda"' --set training.steps=6
      --set checkpoint.at_step=3 --set training.deterministic=false --set eval.restore_tolerance=1e-3)
for case in "gpt bf16 512" "gpt fp32 512" "llama bf16 512" "llama fp32 512" "gpt bf16 509"; do
  read -r kind prec vocab <<<"$case"
  for fused in true false; do
    name=$kind-$prec-$vocab-$fused
    timeout 120 "$runner" run "${base[@]}" --set "model.kind=\"$kind\"" --set "training.precision=\"$prec\"" \
      --set "model.vocab=$vocab" --set "training.fused_loss=$fused" \
      --set "checkpoint.dir=\"$work/ck-$name\"" --out "$work/$name" >"$work/$name.log" 2>&1
    rc=$?
    log "$name exit $rc, CUDA context warnings $(grep -c 'no current CUDA context' "$work/$name.log")"
    [[ $rc -ne 0 ]] && tail -5 "$work/$name.log"
  done
  python3 - "$work" "$kind-$prec-$vocab" <<'PY' | tee -a "$out/fused-loss.log"
import json, os, sys
w, case = sys.argv[1:3]
def single(f):
    return json.load(open(os.path.join(w, f"{case}-{f}", "results.json")))["stages"]["single"]
a, b = single("true"), single("false")
def worst(k):
    return max(abs(x - y) / abs(y) for x, y in zip(a[k], b[k]))
print(f"fused-loss: {case}: fused {a['shape'].get('fused_loss')} vs {b['shape'].get('fused_loss')}; "
      f"first loss {a['losses'][0]:.6f} vs {b['losses'][0]:.6f}; worst relative loss {worst('losses'):.2e}, "
      f"gradient norm {worst('grad_norms'):.2e}; restores equal {a['restore']['equal']} {b['restore']['equal']}")
PY
done
