#!/usr/bin/env python3
"""examples/train_gpt.py's GPT in a plain loop that leaks: every step's logits stay on the GPU.

A common mistake (a list of outputs "for later", a running total that keeps
its graph): the allocator's peak grows by the logits' size every step, and
the long run dies of it hours in. Everything else is right, through
slurm_pilot.loop (weights, optimizer, schedule, generators and the data's
position saved after step K and restored), so the pilot's NO-GO names only
the growth (bench/gpu-frameworks.sh).
"""

import math
import os
import random
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))
try:
    import slurm_pilot.loop
except ImportError:
    sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
    import slurm_pilot.loop

import train_gpt  # noqa: E402


def main():
    args = train_gpt.parse_args()
    device = torch.device(args.device, 0) if args.device == "cuda" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    bf16 = args.precision == "bf16" or (args.precision == "auto" and device.type == "cuda")
    torch.manual_seed(args.seed)
    model = train_gpt.GPT(args.vocab, args.layers, args.d_model, args.heads, args.seq_len).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.1)
    warmup, total = args.warmup, slurm_pilot.steps() or args.steps
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: (s + 1) / warmup if s < warmup else
        0.1 + 0.45 * (1 + math.cos(math.pi * min(1.0, (s - warmup) / max(1, total - warmup)))))
    data = train_gpt.Data(args, 0, 1)
    torch.manual_seed(args.seed + 1)  # dropout
    random.seed(args.seed)

    pilot = slurm_pilot.loop.Pilot(model, opt, sched, data=data)
    kept = []  # the leak
    for step in pilot.steps(args.steps):
        x, y = (t.to(device) for t in data.next())
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=bf16):
            logits = model(x)
        loss = F.cross_entropy(logits.float().view(-1, args.vocab), y.reshape(-1))
        kept.append(logits)  # "for the end-of-run report": never freed
        opt.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        pilot.step(loss, tokens=args.seq_len * args.micro_batch, grad_norm=grad_norm,
                   seq_len=args.seq_len, micro_batch=args.micro_batch)
        print("step %d loss %.6f kept %d" % (step, loss.item(), len(kept)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
