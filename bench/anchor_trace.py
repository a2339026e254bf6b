#!/usr/bin/env python3
"""A Chrome trace of the plain-PyTorch anchor's training step (the same
model and step as the anchor script), to compare with pilot-runner --trace
using bench/trace_summary.py.

Usage: bench/anchor_trace.py ANCHOR.py OUT.json [anchor flags: --layers ...]
"""
import importlib.util
import sys

import torch

spec = importlib.util.spec_from_file_location("anchor", sys.argv[1])
anchor = importlib.util.module_from_spec(spec)
spec.loader.exec_module(anchor)
out = sys.argv[2]
p = anchor.argparse.ArgumentParser()
for k, v in dict(layers=12, dmodel=768, heads=12, seq=1024, mb=8, vocab=50304).items():
    p.add_argument(f"--{k}", type=int, default=v)
a = p.parse_args(sys.argv[3:])
torch.manual_seed(1234)
dev = "cuda"
model = anchor.GPT(a.vocab, a.seq, a.layers, a.dmodel, a.heads).to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
g = torch.Generator(device=dev).manual_seed(7)


def step():
    x = torch.randint(0, a.vocab, (a.mb, a.seq), device=dev, generator=g)
    y = torch.roll(x, -1, 1)
    opt.zero_grad(set_to_none=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(x, y)
    loss.backward()
    opt.step()


for _ in range(3):
    step()
torch.cuda.synchronize()
acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
with torch.profiler.profile(activities=acts) as prof:
    for _ in range(3):
        step()
    torch.cuda.synchronize()
prof.export_chrome_trace(out)
print(f"anchor trace written to {out}")
