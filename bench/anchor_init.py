#!/usr/bin/env python3
"""The plain-PyTorch anchor's training step with the runner's initialisation
instead of torch's module defaults, to tell the code's speed from the data's.

The anchor's own init (N(0, 1) tied embeddings, uniform linear weights)
gives losses near 150 and activations unlike a real run's; under the H200's
power cap the same kernels then run at other clocks. This runs the anchor's
unchanged step (its run() and flags) after re-initialising like
pilot-runner's builtin GPT: every linear and embedding weight N(0, 0.02),
the two residual projections of each block N(0, 0.02 / sqrt(2 L)), biases
zero, LayerNorm at ones and zeros.

Usage: bench/anchor_init.py ANCHOR.py [anchor flags: --layers ...]
"""
import argparse
import importlib.util
import math
import sys

import torch

spec = importlib.util.spec_from_file_location("anchor", sys.argv[1])
anchor = importlib.util.module_from_spec(spec)
spec.loader.exec_module(anchor)
base_init = anchor.GPT.__init__


def runner_init(self, vocab, seq, L, d, h):
    base_init(self, vocab, seq, L, d, h)
    with torch.no_grad():
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                p.zero_()
            elif p.dim() >= 2:
                resid = name.endswith("proj.weight") or name.endswith("out.weight")
                p.normal_(0.0, 0.02 / math.sqrt(2 * L) if resid else 0.02)


anchor.GPT.__init__ = runner_init
p = argparse.ArgumentParser()
for k, v in dict(layers=12, dmodel=768, heads=12, seq=1024, mb=8, vocab=50304, steps=10, warmup=3).items():
    p.add_argument(f"--{k}", type=int, default=v)
p.add_argument("--compile", action="store_true")
p.add_argument("--ckpt", default="")
p.add_argument("--fsdp", action="store_true")
anchor.run(p.parse_args(sys.argv[2:]))
