#!/usr/bin/env python3
"""A clean program that reports only on standard output, for loss_pattern.

It neither imports slurm_pilot nor opens PILOT_METRICS: each optimizer step
prints one line "iter N: loss=X lr=Y". It honours PILOT_STEPS,
PILOT_CHECKPOINT_STEP, PILOT_CHECKPOINT_DIR and PILOT_RESUME_DIR itself; a
resumed run's first line is step K+1. X is printed in full (repr), so a
resumed run's losses can be compared bitwise. PRINT_LOSS_FAULT=rng_not_restored
leaves the resumed run's torch generator as seeded (its dropout then differs);
PRINT_LOSS_FAULT=optimizer_not_restored builds the resumed run's optimizer
afresh (its first step is still the reference's, the next ones are not).
PRINT_LOSS_JITTER=REL moves every weight after each step by unseeded noise of
that relative size, as a GPU's kernels round differently in two runs.
"""

import math
import os
import random

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB = 64


def env_int(name, default):
    return int(os.environ.get(name) or default)


def batch(seed, step, mb, seq):
    g = torch.Generator().manual_seed(seed * 1000003 + step)
    x = torch.empty(mb, seq + 1, dtype=torch.long)
    x[:, 0] = torch.randint(VOCAB, (mb,), generator=g)
    for t in range(seq):
        x[:, t + 1] = (5 * x[:, t] + 3) % VOCAB
    return x[:, :-1], x[:, 1:]


def main():
    steps = env_int("PILOT_STEPS", 8)
    ckpt_step = env_int("PILOT_CHECKPOINT_STEP", 0)
    seq, mb, seed = env_int("PILOT_SEQ_LEN", 16), env_int("PILOT_MICRO_BATCH", 4), env_int("PILOT_SEED", 1)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Embedding(VOCAB, 32), nn.Linear(32, 64), nn.GELU(),
                          nn.Dropout(0.1), nn.Linear(64, VOCAB))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.5 * (1 + math.cos(math.pi * s / steps)))
    random.seed(seed)

    jitter = float(os.environ.get("PRINT_LOSS_JITTER") or 0)
    noise = torch.Generator().manual_seed(int.from_bytes(os.urandom(7), "little"))
    first = 1
    resume = os.environ.get("PILOT_RESUME_DIR")
    if resume:
        ck = torch.load(os.path.join(resume, "state.pt"), weights_only=False)
        model.load_state_dict(ck["model"])
        if os.environ.get("PRINT_LOSS_FAULT") != "optimizer_not_restored":
            opt.load_state_dict(ck["optimizer"])
        sched.load_state_dict(ck["scheduler"])
        if os.environ.get("PRINT_LOSS_FAULT") != "rng_not_restored":  # a test's fault
            torch.set_rng_state(ck["torch_rng"])
        random.setstate((ck["py_rng"][0], tuple(ck["py_rng"][1]), ck["py_rng"][2]))
        first = ck["step"] + 1

    for step in range(first, steps + 1):
        x, y = batch(seed, step, mb, seq)
        loss = F.cross_entropy(model(x).reshape(-1, VOCAB), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        lr = opt.param_groups[0]["lr"]
        opt.step()
        sched.step()
        if jitter > 0:
            with torch.no_grad():
                for p in model.parameters():
                    p.mul_(1 + jitter * torch.randn(p.shape, generator=noise))
        print("iter %d: loss=%r lr=%.6g" % (step, loss.item(), lr), flush=True)
        if step == ckpt_step:
            d = os.environ["PILOT_CHECKPOINT_DIR"]
            os.makedirs(d, exist_ok=True)
            tmp = os.path.join(d, "state.pt.tmp")
            torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(),
                        "scheduler": sched.state_dict(), "step": step,
                        "torch_rng": torch.get_rng_state(), "py_rng": random.getstate()}, tmp)
            os.replace(tmp, os.path.join(d, "state.pt"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
