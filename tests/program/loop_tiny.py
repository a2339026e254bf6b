#!/usr/bin/env python3
"""A plain torchrun-style loop piloted through slurm_pilot.loop: its three lines.

tiny.py's model (with dropout), AdamW, a warm-up schedule and a data stream
whose position is drawn from a generator of its own, on every rank of the
job (DDP over gloo when WORLD_SIZE > 1). The helper saves and restores the
state and reports each step; nothing else in the program knows of the pilot.
"""

import math
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

import slurm_pilot.loop
import tiny


class Stream:
    """Batches for one rank, from a generator whose state is the data's position."""

    def __init__(self, seed, rank, mb, seq):
        self.gen = torch.Generator().manual_seed(seed * 7919 + rank)
        self.mb, self.seq = mb, seq

    def next(self):
        x = torch.randint(tiny.VOCAB, (self.mb, self.seq + 1), generator=self.gen)
        x[:, 1:] = (3 * x[:, :-1] + 1) % tiny.VOCAB
        return x[:, :-1], x[:, 1:]

    def state_dict(self):
        return {"gen": self.gen.get_state()}

    def load_state_dict(self, state):
        self.gen.set_state(state["gen"])


def main():
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    seq, mb = int(os.environ.get("PILOT_SEQ_LEN", 16)), int(os.environ.get("PILOT_MICRO_BATCH", 4))
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    if world > 1:
        dist.init_process_group("gloo", init_method="env://")
    torch.manual_seed(1234)
    model = tiny.Tiny()
    net = nn.parallel.DistributedDataParallel(model) if world > 1 else model
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
    steps = 12
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / 3) * (0.55 + 0.45 * math.cos(math.pi * s / steps)))
    data = Stream(1234, rank, mb, seq)
    torch.manual_seed(99 + rank)  # dropout differs by rank, and is restored

    pilot = slurm_pilot.loop.Pilot(model, opt, sched, data=data)   # pilot
    for _ in pilot.steps(steps):                                   # pilot
        x, y = data.next()
        loss = F.cross_entropy(net(x).view(-1, tiny.VOCAB), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        pilot.step(loss, tokens=x.numel())                         # pilot
    if world > 1:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
