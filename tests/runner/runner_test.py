#!/usr/bin/env python3
"""pilot-runner on the CPU (label `runner`): the full single-stage cycle of
configs/tiny-cpu.toml, the restore comparison (and that it can fail), the
memory calibration steps, --trace, verify on good and damaged checkpoints, pinned
token files, exit statuses, model.ffn_mult.

Usage: runner_test.py RUNNER SOURCE_DIR WORK_DIR TEST_NAME
Each TEST_NAME is one CTest test; "cycle" leaves WORK_DIR/cycle for the
verify tests (a CTest fixture).
"""
import hashlib
import json
import os
import re
import signal
import shutil
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from testlib import fresh_in, require, results  # noqa: E402

RUNNER, SRC, WORK, NAME = sys.argv[1:5]
CONFIG = os.path.join(SRC, "configs", "tiny-cpu.toml")
READER = os.path.join(SRC, "tests", "runner", "read_safetensors.py")


def fresh(name):
    return fresh_in(WORK, name)


def run(args, env=None, expect=None):
    e = dict(os.environ)
    for k in ("PILOT_RUNNER_TEST_SKIP_RESTORE", "PILOT_ALLOC_CONF_APPLIED", "PYTORCH_ALLOC_CONF",
              "PYTORCH_CUDA_ALLOC_CONF"):
        e.pop(k, None)
    e.update(env or {})
    p = subprocess.run([RUNNER] + args, capture_output=True, text=True, env=e, timeout=600)
    if expect is not None and p.returncode != expect:
        sys.exit(f"FAIL: {' '.join(args)}: exit {p.returncode}, expected {expect}\n"
                 f"stdout:\n{p.stdout}\nstderr:\n{p.stderr}")
    return p


def checkpoint_dir(out):
    return os.path.join(out, "checkpoints", "step-000006")


def test_cycle():
    out = fresh("cycle")
    p = run(["run", "--config", CONFIG, "--out", out], expect=0)
    require("pilot: single step 12/12 loss" in p.stderr, "progress lines")
    r = results(out)
    require(r["schema"] == "slurm-pilot/results/1" and r["exit_code"] == 0, "schema and exit code")
    require(r["alloc_conf"] == "expandable_segments:True", f"default allocator settings: {r['alloc_conf']}")
    s = r["stages"]["single"]
    require(s["status"] == "ok" and s["device"] == "cpu", "status ok on cpu")
    require(len(s["losses"]) == 12 and all(isinstance(x, float) for x in s["losses"]), "12 losses")
    rs = s["restore"]
    require(rs["ran"] and rs["equal"] and rs["mode"] == "bitwise", f"restore equal: {rs}")
    require(rs["max_abs_loss_diff"] == 0 and rs["max_abs_param_diff"] == 0, "bitwise diffs are 0")
    require(rs["from_step"] == 6 and rs["to_step"] == 12 and len(rs["resumed_losses"]) == 6, "steps 7..12")
    require(rs["resumed_losses"] == s["losses"][6:], "resumed losses equal the reference's")
    for key in ("memory", "memory_first_step", "memory_resumed"):
        m = s[key]
        require(m["process_peak_rss_bytes"] > 0 and m["process_rss_bytes"] > 0, f"{key}: rss")
        require(m["peak_allocated_bytes"] is None, f"{key}: no allocator peak on a CPU")
    ck = s["checkpoint"]
    require(ck["path"] == checkpoint_dir(out) and ck["step"] == 6, "checkpoint path")
    require(ck["bytes"] > 0 and ck["save_seconds"] > 0 and ck["load_seconds"] > 0, "checkpoint timings")
    t = s["timings"]
    require(t["step_ms"] > 0 and t["forward_backward_ms"] > 0 and t["optimizer_ms"] > 0, "timings")
    require(s["tokens_per_second"] > 0 and s["shape"]["binding"], "throughput and binding shape")
    names = sorted(os.listdir(checkpoint_dir(out)))
    require(names == ["COMPLETE", "manifest.json", "model.safetensors", "optim-exp_avg.safetensors",
                      "optim-exp_avg_sq.safetensors", "state.json"], f"checkpoint files {names}")
    with open(os.path.join(checkpoint_dir(out), "manifest.json")) as f:
        man = json.load(f)
    for entry in man["files"]:
        with open(os.path.join(checkpoint_dir(out), entry["name"]), "rb") as f:
            data = f.read()
        require(hashlib.sha256(data).hexdigest() == entry["sha256"], f"sha256 of {entry['name']}")
        require(len(data) == entry["bytes"], f"size of {entry['name']}")
    check_calibration(s, micro_batch=2, checkpointing=False)
    with open(os.path.join(out, "metrics.jsonl")) as f:
        lines = [json.loads(x) for x in f]
    require(sum(1 for x in lines if x["process"] == "reference") == 12, "12 reference metric lines")
    require(sum(1 for x in lines if x["process"] == "resumed") == 6, "6 resumed metric lines")
    require(not os.path.exists(os.path.join(out, "reference-final.safetensors")), "reference removed")


def check_calibration(s, micro_batch, checkpointing, member="memory_calibration"):
    """The memory calibration on a CPU: half the micro-batch, 2 steps from the
    checkpoint (step 6), the last measured; only the resident set exists."""
    c = s[member]
    require(c["status"] == "ok", f"memory calibration ran: {c}")
    require(c["micro_batch"] == micro_batch and c["seq_len"] == s["shape"]["seq_len"],
            f"calibration shape: {c}")
    require(c["activation_checkpointing"] is checkpointing, f"calibration checkpointing: {c}")
    require(c["steps"] == 2 and c["step"] == 8, f"calibration steps 7..8: {c}")
    require(c["peak_allocated_bytes"] is None and c["peak_reserved_bytes"] is None
            and c["device_used_bytes"] is None, f"no allocator figures on a CPU: {c}")
    rss = c["process_peak_rss_bytes"]
    require(isinstance(rss, int) and 0 < rss <= 64 << 30, f"a sane resident set: {c}")
    # The step after the first is timed: the step-time model's second point.
    fb = c["forward_backward_ms"]
    require(isinstance(fb, float) and 0 < fb < s["timings"]["forward_backward_ms"] * 10,
            f"calibration forward/backward timed: {c}")
    require("resident set" in c["detail"] and "does not use" in c["detail"], f"CPU figure named: {c}")


def test_memory_calibration():
    # With activation checkpointing the calibration runs with it on; the
    # later checks and the restore still work.
    out = fresh("calibration-ac")
    run(["run", "--config", CONFIG, "--out", out, "--set", "training.activation_checkpointing=true",
         "--set", "training.recompute_check_steps=2", "--overhead-steps", "2"], expect=0)
    s = results(out)["stages"]["single"]
    check_calibration(s, micro_batch=2, checkpointing=True)
    # The other setting's second point, after the recompute check measured it.
    check_calibration(s, micro_batch=2, checkpointing=False, member="memory_calibration_other")
    require(s["recompute_check"]["ran"] and s["instrumentation"]["ran"], "checks ran")
    require(s["recompute_check"]["measured"] == "without", str(s["recompute_check"]))
    require(s["restore"]["equal"], "restore equal")
    # Micro-batch 1 at the pilot's setting: the step-time model's third point.
    check_calibration(s, micro_batch=1, checkpointing=True, member="memory_calibration_smallest")
    # Micro-batch 1: no smaller one at the same seq_len.
    out = fresh("calibration-mb1")
    run(["run", "--config", CONFIG, "--out", out, "--set", "run.micro_batch=1"], expect=0)
    c = results(out)["stages"]["single"]["memory_calibration"]
    require(c["status"] == "skipped" and c["steps"] == 0 and "micro_batch is 1" in c["detail"], str(c))
    require(c["process_peak_rss_bytes"] is None, str(c))
    require(results(out)["stages"]["single"]["memory_calibration_smallest"] is None, "nothing below 1")
    # Without checkpointing the recompute check runs steps with it.
    out = fresh("calibration-off")
    run(["run", "--config", CONFIG, "--out", out, "--set", "training.memory_calibration_steps=0",
         "--set", "training.recompute_check_steps=3"], expect=0)
    s = results(out)["stages"]["single"]
    c = s["memory_calibration"]
    require(c["status"] == "skipped" and c["detail"] == "no steps asked for", str(c))
    o = s["memory_calibration_other"]
    require(o["status"] == "skipped" and o["activation_checkpointing"] is True, str(o))
    require(s["memory_calibration_smallest"] is None, "no smallest without the calibration")
    rc = s["recompute_check"]
    require(rc["ran"] and rc["measured"] == "with" and rc["fits_without"] and rc["steps"] == 3, str(rc))
    require(rc["step_ms_with"] > 0 and rc["step_ms_without"] == s["timings"]["step_ms"], str(rc))
    require(rc["peak_bytes_with"] > 0 and rc["peak_bytes_without"] > 0, str(rc))
    require(rc["peak_reserved_bytes"] is None, "no allocator on a CPU")
    require(s["restore"]["equal"], "restore equal after the check")


def skip_if_sanitized(why):
    if os.environ.get("PILOT_TEST_SANITIZED") == "1":
        print(f"skip: {NAME}: {why}")
        sys.exit(77)


def test_fatal_signal():
    # A runner that dies of a fatal signal says which, with its stack, and
    # still dies of it (the supervisor sees the signal).
    skip_if_sanitized("the sanitizer reports fatal signals itself, in place of the runner's report")
    out = fresh("fatal-signal")
    e = dict(os.environ)
    e.pop("PILOT_ALLOC_CONF_APPLIED", None)
    p = subprocess.Popen([RUNNER, "run", "--config", CONFIG, "--out", out, "--set", "training.steps=400",
                          "--set", "checkpoint.at_step=399"], stderr=subprocess.PIPE, text=True, env=e)
    deadline = time.time() + 120
    while time.time() < deadline and not os.path.exists(os.path.join(out, "metrics.jsonl")):
        time.sleep(0.2)
    time.sleep(1)
    require(p.poll() is None, "the runner is still training when signalled")
    os.kill(p.pid, signal.SIGSEGV)
    _, err = p.communicate(timeout=60)
    require(p.returncode == -signal.SIGSEGV, f"died of SIGSEGV: exit {p.returncode}\n{err[-2000:]}")
    require(re.search(r"pilot: runner: fatal signal SIGSEGV \(segmentation fault\) at address 0x[0-9a-f]+; "
                      r"instruction 0x[0-9a-f]+ in \S+ \+0x[0-9a-f]+.*; stack:\n", err), err[-2000:])
    frames = err.split("; stack:\n", 1)[1].strip().splitlines()
    require(len(frames) >= 3, f"a stack of frames: {frames}")


def test_skip_optimizer():
    out = fresh("skip-optimizer")
    run(["run", "--config", CONFIG, "--out", out], env={"PILOT_RUNNER_TEST_SKIP_RESTORE": "optimizer"},
        expect=1)
    rs = results(out)["stages"]["single"]["restore"]
    require(rs["ran"] and not rs["equal"] and rs["skipped"] == "optimizer", f"unequal: {rs}")
    require(rs["max_abs_loss_diff"] > 0, "losses differ")


def test_skip_data():
    out = fresh("skip-data")
    run(["run", "--config", CONFIG, "--out", out], env={"PILOT_RUNNER_TEST_SKIP_RESTORE": "data"},
        expect=1)
    rs = results(out)["stages"]["single"]["restore"]
    require(not rs["equal"] and rs["skipped"] == "data", f"unequal: {rs}")


def test_verify_ok():
    ck = checkpoint_dir(os.path.join(WORK, "cycle"))
    res = os.path.join(WORK, "cycle", "results.json")
    p = run(["verify", "--checkpoint", ck, "--config", CONFIG, "--expect", res], expect=0)
    require("VERIFIED" in p.stdout, "human output")
    p = run(["verify", "--checkpoint", ck, "--config", CONFIG, "--json"], expect=0)
    rep = json.loads(p.stdout)
    require(rep["schema"] == "slurm-pilot/verify/1" and rep["ran"] and rep["manifest_ok"], "report")
    require(rep["params"] == rep["params_with_optimizer_state"] == 28, "28 parameters with state")
    require(rep["eval_recomputed"] and rep["eval_within"] and rep["step"] == 6, "eval recomputed")


def damaged_copy(name):
    src = checkpoint_dir(os.path.join(WORK, "cycle"))
    dst = os.path.join(fresh(name), "step-000006")
    shutil.copytree(src, dst)
    return dst


def test_verify_corrupt_byte():
    ck = damaged_copy("corrupt")
    path = os.path.join(ck, "model.safetensors")
    with open(path, "r+b") as f:
        f.seek(os.path.getsize(path) - 3)
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 0x40]))
    p = run(["verify", "--checkpoint", ck, "--config", CONFIG, "--json"], expect=1)
    require("manifest" in p.stderr and "model.safetensors" in p.stderr, f"names the file: {p.stderr}")
    require(not json.loads(p.stdout)["manifest_ok"], "manifest_ok false")


def test_verify_missing_optimizer():
    ck = damaged_copy("missing")
    os.remove(os.path.join(ck, "optim-exp_avg.safetensors"))
    p = run(["verify", "--checkpoint", ck, "--config", CONFIG], expect=1)
    require("optim-exp_avg.safetensors" in p.stderr, f"names the file: {p.stderr}")
    require("FAILED" in p.stdout, "says FAILED")


def test_verify_sparse_wrong_size():
    # A 1 TiB sparse file where the manifest lists a small one: refused by its
    # size at once, never read (hashing it would outlast any epilog).
    ck = damaged_copy("sparse")
    path = os.path.join(ck, "optim-exp_avg.safetensors")
    with open(path, "r+b") as f:
        f.truncate(1 << 40)
    t0 = time.monotonic()
    p = run(["verify", "--checkpoint", ck, "--config", CONFIG, "--json"], expect=1)
    took = time.monotonic() - t0
    require(took < 30, f"verify took {took:.1f} s on a sparse file")
    require(f"{1 << 40} bytes, manifest says" in p.stderr, f"names the size: {p.stderr}")
    require(not json.loads(p.stdout)["manifest_ok"], "manifest_ok false")
    shutil.rmtree(os.path.dirname(ck))


def test_verify_usage():
    run(["verify", "--checkpoint", os.path.join(WORK, "nowhere"), "--config", CONFIG], expect=2)
    run(["verify", "--config", CONFIG], expect=2)


def token_file(name, n=40000, vocab=512):
    d = fresh(name)
    path = os.path.join(d, "tokens.u16")
    with open(path, "wb") as f:
        f.write(struct.pack(f"<{n}H", *[(i * 7919 + i // 13) % vocab for i in range(n)]))
    with open(path, "rb") as f:
        return d, path, hashlib.sha256(f.read()).hexdigest()


def test_token_file():
    d, path, sha = token_file("tokens")
    out = os.path.join(d, "out")
    run(["run", "--config", CONFIG, "--out", out, "--set", 'data.format="u16"',
         "--set", f'data.train="{path}"', "--set", f'data.train_sha256="{sha}"'], expect=0)
    s = results(out)["stages"]["single"]
    require(s["restore"]["equal"], "restore equal with token files")
    check_calibration(s, micro_batch=2, checkpointing=False)  # the mapped file, shared


def test_token_sha_mismatch():
    d, path, sha = token_file("tokens-bad")
    wrong = ("0" if sha[0] != "0" else "1") + sha[1:]
    p = run(["run", "--config", CONFIG, "--out", os.path.join(d, "out"), "--set", 'data.format="u16"',
             "--set", f'data.train="{path}"', "--set", f'data.train_sha256="{wrong}"'], expect=2)
    require(path in p.stderr and "sha256" in p.stderr, f"error names the file: {p.stderr}")


def test_safetensors_reader():
    ck = checkpoint_dir(os.path.join(WORK, "cycle"))
    files = [os.path.join(ck, n) for n in sorted(os.listdir(ck)) if n.endswith(".safetensors")]
    p = subprocess.run([sys.executable, READER] + files, capture_output=True, text=True)
    require(p.returncode == 0 and p.stdout.count(": ok") == 3, p.stdout)
    bad = os.path.join(fresh("reader"), "bad.safetensors")
    with open(files[0], "rb") as f:
        data = f.read()
    with open(bad, "wb") as f:
        f.write(data[:-4])  # truncated: offsets no longer tile the data
    p = subprocess.run([sys.executable, READER, bad], capture_output=True, text=True)
    require(p.returncode == 1, "the reader rejects a truncated file")


def test_cli():
    p = run(["run", "--config", CONFIG, "--out", fresh("node"), "--stage", "node", "--nproc", "3"], expect=2)
    require("3 processes do not divide parallel.nproc = 2" in p.stderr, p.stderr)
    run(["run", "--config", CONFIG, "--out", fresh("nproc"), "--nproc", "-1"], expect=2)
    p = run(["run", "--config", CONFIG, "--out", fresh("typo"), "--overhead-step", "3"], expect=2)
    require("did you mean --overhead-steps" in p.stderr, p.stderr)
    run(["rnu"], expect=2)
    p = run(["--versions", "--json"], expect=0)
    require(json.loads(p.stdout)["libtorch"], "versions json")
    out = fresh("badcfg")
    p = run(["run", "--config", CONFIG, "--out", out, "--set", "training.steps=0"], expect=2)
    require("training.steps" in p.stderr, p.stderr)
    require(results(out)["exit_code"] == 2, "results.json records the exit status")


def test_cpu_oom():
    # A real out-of-memory: the process's address space is capped (as a job's
    # memory limit would) and the micro-batch needs more. It is a result
    # (exit 3, failure recorded), not a crash.
    skip_if_sanitized("AddressSanitizer cannot reserve its shadow memory under RLIMIT_AS")
    import resource
    out = fresh("oom")
    cap = 3 << 30

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    p = subprocess.run([RUNNER, "run", "--config", CONFIG, "--out", out, "--stage", "single",
                        "--set", "run.micro_batch=16384", "--set", "training.micro_batch=16384"],
                       capture_output=True, text=True, timeout=600, preexec_fn=limit)
    require(p.returncode == 3, f"exit {p.returncode}, expected 3 (out of memory)\n{p.stderr}")
    require("out of memory at step 1" in p.stderr, p.stderr)
    s = results(out)["stages"]["single"]
    require(s["status"] == "oom", f"status {s['status']}")
    require(s["failure"]["kind"] == "oom" and s["failure"]["step"] == 1, str(s["failure"]))
    require(s["failure"]["memory"]["process_peak_rss_bytes"] > 0, "memory at failure recorded")


def test_alloc_conf():
    # training.alloc_conf reaches the environment of the runner and of the
    # fresh restore process (results.json and resume.json record what each
    # ran with); "" keeps the environment's; a typo is a config error.
    short = ["--set", "training.steps=4", "--set", "checkpoint.at_step=2"]
    out = fresh("alloc_conf_set")
    run(["run", "--config", CONFIG, "--out", out, "--set", 'training.alloc_conf="max_split_size_mb:256"']
        + short, expect=0)
    require(results(out)["alloc_conf"] == "max_split_size_mb:256", "configured settings recorded")
    resume = os.path.join(out, "resume.json")
    if os.path.exists(resume):
        with open(resume) as f:
            require(json.load(f)["alloc_conf"] == "max_split_size_mb:256", "the fresh process inherits them")
    out = fresh("alloc_conf_env")
    run(["run", "--config", CONFIG, "--out", out, "--set", 'training.alloc_conf=""'] + short,
        env={"PYTORCH_ALLOC_CONF": "max_split_size_mb:512"}, expect=0)
    require(results(out)["alloc_conf"] == "max_split_size_mb:512", "environment's settings kept")
    out = fresh("alloc_conf_bad")
    p = run(["run", "--config", CONFIG, "--out", out, "--set", 'training.alloc_conf="expandable_segment:True"'],
            expect=2)
    require("training.alloc_conf" in p.stderr and 'unknown allocator setting "expandable_segment"' in p.stderr,
            p.stderr)


def test_fused_loss():
    # training.fused_loss (on by default) against the unfused loss, same seed
    # and data: the first step's loss agrees to float32 rounding in fp32 and
    # bf16 (both read the same logits), later steps to the rounding of the
    # logits' gradient; results.json records which ran; restores stay bitwise.
    short = ["--set", "training.steps=6", "--set", "checkpoint.at_step=3"]
    losses = {}
    for prec in ("fp32", "bf16"):
        for fused in (True, False):
            out = fresh(f"fused_loss_{prec}_{fused}")
            run(["run", "--config", CONFIG, "--out", out, "--set", f'training.precision="{prec}"',
                 "--set", f"training.fused_loss={str(fused).lower()}"] + short, expect=0)
            s = results(out)["stages"]["single"]
            require(s["shape"]["fused_loss"] is fused, f"{prec} fused={fused}: shape {s['shape']}")
            require(s["restore"]["equal"] and s["restore"]["max_abs_loss_diff"] == 0,
                    f"{prec} fused={fused}: restore {s['restore']}")
            losses[prec, fused] = s["losses"], s["grad_norms"]
    for prec, tol in (("fp32", 1e-5), ("bf16", 1e-3)):
        for i, what in enumerate(("loss", "gradient norm")):
            a, b = losses[prec, True][i], losses[prec, False][i]
            require(len(a) == len(b) == 6, f"{prec}: 6 of each")
            require(abs(a[0] - b[0]) <= 1e-5 * abs(b[0]), f"{prec}: first {what} {a[0]} vs {b[0]}")
            worst = max(abs(x - y) / abs(y) for x, y in zip(a, b))
            require(worst <= tol, f"{prec}: {what} fused {a} vs unfused {b} (worst relative {worst:.2e})")
            print(f"{prec}: worst relative {what} difference {worst:.2e}")


def test_trace():
    # --trace writes a Chrome trace of a few steady steps, or says plainly
    # that this libtorch cannot (no Kineto); either way the pilot completes
    # and its figures do not include the traced steps.
    out = fresh("trace")
    trace = os.path.join(out, "trace.json")
    bad = run(["run", "--config", CONFIG, "--out", out, "--trace", trace, "--trace-steps", "0"], expect=2)
    require("pilot: run: --trace-steps: must be between 1 and 100" in bad.stderr, bad.stderr)
    p = run(["run", "--config", CONFIG, "--out", out, "--trace", trace, "--trace-steps", "2"], expect=0)
    s = results(out)["stages"]["single"]
    require(s["status"] == "ok" and s["restore"]["equal"], "pilot complete")
    require(len(s["losses"]) == 12, "the traced steps are not in the losses")
    if os.path.exists(trace):
        with open(trace) as f:
            events = json.load(f)["traceEvents"]
        require(any(e.get("ph") == "X" for e in events), "trace has timed events")
        require("trace of 2 steps written" in p.stderr, p.stderr[-1500:])
    else:
        require("pilot: trace: " in p.stderr, f"no trace and no reason\n{p.stderr[-1500:]}")


def test_ffn_mult():
    # model.ffn_mult sets a gpt model's MLP width (round(ffn_mult * d_model),
    # pilot.toml(5)); the default 4 keeps the 4 * d_model MLP. Each block has
    # two (F, C)-sized matrices and an F-sized bias, so the parameter count
    # moves by layers * (2 C + 1) * (F - 4 C).
    short = ["--stage", "single", "--set", "training.steps=4", "--set", "checkpoint.at_step=2"]
    params = {}
    for mult in ("4.0", "2.5"):
        out = fresh(f"ffn_mult_{mult}")
        run(["run", "--config", CONFIG, "--out", out, "--set", f"model.ffn_mult={mult}"] + short, expect=0)
        s = results(out)["stages"]["single"]
        require(s["restore"]["equal"], f"ffn_mult {mult}: restore {s['restore']}")
        params[mult] = s["shape"]["params"]
    layers, c = 2, 64  # configs/tiny-cpu.toml
    expect = layers * (2 * c + 1) * (round(2.5 * c) - 4 * c)
    require(params["2.5"] - params["4.0"] == expect, f"params {params}, expected a difference of {expect}")


# A sharded run whose whole state does not fit one process (the cap stands
# for a GPU's memory): the single stage runs the layers that fit, the
# checkpoint records that depth, the fresh process and verify build it.
DEEP = ["--set", 'parallel.mode="sharded"', "--set", "model.layers=8", "--set", "model.d_model=256"]


def test_reduced_depth():
    out = fresh("reduced-depth")
    cap = ["--set", "training.memory_cap_mb=1200"]
    run(["run", "--config", CONFIG, "--out", out, "--stage", "single"] + cap + DEEP, expect=0)
    s = results(out)["stages"]["single"]
    r = s["reduced_depth"]
    require(r is not None and r["full_layers"] == 8 and 1 <= r["layers"] < 8, f"reduced depth: {r}")
    require(r["capacity_bytes"] == 1200 << 20, f"capacity is the cap on a CPU: {r}")
    require(abs(r["limit_bytes"] - 0.9 * (1200 << 20)) <= 1, f"default headroom 10%: {r}")
    require(r["predicted_full_bytes"] > r["limit_bytes"] >= r["predicted_bytes"], f"prediction: {r}")
    require(r["full_params"] > s["shape"]["params"] > 0, f"the stage ran the smaller model: {r} {s['shape']}")
    require("does not fit one process" in r["detail"], r["detail"])
    require(s["status"] == "ok" and s["restore"]["ran"] and s["restore"]["equal"], "restore at that depth")
    ck = checkpoint_dir(out)
    with open(os.path.join(ck, "state.json")) as f:
        state = json.load(f)
    require(state["model"]["layers"] == r["layers"], f"state.json records the depth: {state['model']}")
    p = run(["verify", "--checkpoint", ck, "--config", CONFIG, "--json"] + cap + DEEP, expect=0)
    rep = json.loads(p.stdout)
    require(rep["eval_recomputed"] and rep["eval_within"], f"verify builds the saved depth: {rep}")
    # A stricter site headroom leaves no more layers; another mode runs the
    # config's depth whatever the cap.
    short = ["--set", "training.steps=4", "--set", "checkpoint.at_step=2"]
    out2 = fresh("reduced-depth-headroom")
    run(["run", "--config", CONFIG, "--out", out2, "--stage", "single", "--memory-headroom", "0.12"]
        + cap + short + DEEP, expect=0)
    r2 = results(out2)["stages"]["single"]["reduced_depth"]
    require(r2["layers"] <= r["layers"] and abs(r2["limit_bytes"] - 0.88 * (1200 << 20)) <= 1, str(r2))
    out3 = fresh("full-depth")
    run(["run", "--config", CONFIG, "--out", out3, "--stage", "single", "--set",
         "training.memory_cap_mb=1"] + short, expect=0)
    require(results(out3)["stages"]["single"]["reduced_depth"] is None, "ddp: the config's depth")
    run(["run", "--config", CONFIG, "--out", fresh("bad-headroom"), "--memory-headroom", "1.5"], expect=2)


if __name__ == "__main__":
    os.makedirs(WORK, exist_ok=True)
    globals()["test_" + NAME]()
    print(f"ok: {NAME}")
