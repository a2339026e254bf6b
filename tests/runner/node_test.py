#!/usr/bin/env python3
"""pilot-runner's node stage on the CPU (label `runner`): two local processes
over Gloo in DDP and sharded mode, losses against one process with the same
global batch, restores at the same and at another world size (and that the
comparison can fail), a rank that dies, and two processes standing in for two
nodes of an srun step.

Usage: node_test.py RUNNER SOURCE_DIR WORK_DIR TEST_NAME
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import time

RUNNER, SRC, WORK, NAME = sys.argv[1:5]
CONFIG = os.path.join(SRC, "configs", "tiny-cpu.toml")
TOL = 1e-5  # float32 sums in another order


def clean_env(extra=None):
    e = {k: v for k, v in os.environ.items()
         if not k.startswith("SLURM_") and not k.startswith("PILOT_")}
    e.update(extra or {})
    return e


def run(args, env=None, expect=None, timeout=600):
    p = subprocess.run([RUNNER] + args, capture_output=True, text=True, env=clean_env(env),
                       timeout=timeout)
    if expect is not None and p.returncode != expect:
        sys.exit(f"FAIL: {' '.join(args)}: exit {p.returncode}, expected {expect}\n"
                 f"stderr:\n{p.stderr}")
    return p


def fresh(name):
    d = os.path.join(WORK, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    return d


def require(cond, what):
    if not cond:
        sys.exit(f"FAIL: {what}")


def node_stage(out):
    with open(os.path.join(out, "results.json")) as f:
        return json.load(f)["stages"]["node"]


def close(a, b, tol=TOL):
    return len(a) == len(b) and all(abs(x - y) <= tol * max(abs(y), 1e-12) for x, y in zip(a, b))


def node_run(name, mode, nproc, expect=0, env=None, sets=()):
    out = fresh(name)
    extra = [a for s in sets for a in ("--set", s)]
    p = run(["run", "--config", CONFIG, "--out", out, "--stage", "node", "--nproc", str(nproc),
             "--set", f"parallel.mode=\"{mode}\""] + extra, env=env, expect=expect)
    return out, p


def check_stage(n, mode, world):
    require(n["status"] == "ok", f"status {n['status']}: {json.dumps(n.get('restore'))}")
    require(n["world_size"] == world and n["mode"] == mode and n["comm"]["backend"] == "gloo", "world/mode/backend")
    require(len(n["ranks"]) == world, "one entry per rank")
    require(len(n["losses"]) == 12, "12 losses")
    for r in n["ranks"]:
        require(r["tokens_per_second"] > 0, "tokens/s per rank")
        require(r["memory"]["process_peak_rss_bytes"] > 0, "fresh memory per rank")
    require(n["memory"]["fresh_peak_bytes"] > 0 and n["memory"]["resumed_peak_bytes"] > 0, "memory fresh/resumed")
    if world > 1:
        require(n["comm"]["total_ms_per_step"] > 0, "communication measured")
        require(n["comm"]["collectives_per_step"] >= 2, "collectives per step")
    require(n["comm"]["exposed_ms_per_step"] >= 0, "exposed communication")
    require(n["checkpoint"]["shards"] == world, "one shard per rank")
    rs = n["restore"]
    require(rs[0]["world_size"] == world and rs[0]["equal"], f"same world restore: {rs[0]}")
    other = 1 if world > 1 else 2
    require(len(rs) == 2 and rs[1]["world_size"] == other and rs[1]["from_world_size"] == world
            and rs[1]["equal"], f"restore {world} -> {other}: {rs}")
    ck = n["checkpoint"]["path"]
    files = sorted(os.listdir(ck))
    require(f"model-rank00000-of-{world:05d}.safetensors" in files and "manifest.json" in files
            and "COMPLETE" in files, f"checkpoint files {files}")
    with open(os.path.join(ck, "manifest.json")) as f:
        m = json.load(f)
    require(m["world_size"] == world and m["mode"] == mode and len(m["files"]) == 3 * world,
            "manifest layout")


def test_ddp():
    out, p = node_run("ddp", "ddp", 2)
    check_stage(node_stage(out), "ddp", 2)
    require("pilot: node: restore 2 -> 1: equal" in p.stderr, p.stderr[-2000:])


def test_sharded():
    out, _ = node_run("sharded", "sharded", 2)
    n = node_stage(out)
    check_stage(n, "sharded", 2)
    require(n["comm"]["units"] == 3, "units: two blocks and the rest")


def test_equivalence():
    # The two-process runs are node_ddp's and node_sharded's (a CTest fixture:
    # the same config, run before this case).
    ddp, sh = os.path.join(WORK, "ddp"), os.path.join(WORK, "sharded")
    for out in (ddp, sh):
        require(os.path.exists(os.path.join(out, "results.json")), f"{out}: no results (run node_ddp and node_sharded first)")
    one, _ = node_run("eq-1", "ddp", 1)
    ref = node_stage(one)
    check_stage(ref, "ddp", 1)
    a, b, c = ref["losses"], node_stage(ddp)["losses"], node_stage(sh)["losses"]
    require(close(b, a), f"ddp losses {b} != single process {a}")
    require(close(c, a), f"sharded losses {c} != single process {a}")


def test_equivalence_variants():
    # Sharded blocks are gathered again for the recomputation, and every
    # accumulated micro-batch is reduce-scattered: both must keep the losses
    # of one process, for both model families. Six steps: every step runs
    # the same code, and a sharding error shows from the first.
    for kind, extra in (("gpt", ()), ("llama", ("model.kind=\"llama\"",))):
        sets = ("training.activation_checkpointing=true", "run.grad_accum=2", "training.steps=6",
                "checkpoint.at_step=3") + extra
        one, _ = node_run(f"eqv-{kind}-1", "ddp", 1, sets=sets)
        sh, _ = node_run(f"eqv-{kind}-sharded", "sharded", 2, sets=sets)
        a, c = node_stage(one)["losses"], node_stage(sh)["losses"]
        require(node_stage(sh)["status"] == "ok", f"{kind}: sharded status")
        require(close(c, a), f"{kind}: sharded losses {c} != single process {a}")


def test_crash():
    t0 = time.monotonic()
    out, p = node_run("crash", "ddp", 2, expect=4, env={"PILOT_RUNNER_TEST_CRASH_RANK": "1:3"})
    took = time.monotonic() - t0
    require(p.returncode not in (0, 1), f"exit {p.returncode}: {p.stderr[-2000:]}")
    require(took < 120, f"took {took:.0f} s")
    require("rank 1 failed (killed by signal 9" in p.stderr, p.stderr[-2000:])
    n = node_stage(out)
    require(n["status"] == "error" and n["failure"]["rank"] == 1 and n["failure"]["phase"] == "train",
            f"failure recorded: {n.get('failure')}")


def test_restore_can_fail():
    """The comparison is not vacuous: a resume without the optimizer state
    (test switch) must be reported unequal at both world sizes."""
    out, p = node_run("skip-optimizer", "sharded", 2, expect=1,
                      env={"PILOT_RUNNER_TEST_SKIP_RESTORE": "optimizer"})
    n = node_stage(out)
    require(n["status"] == "failed", f"status {n['status']}")
    for r in n["restore"]:
        require(r["ran"] and not r["equal"] and r["skipped"] == "optimizer"
                and r["max_rel_loss_diff"] > 0, f"restore {r}")
    require("NOT equal" in p.stderr, p.stderr[-2000:])


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_multinode():
    """Two processes of one srun step on "two nodes" (SLURM_NODEID 0 and 1,
    both local ranks 0): the rendezvous comes from the Slurm variables."""
    out = fresh("multinode")
    port = free_port()
    procs = []
    for rank in (0, 1):
        env = clean_env({"SLURM_JOB_ID": "77", "SLURM_STEP_ID": "0", "SLURM_NTASKS": "2",
                         "SLURM_PROCID": str(rank), "SLURM_LOCALID": "0", "SLURM_NODEID": str(rank),
                         "SLURM_JOB_NODELIST": "127.0.0.[1-2]", "PILOT_MASTER_PORT": str(port),
                         "PILOT_NODE_DIR": os.path.join(out, "train")})
        procs.append(subprocess.Popen([RUNNER, "run", "--config", CONFIG, "--out", out, "--stage", "node"],
                                      env=env, stderr=subprocess.PIPE, text=True))
    errs = [p.communicate(timeout=300)[1] for p in procs]
    for rank, p in enumerate(procs):
        require(p.returncode == 0, f"rank {rank}: exit {p.returncode}\n{errs[rank][-2000:]}")
    reps = []
    for rank in (0, 1):
        with open(os.path.join(out, "train", f"rank-{rank:05d}.json")) as f:
            reps.append(json.load(f))
    require([r["node_id"] for r in reps] == [0, 1], "node ids from SLURM_NODEID")
    require(all(r["launcher"] == "srun" and r["world_size"] == 2 and r["local_rank"] == 0 for r in reps),
            "srun ranks")
    require(reps[0]["losses"] == reps[1]["losses"], "ranks agree on the loss")
    # One rank per node: no level within a node, one between the two.
    for r in reps:
        p = r["comm_probe"]
        require(p["nodes"] == 2 and p["inter_size"] == 2 and p["inter_ms"] > 0 and p["bytes"] > 0
                and "intra_ms" not in p, f"rank {r['rank']}: comm_probe {p}")
    local, _ = node_run("multinode-local", "ddp", 2)
    require("comm_probe" not in json.load(open(os.path.join(local, "node", "train", "rank-00000.json"))),
            "no probe on one node")
    require(close(reps[0]["losses"], node_stage(local)["losses"]), "same losses as the local spawn")


TESTS = {"ddp": test_ddp, "sharded": test_sharded, "equivalence": test_equivalence,
         "equivalence_variants": test_equivalence_variants, "crash": test_crash,
         "restore_can_fail": test_restore_can_fail, "multinode": test_multinode}

if __name__ == "__main__":
    os.makedirs(WORK, exist_ok=True)
    TESTS[NAME]()
    print(f"ok: node_{NAME}")
