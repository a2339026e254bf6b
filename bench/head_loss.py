#!/usr/bin/env python3
"""The output layer and its loss, forward and backward, in three ways, on
one GPU: the time the GPU spends (sum of kernel durations from the
profiler, so the host's pace does not count), the wall time, the peak
allocated above the inputs, and the loss and gradients against a float64
reference.

  eager    logits = x W^T in bf16, cross entropy on their float32 copy (the
           anchor's and, before, the runner's way)
  dtype    log_softmax straight to float32 from the bf16 logits, then nll
  fused-R-S  the fused loss's arithmetic without its CUDA kernel (as the
           runner's ATen path does it): the loss and the gradient of the
           logits made in the forward pass, matrix products R rows at a
           time, the softmax S rows at a time (so its float32 rows may stay
           in the L2 cache); backward is two matrix products.
The runner's kernel itself shows in its trace (bench/gpu-throughput.sh).

Usage: bench/head_loss.py [--tokens 16384] [--dmodel 2048] [--vocab 50304]
"""
import argparse
import json
import time

import torch
import torch.nn.functional as F


class FusedHead(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, t, rows, sub):
        n, v = x.shape[0], w.shape[0]
        g = torch.empty(n, v, dtype=x.dtype, device=x.device)
        lpt = torch.empty(n, 1, dtype=torch.float32, device=x.device)
        minus = torch.full((sub, 1), -1.0, device=x.device)
        for r0 in range(0, n, rows):
            r1 = min(n, r0 + rows)
            torch.mm(x[r0:r1], w.t(), out=g[r0:r1])
            for s0 in range(r0, r1, sub):
                s1 = min(r1, s0 + sub)
                gs, ts = g[s0:s1], t[s0:s1].unsqueeze(1)
                lp = torch.log_softmax(gs, 1, dtype=torch.float32)
                torch.gather(lp, 1, ts, out=lpt[s0:s1])
                lp.exp_()
                lp.scatter_add_(1, ts, minus[: s1 - s0])
                torch.mul(lp, 1.0 / n, out=gs)
        ctx.save_for_backward(x, w, g)
        return -lpt.sum() / n

    @staticmethod
    def backward(ctx, go):
        x, w, g = ctx.saved_tensors
        gx = torch.mm(g, w).mul_(go)
        gw = torch.mm(g.t(), x * go.to(x.dtype))
        return gx, gw, None, None, None


def head(kind, x, w32, t):
    w = w32.to(torch.bfloat16)
    if kind == "eager":
        return F.cross_entropy((x @ w.t()).float(), t)
    if kind == "dtype":
        return F.nll_loss(F.log_softmax(x @ w.t(), -1, dtype=torch.float32), t)
    _, rows, sub = kind.split("-")
    return FusedHead.apply(x, w, t, int(rows), int(sub))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tokens", type=int, default=16384)
    p.add_argument("--dmodel", type=int, default=2048)
    p.add_argument("--vocab", type=int, default=50304)
    p.add_argument("--iters", type=int, default=6)
    p.add_argument("--kinds", default="eager dtype fused-2048-128 fused-2048-256 fused-4096-512 fused-16384-16384")
    a = p.parse_args()
    torch.manual_seed(0)
    dev = "cuda"
    x = (torch.randn(a.tokens, a.dmodel, device=dev) * 2).to(torch.bfloat16).requires_grad_()
    w32 = (torch.randn(a.vocab, a.dmodel, device=dev) * 0.02).requires_grad_()
    t = torch.randint(0, a.vocab, (a.tokens,), device=dev)
    # float64 reference from the same bf16 operands
    with torch.no_grad():
        xr, wr = x.detach().double(), w32.detach().to(torch.bfloat16).double()
        lr = (xr @ wr.t()).log_softmax(-1)
        ref_loss = -lr.gather(1, t.unsqueeze(1)).mean().item()
        gl = lr.exp()
        gl.scatter_add_(1, t.unsqueeze(1), -torch.ones(a.tokens, 1, dtype=torch.float64, device=dev))
        gl /= a.tokens
        ref_gx = gl @ wr
        ref_gw = gl.t() @ xr
        del lr, gl, xr, wr
    torch.cuda.empty_cache()
    for kind in a.kinds.split():
        x.grad, w32.grad = None, None
        for _ in range(2):
            x.grad, w32.grad = None, None
            head(kind, x, w32, t).backward()
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            t0 = time.perf_counter()
            s.record()
            for _ in range(a.iters):
                x.grad, w32.grad = None, None
                loss = head(kind, x, w32, t)
                loss.backward()
            e.record()
            host = (time.perf_counter() - t0) * 1e3 / a.iters
            torch.cuda.synchronize()
        gpu_us = sum(ev.device_time_total for ev in prof.key_averages()) / a.iters
        kernels = sorted(prof.key_averages(), key=lambda ev: -ev.device_time_total)[:6]
        rel = lambda g, r: ((g.double() - r).norm() / r.norm()).item()
        print(json.dumps(dict(
            kind=kind, gpu_ms=round(gpu_us / 1e3, 3), wall_ms=round(s.elapsed_time(e) / a.iters, 3),
            host_ms=round(host, 3),
            peak_above_inputs_gib=round((torch.cuda.max_memory_allocated() - base) / 2**30, 3),
            loss=loss.item(), loss_err=abs(loss.item() - ref_loss),
            gx_rel=rel(x.grad, ref_gx), gw_rel=rel(w32.grad, ref_gw),
            top=[(ev.key[:60], round(ev.device_time_total / a.iters / 1e3, 3)) for ev in kernels])),
            flush=True)
    # fp32 output straight from a bf16 product (a weight gradient's shape)
    try:
        g = torch.randn(a.tokens, 4 * a.dmodel, device=dev, dtype=torch.bfloat16)
        h = torch.randn(a.tokens, a.dmodel, device=dev, dtype=torch.bfloat16)
        for name, fn in (("bf16-out+cast", lambda: torch.mm(g.t(), h).float()),
                         ("fp32-out", lambda: torch.mm(g.t(), h, out_dtype=torch.float32))):
            for _ in range(3):
                fn()
            torch.cuda.synchronize()
            s.record()
            for _ in range(20):
                fn()
            e.record()
            torch.cuda.synchronize()
            print(json.dumps(dict(kind="mm " + name, ms=round(s.elapsed_time(e) / 20, 4))), flush=True)
    except Exception as ex:  # older torch: no out_dtype
        print(json.dumps(dict(kind="mm fp32-out", error=str(ex)[:200])), flush=True)


if __name__ == "__main__":
    main()
