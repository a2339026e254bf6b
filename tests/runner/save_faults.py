#!/usr/bin/env python3
"""Faults during a checkpoint save, on the CPU (label `runner`): a full
filesystem, a filesystem out of inodes, a file-size limit, and SIGKILL at a
random point of the save.

Usage: save_faults.py RUNNER SUPERVISOR SOURCE_DIR WORK_DIR TEST_NAME [TRIALS [SEED]]

  disk_full          checkpoint.dir on a 1 MiB tmpfs: the save fails before
                     its first byte with the figures; the estimate is checked
                     against the real checkpoint's size on a larger tmpfs
  disk_full_node     the node stage's sharded save on a 1 MiB tmpfs: rank 0
                     refuses for every rank
  disk_full_out      --out on a tmpfs without room for results.json's reserve
  disk_no_inodes     a tmpfs out of inodes: a writer thread's file cannot be
                     created (ENOSPC from open)
  disk_file_limit    RLIMIT_FSIZE: each tensor file stops half written (EFBIG)
  kill_save          TRIALS (default 8) runs under pilot-supervisor, each
                     runner SIGKILLed at a random point of its save; then
                     `pilot-runner verify` and a fresh-process restore on
                     every entry of the checkpoint folder

The tmpfs tests mount their filesystem in a private mount namespace
(`unshare -rm`, no privilege needed where user namespaces are allowed) and
exit 77 (skipped) where that is refused. bench/kill-save.sh runs kill_save
with more trials and prints the table of outcomes.
"""
import hashlib
import json
import os
import pwd
import random
import re
import resource
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from testlib import fresh_in, require, results  # noqa: E402

RUNNER, SUPERVISOR, SRC, WORK = (os.path.abspath(a) for a in sys.argv[1:5])

NAME = sys.argv[5]
CONFIG = os.path.join(SRC, "configs", "tiny-cpu.toml")
SHORT = ["--stage", "single", "--set", "training.steps=6", "--set", "checkpoint.at_step=3"]
SIZE = r"(\d+(?:\.\d)?) (bytes|kB|MB|GB)"
UNITS = {"bytes": 1, "kB": 1e3, "MB": 1e6, "GB": 1e9}


def fresh(name):
    return fresh_in(WORK, name)


def clean_env():
    e = dict(os.environ)
    for k in list(e):
        if k.startswith("PILOT_RUNNER_TEST_") or k in ("PYTORCH_ALLOC_CONF", "PILOT_ALLOC_CONF_APPLIED"):
            e.pop(k)
    return e


# The command runs with a fresh tmpfs of `options` mounted on `mount`; what
# the tmpfs held afterwards is copied to `copy` (the mount goes away with its
# namespace).
IN_TMPFS = r'''
mount -t tmpfs -o "$1" tmpfs "$2" || exit 99
m=$2; copy=$3; shift 3
"$@"; rc=$?
cp -a "$m/." "$copy/"
exit $rc
'''


def can_mount_tmpfs():
    d = fresh("probe-mount-" + NAME)
    p = subprocess.run(["unshare", "-rm", "sh", "-c", IN_TMPFS, "sh", "size=64k", d, d, "true"],
                       capture_output=True, text=True)
    return p.returncode == 0


def run_in_tmpfs(options, mount, copy, args, expect):
    os.makedirs(mount, exist_ok=True)
    os.makedirs(copy, exist_ok=True)
    p = subprocess.run(["unshare", "-rm", "sh", "-c", IN_TMPFS, "sh", options, mount, copy, RUNNER] + args,
                       capture_output=True, text=True, env=clean_env(), timeout=600)
    require(p.returncode != 99, f"tmpfs {options} could not be mounted: {p.stderr}")
    require(p.returncode == expect, f"{' '.join(args)}: exit {p.returncode}, expected {expect}\n{p.stderr}")
    return p


def entries(d):
    out = []
    for root, dirs, files in os.walk(d):
        for n in dirs + files:
            out.append(os.path.relpath(os.path.join(root, n), d))
    return sorted(out)


def parse_size(text, unit):
    return float(text) * UNITS[unit]


def skip_without_tmpfs():
    if not can_mount_tmpfs():
        print("skipped: no private tmpfs can be mounted here (unshare -rm)")
        sys.exit(77)


def failed_save(out, where):
    """The stage's failure record of a save that failed at step 3."""
    s = results(out)["stages"]["single"]
    f = s["failure"]
    require(s["status"] == "error" and f["kind"] == "error", f"a failure record: {s['status']} {f}")
    require(f["phase"] == "checkpoint" and f["step"] == 3, f"failed in the save at step 3: {f}")
    require(s["checkpoint"]["path"] == "", f"no checkpoint recorded: {s['checkpoint']}")
    require(where in f["message"], f"the message names {where}: {f['message']}")
    return f["message"]


def test_disk_full():
    skip_without_tmpfs()
    d = fresh("disk-full")
    mount, copy, out = (os.path.join(d, x) for x in ("mnt", "after", "out"))
    ckpt = os.path.join(mount, "ckpt")
    p = run_in_tmpfs("size=1m", mount, copy, ["run", "--config", CONFIG, "--out", out,
                                              "--set", f'checkpoint.dir="{ckpt}"'] + SHORT, expect=4)
    msg = failed_save(out, ckpt)
    m = re.fullmatch(f"checkpoint: needs {SIZE}, {SIZE} free on {re.escape(ckpt)} \\(checkpoint.dir\\)", msg)
    require(m, f"the message has the figures: {msg}")
    need, free = parse_size(m[1], m[2]), parse_size(m[3], m[4])
    require(900e3 <= free <= 1048576 and need > free, f"needs {need}, free {free} of a 1 MiB tmpfs")
    require("HINT: free " in p.stderr and "set checkpoint.dir to a directory" in p.stderr, p.stderr)
    require(entries(copy) == ["ckpt"], f"nothing left on the full filesystem: {entries(copy)}")

    # With room the same save goes through, and the estimate bounds what it
    # wrote: above the files' bytes, by less than the slack per file.
    d2 = fresh("disk-room")
    mount2, copy2, out2 = (os.path.join(d2, x) for x in ("mnt", "after", "out"))
    ckpt2 = os.path.join(mount2, "ckpt")
    run_in_tmpfs("size=64m", mount2, copy2, ["run", "--config", CONFIG, "--out", out2,
                                             "--set", f'checkpoint.dir="{ckpt2}"'] + SHORT, expect=0)
    s = results(out2)["stages"]["single"]
    require(s["status"] == "ok" and s["restore"]["equal"], f"the save and restore with room: {s['status']}")
    written = s["checkpoint"]["bytes"]
    require(abs(need - (written + (1 << 20) + 3 * (8 + 4096 + 65536))) < need * 0.05 + 60e3,
            f"estimate {need} for {written} bytes written")
    require(entries(os.path.join(copy2, "ckpt")) == sorted(
        ["step-000003"] + [f"step-000003/{n}" for n in ("COMPLETE", "manifest.json", "model.safetensors",
                                                       "optim-exp_avg.safetensors", "optim-exp_avg_sq.safetensors",
                                                       "state.json")]), "one committed checkpoint")


def test_disk_full_node():
    skip_without_tmpfs()
    d = fresh("disk-full-node")
    mount, copy, out = (os.path.join(d, x) for x in ("mnt", "after", "out"))
    ckpt = os.path.join(mount, "ckpt")
    run_in_tmpfs("size=1m", mount, copy, ["run", "--config", CONFIG, "--out", out, "--stage", "node",
                                          "--set", f'checkpoint.dir="{ckpt}"', "--set", "training.steps=6",
                                          "--set", "checkpoint.at_step=3"], expect=4)
    n = results(out)["stages"]["node"]
    f = n["failure"]
    root = os.path.join(ckpt, "node", "checkpoints")
    require(n["status"] == "error" and f["phase"] == "train", f"the node stage's failure: {n['status']} {f}")
    require(re.search(f"checkpoint: needs {SIZE}, {SIZE} free on {re.escape(root)} \\(checkpoint.dir\\)",
                      f["message"]), f"rank 0's figures: {f['message']}")
    left = [e for e in entries(copy) if ".step-" in e or "step-0" in e]
    require(left == [], f"no rank wrote: {entries(copy)}")


def test_disk_full_out():
    skip_without_tmpfs()
    d = fresh("disk-full-out")
    mount, copy = os.path.join(d, "mnt"), os.path.join(d, "after")
    out, ckpt = os.path.join(mount, "out"), os.path.join(d, "ckpt")
    # 4 MiB: the checkpoint has room elsewhere, results.json's reserve not.
    run_in_tmpfs("size=4m", mount, copy, ["run", "--config", CONFIG, "--out", out,
                                          "--set", f'checkpoint.dir="{ckpt}"'] + SHORT, expect=4)
    msg = failed_save(os.path.join(copy, "out"), out)
    require(re.fullmatch(f"checkpoint: needs {SIZE}, {SIZE} free on {re.escape(out)} \\(--out\\)", msg), msg)
    require(os.listdir(ckpt) == [], f"nothing written to checkpoint.dir: {os.listdir(ckpt)}")


def test_disk_no_inodes():
    skip_without_tmpfs()
    d = fresh("disk-inodes")
    mount, copy, out = (os.path.join(d, x) for x in ("mnt", "after", "out"))
    ckpt = os.path.join(mount, "ckpt")
    # The root, ckpt/ and the temp directory, and two of the three files.
    run_in_tmpfs("size=64m,nr_inodes=5", mount, copy, ["run", "--config", CONFIG, "--out", out,
                                                       "--set", f'checkpoint.dir="{ckpt}"'] + SHORT, expect=4)
    msg = failed_save(out, ".step-000003.tmp-")
    require("open: No space left on device" in msg, f"the writer's error: {msg}")
    require(entries(copy) == ["ckpt"], f"the temp directory removed: {entries(copy)}")


def test_disk_file_limit():
    d = fresh("disk-file-limit")
    out, ckpt = os.path.join(d, "out"), os.path.join(d, "ckpt")

    def limit():
        # Ignored, SIGXFSZ stays ignored across exec: write() returns EFBIG.
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (256 << 10, 256 << 10))

    p = subprocess.run([RUNNER, "run", "--config", CONFIG, "--out", out, "--set", f'checkpoint.dir="{ckpt}"']
                       + SHORT, capture_output=True, text=True, env=clean_env(), preexec_fn=limit, timeout=600)
    require(p.returncode == 4, f"exit {p.returncode}, expected 4\n{p.stderr}")
    msg = failed_save(out, ".safetensors")
    require("write: File too large" in msg, f"the writer's error: {msg}")
    require(os.listdir(ckpt) == [], f"the half-written temp directory removed: {os.listdir(ckpt)}")


# ---- SIGKILL during the save ------------------------------------------------

# A larger model than tiny-cpu's, so that a save lasts long enough to be hit
# anywhere: about 3.3M parameters, three files of 13 MB. Its steps are short
# (16 tokens, not 256): what a save writes depends on the parameters only, and
# each trial trains three runs (the pilot, verify's reading, the restore).
KILL_MODEL = {"layers": "4", "d_model": "256", "seq_len": "16", "micro_batch": "1"}
STEP = 3


def kill_config(path, ckpt):
    with open(CONFIG) as f:
        text = f.read()
    for key, value in KILL_MODEL.items():
        text = re.sub(rf"(?m)^{key} = .*$", f"{key} = {value}", text)
    text = re.sub(r"(?m)^steps = .*$", "steps = 6", text)
    text = re.sub(r"(?m)^at_step = .*$", f"at_step = {STEP}\ndir = \"{ckpt}\"", text)
    with open(path, "w") as f:
        f.write(text)


def write_lock(job_dir, config):
    """The lock the prolog would write for job 1 (core/records/lock.h's fields)."""
    with open(config, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    pw = pwd.getpwuid(os.getuid())
    lock = {
        "schema": "slurm-pilot/lock/1", "instance": "0123456789abcdef0123456789abcdef",
        "job": {"id": 1, "user": pw.pw_name, "uid": os.getuid(), "gid": os.getgid(), "nodes": 1,
                "submit_dir": job_dir},
        "config": {"path": config, "copy": config, "sha256_submitted": sha, "sha256_copied": sha},
        "seeds": {"training": 1234, "source": "config"},
        "container": {"reference": "", "digest": "", "method": "none"},
        "files": [], "versions": {}, "gpus": [], "problems": [], "created": "2026-12-01T00:00:00Z",
    }
    with open(os.path.join(job_dir, "lock.json"), "w") as f:
        json.dump(lock, f)


def start_pilot(d):
    """pilot-supervisor of job 1 in state directory d, stage single."""
    job = os.path.join(d, "state", "jobs", "1")
    os.makedirs(os.path.join(job, "work"))
    ckpt = os.path.join(d, "ckpt")
    config = os.path.join(job, "config.toml")
    kill_config(config, ckpt)
    write_lock(job, config)
    log = open(os.path.join(d, "supervisor.log"), "w")
    p = subprocess.Popen([SUPERVISOR, "--job", "1", "--uid", str(os.getuid()), "--gid", str(os.getgid()),
                          "--state-dir", os.path.join(d, "state"), "--runner", RUNNER, "--stage", "single"],
                         stdout=log, stderr=subprocess.STDOUT, env=clean_env())
    return p, ckpt, config, os.path.join(job, "results.json")


def watch_save(ckpt, p, deadline=300):
    """Waits for the temp directory of the save; (its name, the time seen)."""
    t_end = time.monotonic() + deadline
    while time.monotonic() < t_end and p.poll() is None:
        try:
            for n in os.listdir(ckpt):
                if n.startswith(f".step-{STEP:06d}.tmp-"):
                    return n, time.monotonic()
        except FileNotFoundError:
            pass
        time.sleep(0.0005)
    return None, None


def calibrate(d):
    """One run of the same model without a kill (the runner alone, its own
    restore included): how long its save takes (temp dir seen to COMPLETE
    seen), and its final parameters, the reference a restore is compared
    with."""
    ckpt, config, out = os.path.join(d, "ckpt"), os.path.join(d, "config.toml"), os.path.join(d, "out")
    kill_config(config, ckpt)
    log = open(os.path.join(d, "runner.log"), "w")
    p = subprocess.Popen([RUNNER, "run", "--config", config, "--out", out, "--stage", "single", "--keep-reference"],
                         stdout=log, stderr=subprocess.STDOUT, env=clean_env())
    name, t0 = watch_save(ckpt, p)
    require(name, "the save's temp directory was seen")
    done = os.path.join(ckpt, f"step-{STEP:06d}", "COMPLETE")
    while not os.path.exists(done) and p.poll() is None:
        time.sleep(0.0005)
    t1 = time.monotonic()
    require(p.wait(timeout=600) == 0, f"the run without a kill passed: {open(d + '/runner.log').read()}")
    return t1 - t0, os.path.join(out, "reference-final.safetensors")


def classify(ckpt):
    """Where the save was when the runner died, from what it left."""
    names = sorted(os.listdir(ckpt))
    final = os.path.join(ckpt, f"step-{STEP:06d}")
    if os.path.exists(os.path.join(final, "COMPLETE")):
        return "after COMPLETE", names
    if os.path.isdir(final):
        return "renamed, before COMPLETE", names
    temps = [n for n in names if n.startswith(".step-")]
    if not temps:
        return "before the temp dir", names
    inside = os.listdir(os.path.join(ckpt, temps[0]))
    if "manifest.json" in inside:
        return "temp dir: manifest written, before the rename", names
    if "state.json" in inside:
        return "temp dir: tensor files written, before the manifest", names
    if inside:
        return "temp dir: writing the tensor files", names
    return "temp dir: empty", names


def use_checkpoint(entry, config, reference):
    """What the product runs on a checkpoint: verify (the epilog's), and a
    fresh-process restore to the last step compared with the reference
    parameters (the supervisor's restore phase). Returns (verify exit,
    restore exit, restore stderr, max |param diff| or None)."""
    out = fresh("kill-save-restore")
    v = subprocess.run([RUNNER, "verify", "--checkpoint", entry, "--config", config, "--json"],
                       capture_output=True, text=True, env=clean_env(), timeout=600)
    r = subprocess.run([RUNNER, "run", "--config", config, "--out", out, "--resume-from", entry,
                        "--reference", reference], capture_output=True, text=True, env=clean_env(), timeout=600)
    diff = None
    if r.returncode == 0:
        with open(os.path.join(out, "resume.json")) as f:
            diff = json.load(f)["stages"]["single"]["restore"]["max_abs_param_diff"]
    return v.returncode, r.returncode, r.stderr, diff


def kill_trial(i, rng, window, reference, table):
    d = fresh(f"kill-save-{i}")
    p, ckpt, config, res = start_pilot(d)
    name, seen = watch_save(ckpt, p)
    delay = rng.uniform(0, window)
    if name is None:
        p.wait()
        require(False, f"trial {i}: the save was never seen: {open(d + '/supervisor.log').read()}")
    runner_pid = int(name.rsplit("-", 1)[1])  # the temp dir is named after its writer
    time.sleep(max(0.0, seen + delay - time.monotonic()))
    try:
        os.kill(runner_pid, signal.SIGKILL)
    except ProcessLookupError:
        pass  # it had finished
    rc = p.wait(timeout=600)
    point, names = classify(ckpt)  # the runner is gone: the supervisor reaped it
    # The supervisor's record: the runner ended by SIGKILL, no report, no
    # checkpoint named (the epilog then has none to verify). A runner that
    # finished before the kill (or was already exiting) passes.
    r = json.load(open(res))
    proc = r["supervisor"]["processes"][0]
    killed = proc["signal"] == 9
    if not killed:
        require(rc == 0 and proc["exit_code"] == 0, f"trial {i}: a pilot not killed passes: {rc} {proc}")
    else:
        require(rc != 0 and r["exit_code"] != 0, f"trial {i}: a killed pilot does not pass: {rc}")
        require(proc["signal"] == 9 and "killed by signal 9" in proc["report_problem"],
                f"trial {i}: the record names the kill: {proc}")
        require(r["stages"].get("single") is None, f"trial {i}: no stage results from a killed runner")
    uses = []
    for n in names:
        entry = os.path.join(ckpt, n)
        complete = os.path.exists(os.path.join(entry, "COMPLETE"))
        v, rs, err, diff = use_checkpoint(entry, config, reference)
        kind = "committed step" if complete else ("temp dir" if n.startswith(".") else "step dir without COMPLETE")
        if complete:
            require(v == 0 and rs == 0 and diff == 0,
                    f"trial {i}: a committed checkpoint verifies ({v}) and restores ({rs}, diff {diff}): {err[-400:]}")
        else:
            require(v != 0, f"trial {i}: verify refused {n} (exit {v})")
            require(rs == 2 and "no COMPLETE marker" in err,
                    f"trial {i}: the restore refused {n} (exit {rs}): {err[-400:]}")
        uses.append(f"{kind}: verify {'ok' if v == 0 else 'FAILED'} ({v}), restore "
                    f"{'ok' if rs == 0 else 'refused'} ({rs})")
    row = (point if killed else "after the run (not killed)", "; ".join(uses) or "no entry")
    table[row] = table.get(row, 0) + 1
    print(f"trial {i}: kill {delay * 1000:.1f} ms after the temp dir appeared: {point}: {names}: "
          f"{'; '.join(uses)}", flush=True)
    shutil.rmtree(d, ignore_errors=True)


def test_kill_save():
    trials = int(sys.argv[6]) if len(sys.argv) > 6 else 8
    seed = int(sys.argv[7]) if len(sys.argv) > 7 else random.SystemRandom().randrange(1 << 31)
    print(f"kill_save: seed {seed} (repeat with: save_faults.py ... kill_save {trials} {seed})", flush=True)
    rng = random.Random(seed)
    # The median of three saves: one alone is easily slowed by other work on
    # the machine, and kills then land mostly after the commit.
    runs = [calibrate(fresh(f"kill-save-calibrate-{k}")) for k in range(3)]
    save_s, reference = sorted(r[0] for r in runs)[1], runs[0][1]
    window = save_s * 1.25  # a quarter past the commit as well
    print(f"kill_save: saves took {', '.join(f'{r[0] * 1000:.1f}' for r in runs)} ms; kills land "
          f"0..{window * 1000:.1f} ms after the temp dir appears", flush=True)
    table = {}
    for i in range(trials):
        kill_trial(i, rng, window, reference, table)
    print("\n| the kill landed | what the checkpoint folder held: verify, restore | trials |")
    print("|---|---|---:|")
    for (point, uses), n in sorted(table.items()):
        print(f"| {point} | {uses} | {n} |")
    print(f"\nkill_save: {trials} trials, seed {seed}: no partial checkpoint was verified or restored")


if __name__ == "__main__":
    os.makedirs(WORK, exist_ok=True)
    globals()["test_" + NAME]()
    print(f"ok: {NAME}")
