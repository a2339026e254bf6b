#!/usr/bin/env python3
"""Does a Trainer resume exactly? examples/hf_trainer.py's Trainer, without a pilot.

For each variant: a reference process trains N steps saving checkpoint-K, a
fresh process resumes from checkpoint-K to N, and a second reference trains
1..N again from scratch (the run's own run-to-run noise). Every step's logged
loss and a digest of its first batch's token ids are written by a callback;
the comparison says at which step the losses first differ (bitwise), their
largest relative difference, and whether the batches were the same.
Variants: as_bench (bf16, an evaluation every 5 steps, GPT-2's dropout),
no_eval, no_dropout, deterministic (TrainingArguments.full_determinism).
Prints one JSON object per variant. Needs transformers; downloads nothing.
Usage: hf_resume_check.py [--variants as_bench,no_eval] [model flags of hf_trainer.py]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
VARIANTS = ("as_bench", "no_eval", "no_dropout", "deterministic")


def run_phase(ns):
    """One process: train (reference, again) or resume (resumed); write the steps seen."""
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    sys.path.insert(0, os.path.join(ROOT, "python"))
    for k in [k for k in os.environ if k.startswith("PILOT_")]:
        del os.environ[k]  # never inside a pilot: the example's callback is a no-op
    import torch
    import transformers
    import hf_trainer

    if ns.variant == "no_dropout":
        config = hf_trainer.GPT2Config
        hf_trainer.GPT2Config = lambda **kw: config(resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, **kw)
    sys.argv = [sys.argv[0]] + ns.model
    args = hf_trainer.parse_args()
    args.steps, args.save_steps, args.bf16 = ns.steps, ns.at, True
    args.eval_steps = 0 if ns.variant == "no_eval" else 5
    args.output_dir = os.path.join(ns.dir, "out-" + ns.phase)
    seen = {}

    class Watch(transformers.TrainerCallback):
        def on_log(self, a, state, control, logs=None, **kw):
            if logs and "loss" in logs:
                seen.setdefault(state.global_step, {})["loss"] = float(logs["loss"])

    training = dict(logging_steps=1, save_total_limit=None)
    if ns.variant == "deterministic":
        training["full_determinism"] = True
    trainer = hf_trainer.build_trainer(args, callbacks=[Watch()], **training)
    model = trainer.model

    def before(module, a, kw):
        ids = kw.get("input_ids") if kw else (a[0] if a else None)
        if module.training and ids is not None:
            step = trainer.state.global_step + 1
            if "batch" not in seen.setdefault(step, {}):
                flat = ids.detach().reshape(-1).long()
                w = torch.arange(1, flat.numel() + 1, device=flat.device) % 65521
                seen[step]["batch"] = "%d:%d" % (int(flat.sum()), int((flat * w).sum()))

    model.register_forward_pre_hook(before, with_kwargs=True)
    resume = os.path.join(ns.dir, "out-reference", "checkpoint-%d" % ns.at) if ns.phase == "resumed" else None
    trainer.train(resume_from_checkpoint=resume)
    with open(os.path.join(ns.dir, ns.phase + ".json"), "w") as f:
        json.dump({str(k): v for k, v in sorted(seen.items())}, f)


def compare(a, b, first, last):
    out = {"first_differing_step": None, "max_rel_loss_diff": 0.0, "batches_equal": True,
           "first_differing_batch": None, "steps_compared": 0}
    for step in range(first, last + 1):
        x, y = a.get(str(step)), b.get(str(step))
        if not x or not y or "loss" not in x or "loss" not in y:
            continue
        out["steps_compared"] += 1
        rel = abs(x["loss"] - y["loss"]) / max(abs(x["loss"]), 1e-12)
        out["max_rel_loss_diff"] = max(out["max_rel_loss_diff"], rel)
        if x["loss"] != y["loss"] and out["first_differing_step"] is None:
            out["first_differing_step"] = step
        if x.get("batch") != y.get("batch"):
            out["batches_equal"] = False
            if out["first_differing_batch"] is None:
                out["first_differing_batch"] = step
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--at", type=int, default=10)
    ap.add_argument("--phase", choices=["reference", "resumed", "again"], help=argparse.SUPPRESS)
    ap.add_argument("--variant", help=argparse.SUPPRESS)
    ap.add_argument("--dir", help=argparse.SUPPRESS)
    ns, model = ap.parse_known_args()
    ns.model = model
    if ns.phase:
        run_phase(ns)
        return 0
    for variant in ns.variants.split(","):
        folder = tempfile.mkdtemp(prefix="hf-resume-%s-" % variant)
        result = {"variant": variant}
        for phase in ("reference", "resumed", "again"):
            cmd = [sys.executable, os.path.abspath(__file__), "--phase", phase, "--variant", variant,
                   "--dir", folder, "--steps", str(ns.steps), "--at", str(ns.at)] + model
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if p.returncode != 0:
                result[phase + "_failed"] = p.stdout[-2000:]
                break
        else:
            ref, res, again = (json.load(open(os.path.join(folder, n + ".json")))
                               for n in ("reference", "resumed", "again"))
            result["resumed_vs_reference"] = compare(ref, res, ns.at + 1, ns.steps)
            result["rerun_vs_reference"] = compare(ref, again, 1, ns.steps)
        print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
