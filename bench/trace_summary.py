#!/usr/bin/env python3
"""Where a step's GPU time goes, from Chrome traces (pilot-runner --trace,
or bench/anchor_trace.py for the plain-PyTorch anchor).

For each trace: GPU busy time per step (union of kernel, copy and memset
intervals), the idle gaps, and the kernels grouped by name; then, for two
traces, the per-name difference (second minus first), largest first.

Usage: bench/trace_summary.py [--steps N] A.json [B.json]
"""
import argparse
import collections
import json


def load(path):
    with open(path) as f:
        t = json.load(f)
    ev = t["traceEvents"] if isinstance(t, dict) else t
    gpu = [e for e in ev if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    return gpu


def summary(gpu, steps):
    if not gpu:
        return None
    iv = sorted((float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0))) for e in gpu)
    busy, gaps, end = 0.0, [], iv[0][0]
    start = iv[0][0]
    for a, b in iv:
        if a > end:
            gaps.append(a - end)
        busy += max(0.0, b - max(a, end))
        end = max(end, b)
    by = collections.defaultdict(lambda: [0.0, 0])
    for e in gpu:
        name = e.get("name", "?")
        by[name][0] += float(e.get("dur", 0))
        by[name][1] += 1
    return dict(span_ms=(end - start) / 1e3 / steps, busy_ms=busy / 1e3 / steps,
                idle_ms=sum(gaps) / 1e3 / steps, gaps_over_50us=sum(1 for g in gaps if g > 50) / steps,
                kernels=len(gpu) / steps,
                by={k: (v[0] / 1e3 / steps, v[1] / steps) for k, v in by.items()})


def short(name, n=230):
    return name if len(name) <= n else name[: n - 3] + "..."


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--top", type=int, default=25)
    p.add_argument("traces", nargs="+")
    a = p.parse_args()
    sums = []
    for path in a.traces:
        s = summary(load(path), a.steps)
        sums.append(s)
        if s is None:
            print(f"trace {path}: no GPU events")
            continue
        print(f"trace {path}: per step span {s['span_ms']:.2f} ms, GPU busy {s['busy_ms']:.2f} ms, "
              f"idle {s['idle_ms']:.2f} ms ({s['gaps_over_50us']:.0f} gaps > 50 us), {s['kernels']:.0f} GPU ops")
        for name, (ms, n) in sorted(s["by"].items(), key=lambda kv: -kv[1][0])[: a.top]:
            print(f"  {ms:8.2f} ms {n:6.0f}x  {short(name)}")
    if len(sums) == 2 and all(sums):
        a_by, b_by = sums[0]["by"], sums[1]["by"]
        names = set(a_by) | set(b_by)
        diff = sorted(((b_by.get(n, (0, 0))[0] - a_by.get(n, (0, 0))[0], n) for n in names), key=lambda d: -abs(d[0]))
        print(f"difference (second - first), per step: busy {sums[1]['busy_ms'] - sums[0]['busy_ms']:+.2f} ms, "
              f"idle {sums[1]['idle_ms'] - sums[0]['idle_ms']:+.2f} ms")
        for d, n in diff[: a.top]:
            print(f"  {d:+8.2f} ms  {b_by.get(n, (0, 0))[1]:5.0f}x vs {a_by.get(n, (0, 0))[1]:5.0f}x  {short(n)}")


if __name__ == "__main__":
    main()
