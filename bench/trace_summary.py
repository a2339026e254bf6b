#!/usr/bin/env python3
"""Where a step's GPU time goes, from Chrome traces (pilot-runner --trace,
or bench/anchor_trace.py for the plain-PyTorch anchor).

For each trace: GPU busy time per step (union of kernel, copy and memset
intervals), the idle gaps, and the kernels grouped by name; then, for two
traces, the per-name difference (second minus first), largest first.

With --per-step, one trace is cut into its steps (a step ends with its
last fused-optimizer kernel) and each step's span, busy and idle time and
its matrix-product time are listed; then the slowest step against the
median one, per kernel name: what a slow step spends its time on.

Usage: bench/trace_summary.py [--steps N] A.json [B.json]
       bench/trace_summary.py --per-step A.json
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


def is_optimizer(name):
    return "FusedAdam" in name or "fused_adam" in name


def is_matmul(name):
    return name.startswith("nvjet") or "gemm" in name.lower() or "cutlass" in name


def split_steps(gpu):
    """Lists of events, one per step: a step ends with a run of optimizer kernels."""
    steps, cur, in_opt = [], [], False
    for e in sorted(gpu, key=lambda e: float(e["ts"])):
        opt = is_optimizer(e.get("name", ""))
        if in_opt and not opt:
            steps.append(cur)
            cur = []
        cur.append(e)
        in_opt = opt
    if cur:
        steps.append(cur)
    # A step whose optimizer runs in several groups with other kernels
    # between them is cut more than once: pieces of few kernels join the
    # piece before them.
    most = max((len(st) for st in steps), default=0)
    merged = []
    for st in steps:
        if merged and len(st) < 0.1 * most:
            merged[-1].extend(st)
        else:
            merged.append(st)
    return merged


def per_step(gpu, top):
    steps = split_steps(gpu)
    rows = []
    for i, st in enumerate(steps):
        t0 = float(st[0]["ts"])
        t1 = float(steps[i + 1][0]["ts"]) if i + 1 < len(steps) else max(float(e["ts"]) + float(e.get("dur", 0)) for e in st)
        s = summary(st, 1)
        mm = sum(float(e.get("dur", 0)) for e in st if is_matmul(e.get("name", ""))) / 1e3
        rows.append(dict(i=i, span=(t1 - t0) / 1e3, busy=s["busy_ms"], idle=s["idle_ms"], gaps=s["gaps_over_50us"],
                         mm=mm, n=len(st), by=s["by"]))
        print(f"  step {i}: span {rows[-1]['span']:7.2f} ms, busy {s['busy_ms']:7.2f}, idle {s['idle_ms']:6.2f} "
              f"({s['gaps_over_50us']:.0f} gaps > 50 us), matmul {mm:7.2f} ms, {len(st)} GPU ops")
    full = [r for r in rows if r["n"] > 0.5 * max(x["n"] for x in rows)]
    if len(full) < 2:
        return
    by_span = sorted(full, key=lambda r: r["span"])
    med, slow = by_span[len(by_span) // 2], by_span[-1]
    print(f"slowest step {slow['i']} ({slow['span']:.2f} ms) against the median step {med['i']} ({med['span']:.2f} ms): "
          f"busy {slow['busy'] - med['busy']:+.2f} ms, idle {slow['idle'] - med['idle']:+.2f} ms, "
          f"matmul {slow['mm'] - med['mm']:+.2f} ms")
    names = set(slow["by"]) | set(med["by"])
    diff = sorted(((slow["by"].get(n, (0, 0))[0] - med["by"].get(n, (0, 0))[0], n) for n in names),
                  key=lambda d: -abs(d[0]))
    for d, n in diff[:top]:
        print(f"  {d:+8.2f} ms  {short(n)}")


def short(name, n=230):
    return name if len(name) <= n else name[: n - 3] + "..."


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--per-step", action="store_true")
    p.add_argument("traces", nargs="+")
    a = p.parse_args()
    if a.per_step:
        for path in a.traces:
            print(f"trace {path}: per step")
            per_step(load(path), a.top)
        return
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
