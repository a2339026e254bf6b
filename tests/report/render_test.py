#!/usr/bin/env python3
"""Renders `pilot report` pages in headless Chromium and checks them.

Two pages: the CPU pilot fixture (tests/report/fixtures) and a GPU variant of
it (device memory figures, the gpt-1b config). For each: the HTML is one
self-contained file (no scripts, no external URLs); Chromium loads it
(--dump-dom) and the DOM holds every plot with its marks; the screenshot is a
PNG that is not blank. Exit 77 (skip) when chromium is not installed.
"""
import argparse
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

GIB = 1 << 30
IDS = ["memory-steps", "memory-split", "loss-steps", "time-steps", "time-breakdown",
       "hardware-fit", "budget"]


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def gpu_variant(src, dst):
    r = json.load(open(src))
    s = r["stages"]["single"]
    s["device"] = "cuda"
    s["device_name"] = "NVIDIA H100 80GB HBM3"
    s["shape"].update(params=1300000000, seq_len=2048, micro_batch=8, grad_accum=4,
                      tokens_per_step=65536, precision="bf16")
    s["tokens_per_second"] = 48000.0
    s["timings"]["step_ms"] = 65536 / 48.0
    s["timings"]["data_wait_ms"] = 20.0
    s["timings"]["forward_backward_ms"] = 1250.0
    s["timings"]["optimizer_ms"] = 60.0
    s["checkpoint"]["save_seconds"] = 40.0
    for key, alloc, extra in (("memory_first_step", 58, 0), ("memory", 60, 0),
                              ("memory_resumed", 60, 1)):
        m = s[key]
        m["device"] = "cuda"
        m["peak_allocated_bytes"] = alloc * GIB
        m["peak_reserved_bytes"] = (alloc + 2) * GIB
        m["device_used_bytes"] = (alloc + 3 + extra) * GIB
        m["device_total_bytes"] = 80 * GIB
        m["runtime_overhead_bytes"] = (1 + extra) * GIB
    json.dump(r, open(dst, "w"), indent=2)


def check_html(path):
    html = open(path, encoding="utf-8").read()
    if "<script" in html.lower():
        fail(path + ": has a script")
    for m in re.finditer(r'(?:src|href)\s*=\s*"([^"]*)"', html):
        fail(path + ": references " + m.group(1))
    if re.search(r"url\(", html):
        fail(path + ": CSS url()")
    return html


def png_stats(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        fail(path + ": not a PNG")
    pos, idat, width, height = 8, b"", 0, 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            width, height = struct.unpack(">II", body[:8])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    return width, height, len(set(raw)), len(raw)


def run_chromium(chromium, args, timeout=120):
    return subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                           "--disable-quic", "--no-first-run", "--disable-background-networking",
                           "--disable-component-update", "--disable-sync"] + args,
                          capture_output=True, text=True, timeout=timeout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pilot", required=True)
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--work-dir", required=True)
    a = ap.parse_args()
    work = a.work_dir
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work + "/state")
    fx = os.path.join(a.source_dir, "tests/report/fixtures")
    policy = os.path.join(work, "pilot.conf")
    open(policy, "w").write('state_dir = "%s/state"\nhardware_catalog = "%s/etc/hardware.toml"\n'
                            % (work, a.source_dir))
    os.makedirs(work + "/gpu")
    gpu_variant(os.path.join(fx, "results.json"), work + "/gpu/results.json")
    shutil.copy(os.path.join(fx, "metrics.jsonl"), work + "/gpu/metrics.jsonl")
    pages = [("cpu", os.path.join(fx, "results.json"), "configs/tiny-cpu.toml"),
             ("gpu", work + "/gpu/results.json", "configs/gpt-1b.toml")]
    for name, results, cfg in pages:
        out = os.path.join(work, name + ".html")
        p = subprocess.run([a.pilot, "report", "--policy", policy, "--config",
                            os.path.join(a.source_dir, cfg), "-o", out, results],
                           capture_output=True, text=True)
        if p.returncode != 0:
            fail("pilot report %s: exit %d: %s" % (name, p.returncode, p.stderr))
        check_html(out)

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("SKIP: chromium is not installed (Debian package chromium)")
        sys.exit(77)
    for name, _, _ in pages:
        page = "file://" + os.path.join(work, name + ".html")
        profile = tempfile.mkdtemp(prefix="pilot-chromium-")
        try:
            d = run_chromium(chromium, ["--user-data-dir=" + profile, "--dump-dom", page])
            if d.returncode != 0:
                fail("chromium --dump-dom %s: exit %d: %s" % (name, d.returncode, d.stderr[-2000:]))
            dom = d.stdout
            for chart in IDS:
                m = re.search(r'<svg[^>]*id="%s".*?</svg>' % chart, dom, re.S)
                if m is None:
                    fail("%s: no <svg id=%s> in the DOM" % (name, chart))
                body = m.group(0)
                marks = len(re.findall(r"<(?:polyline|rect) class=\"(?:series|bar)\"", body))
                if marks == 0:
                    fail("%s: <svg id=%s> has no marks" % (name, chart))
            png = os.path.join(work, name + ".png")
            s = run_chromium(chromium, ["--user-data-dir=" + profile, "--screenshot=" + png,
                                        "--window-size=1200,2000", page])
            if s.returncode != 0 or not os.path.exists(png):
                fail("chromium --screenshot %s: exit %d: %s" % (name, s.returncode, s.stderr[-2000:]))
            w, h, distinct, size = png_stats(png)
            if (w, h) != (1200, 2000) or distinct < 16:
                fail("%s: screenshot %dx%d with %d distinct byte values looks blank"
                     % (name, w, h, distinct))
            print("ok %s: %d plots in the DOM, screenshot %dx%d (%d distinct values) %s"
                  % (name, len(IDS), w, h, distinct, png))
        finally:
            shutil.rmtree(profile, ignore_errors=True)


if __name__ == "__main__":
    main()
