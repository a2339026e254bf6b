#!/usr/bin/env python3
"""A tiny training program for the supervisor's tests of program mode.

Clean, it trains a two-layer MLP language model with dropout, AdamW and a
cosine schedule on a data stream read at a cursor, reports every step through
slurm_pilot, checkpoints at PILOT_CHECKPOINT_STEP into PILOT_CHECKPOINT_DIR
and resumes from PILOT_RESUME_DIR exactly (bitwise on the CPU), fingerprinting
its state after the save and after the restore (slurm_pilot.saved and
.restored). --fault NAME injects exactly one mistake; see FAULTS.
"""

import argparse
import contextlib
import math
import os
import random
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

try:
    import slurm_pilot
except ImportError:  # run from a source tree without PYTHONPATH
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    import slurm_pilot

FAULTS = {
    "optimizer_not_saved": "the checkpoint lacks the optimizer; resume builds a fresh one",
    "rng_not_restored": "resume leaves the random generators as seeded",
    "scheduler_reset": "the schedule is neither saved nor restored",
    "resume_ignored": "PILOT_RESUME_DIR is never read; the run starts at step 1",
    "raise_on_resume": "loading the checkpoint raises KeyError",
    "hang": "the reference process sleeps forever before step 3",
    "nan": "the loss is NaN from step 3",
    "no_checkpoint": "no checkpoint is written",
    "oom": "step 2 asks the allocator for 4 PiB",
    "no_metrics": "nothing is reported to the pilot",
    "wrong_shape": "trains and reports half of PILOT_SEQ_LEN",
    "retrain_on_resume": "the resumed process never opens its checkpoint: it trains steps 1..K "
                         "again without reporting them, so its losses equal the reference's",
    "reread_retrain": "the resumed process reads every byte of its checkpoint, throws them away "
                      "and trains steps 1..K again without reporting them",
    "open_retrain": "the resumed process opens every file of its checkpoint and closes it unread, "
                    "then trains steps 1..K again without reporting them",
    "fill_work": "the reference writes into PILOT_CHECKPOINT_DIR at step 2 until the file system "
                 "is full, then trains on, half a second a step",
    "escaped_forger": "the reference starts a daemon that leaves its process group and reports "
                      "steps 1..N in its name, then lingers",
    "escape_crash": "stderr ends in terminal escapes that repaint the line, then the process fails",
    "stderr_bytes": "stderr carries a latin-1 byte and progress bars cut inside a character",
    "fake_training": "reports made-up losses, 0.5 s apart, without training; saves and restores "
                     "its checkpoint as a clean run does",
    "scheduler_stepped_twice": "resume restores the schedule, then steps it once more",
    "data_not_restored": "resume leaves the data cursor at the start of the stream",
    "state_outside": "a logit temperature raised every step lives outside the checkpoint; "
                     "everything else is restored",
    "leak": "every step keeps a fresh 64 MiB tensor: the resident set grows by 64 MiB a step",
}
VOCAB = 64


def env_int(name, default):
    return int(os.environ.get(name) or default)


def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=slurm_pilot.steps() or 8)
    ap.add_argument("--seq-len", type=int, default=env_int("PILOT_SEQ_LEN", 16))
    ap.add_argument("--micro-batch", type=int, default=env_int("PILOT_MICRO_BATCH", 4))
    ap.add_argument("--seed", type=int, default=env_int("PILOT_SEED", 1234))
    ap.add_argument("--device", default=os.environ.get("PILOT_DEVICE") or "cpu")
    ap.add_argument("--lr", type=float, default=1e-2)
    ap.add_argument("--fault", choices=sorted(FAULTS))
    ap.add_argument("--progress", metavar="PATH",
                    help="after each step, write its number to PATH.RANK (for tests that act mid-run)")
    ap.add_argument("--save-every", type=int, metavar="K",
                    help="save at every multiple of K and at the last step, into "
                         "PILOT_CHECKPOINT_DIR/checkpoint-STEP, and resume from "
                         "PILOT_RESUME_DIR/checkpoint-PILOT_CHECKPOINT_STEP")
    ap.add_argument("--autocast", choices=["bf16"],
                    help="run the forward in torch.autocast with this dtype")
    ap.add_argument("--jitter", type=float, default=0, metavar="REL",
                    help="after each optimizer step, move every weight by unseeded noise of this "
                         "relative size, as a GPU's kernels round differently in two runs")
    ap.add_argument("--step-cpu", type=float, default=0, metavar="SECONDS",
                    help="spend this much more CPU time in every step (a heavier step's work)")
    ap.add_argument("--require-env", action="append", default=[], metavar="NAME",
                    help="fail at once unless NAME is in the environment (repeatable)")
    return ap.parse_args(argv)


class Tiny(nn.Module):
    def __init__(self, d=32, hidden=64):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, d)
        self.fc1 = nn.Linear(d, hidden)
        self.drop = nn.Dropout(0.1)
        self.fc2 = nn.Linear(hidden, VOCAB)

    def forward(self, x):
        return self.fc2(self.drop(F.gelu(self.fc1(self.emb(x)))))


def batch(seed, index, rank, mb, seq, device):
    """Batch `index` of `rank`'s stream: x[t+1] = 3 x[t] + 1 mod VOCAB, 10% noise."""
    g = torch.Generator().manual_seed(seed * 1000003 + index * 1009 + rank)
    x = torch.empty(mb, seq + 1, dtype=torch.long)
    x[:, 0] = torch.randint(VOCAB, (mb,), generator=g)
    for t in range(seq):
        x[:, t + 1] = (3 * x[:, t] + 1) % VOCAB
    noise = torch.rand(mb, seq + 1, generator=g) < 0.1
    x[noise] = torch.randint(VOCAB, (int(noise.sum()),), generator=g)
    x = x.to(device)
    return x[:, :-1], x[:, 1:]


def rng_state(device):
    state = {"torch": torch.get_rng_state(), "python": random.getstate()}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    numpy = sys.modules.get("numpy")  # when something imported it (torch may)
    if numpy is not None:
        state["numpy"] = numpy.random.get_state()
    return state


def set_rng_state(state, device):
    torch.set_rng_state(state["torch"].cpu())
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    if "cuda" in state:
        torch.cuda.set_rng_state(state["cuda"].cpu(), device)
    if "numpy" in state:
        sys.modules["numpy"].random.set_state(state["numpy"])


def save_atomic(obj, path):
    tmp = path + ".tmp"
    torch.save(obj, tmp)
    os.replace(tmp, path)


def load(path, device):
    # Our own file; it holds Python objects (the random module's state).
    return torch.load(path, map_location=device, weights_only=False)


def save_checkpoint(d, step, rank, world, model, opt, sched, cursor, device, fault):
    os.makedirs(d, exist_ok=True)
    if rank == 0:
        ckpt = {"model": model.state_dict(), "step": step, "world_size": world,
                "rng": rng_state(device), "data_position": cursor}
        if fault != "optimizer_not_saved":
            ckpt["optimizer"] = opt.state_dict()
        if fault != "scheduler_reset":
            ckpt["scheduler"] = sched.state_dict()
        save_atomic(ckpt, os.path.join(d, "ckpt.pt"))
    else:  # every rank draws its own dropout masks
        save_atomic(rng_state(device), os.path.join(d, "rng-%d.pt" % rank))
    if world > 1:
        dist.barrier()
    if fault != "no_metrics":
        slurm_pilot.saved(step, model=model, optimizer=opt, scheduler=sched, data_position=cursor)


def restore(d, rank, model, opt, sched, device, fault):
    """Load checkpoint `d`; returns (its step, the data cursor to continue at)."""
    ckpt = load(os.path.join(d, "ckpt.pt"), device)
    model.load_state_dict(ckpt["model_state" if fault == "raise_on_resume" else "model"])
    if "optimizer" in ckpt and fault != "optimizer_not_saved":
        opt.load_state_dict(ckpt["optimizer"])
    if "scheduler" in ckpt and fault != "scheduler_reset":
        sched.load_state_dict(ckpt["scheduler"])
        if fault == "scheduler_stepped_twice":
            sched.step()
    if fault != "rng_not_restored":
        rng = ckpt["rng"] if rank == 0 else load(os.path.join(d, "rng-%d.pt" % rank), device)
        set_rng_state(rng, device)
    cursor = 0 if fault == "data_not_restored" else ckpt["data_position"]
    return ckpt["step"], cursor


def save_dir(args, step):
    """Where to save after `step`, or None: PILOT_CHECKPOINT_DIR at
    PILOT_CHECKPOINT_STEP, or with --save-every its checkpoint-STEP folders."""
    base = slurm_pilot.checkpoint_dir()
    if base is None or args.fault == "no_checkpoint":
        return None
    if args.save_every:
        if step % args.save_every == 0 or step == args.steps:
            return os.path.join(base, "checkpoint-%d" % step)
        return None
    return base if slurm_pilot.checkpoint_due(step) else None


def resume_from(args):
    """The checkpoint to restore (PILOT_RESUME_DIR, or its folder of the step: PILOT_RESUME_STEP
    in a requeued bound run, else PILOT_CHECKPOINT_STEP), or None."""
    d = None if args.fault == "resume_ignored" else slurm_pilot.resume_dir()
    if d and args.save_every:
        d = os.path.join(d, "checkpoint-%d" % slurm_pilot.resume_step())
    return d


def start_forger(steps):
    """A daemon of the reference process (setsid, double fork): writes records
    for every step in rank 0's name, then lingers for ever."""
    if os.fork() > 0:
        return
    os.setsid()
    if os.fork() > 0:
        os._exit(0)
    try:
        import socket
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(os.environ["PILOT_METRICS"])
        for step in range(1, steps + 1):
            s.sendall(b'{"step": %d, "loss": 0.5, "rank": 0}\n' % step)
        while True:
            time.sleep(3600)
    finally:
        os._exit(0)


def noisy_stderr():
    """What tqdm leaves on stderr: bars redrawn with \\r, block characters (3
    bytes each) in a stream longer than any tail, and one latin-1 byte."""
    bar = "\u2588" * 40
    for i in range(400):
        sys.stderr.write("\r%3d%%|%s| %d/400" % (i // 4, bar[: i // 10], i))
    sys.stderr.flush()
    sys.stderr.buffer.write(b"\ncaf\xe9 \xe2\x96")  # a cut block character at the end
    sys.stderr.buffer.flush()


def main(argv=None):
    args = parse(argv)
    fault = args.fault
    for name in args.require_env:
        if name not in os.environ:
            print("tiny.py: the environment variable %s is not set; this program needs it"
                  % name, file=sys.stderr, flush=True)
            return 1
    rank, world = env_int("RANK", 0), env_int("WORLD_SIZE", 1)
    # Deterministic kernels on a CPU, and on a GPU where the pilot asks for
    # them (training.deterministic); else the GPU's defaults.
    if not args.device.startswith("cuda") or os.environ.get("PILOT_DETERMINISTIC") == "1":
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # before CUDA starts
        torch.use_deterministic_algorithms(True)
    if args.device.startswith("cuda"):
        device = torch.device("cuda", env_int("LOCAL_RANK", 0))
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
        torch.set_num_threads(1)
    if world > 1:
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo", init_method="env://")
    seq = args.seq_len // 2 if fault == "wrong_shape" else args.seq_len
    report = (lambda *a, **k: None) if fault == "no_metrics" else slurm_pilot.step

    torch.manual_seed(args.seed)  # the same initial weights on every rank
    model = Tiny().to(device)
    net = nn.parallel.DistributedDataParallel(model) if world > 1 else model
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    warmup = 2

    def schedule(s):
        if s < warmup:
            return (s + 1) / warmup
        return 0.1 + 0.45 * (1 + math.cos(math.pi * min(1.0, (s - warmup) / max(1, args.steps - warmup))))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule)
    torch.manual_seed(args.seed + 1 + rank)  # this rank's dropout
    random.seed(args.seed + rank)
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed(args.seed + rank)

    jitter = torch.Generator().manual_seed(int.from_bytes(os.urandom(7), "little"))
    first = 1
    quiet_until = 0
    cursor = 0  # batches of the data stream consumed
    temperature = 1.0  # state_outside: raised every step, never saved
    leaked = []
    resume = resume_from(args)
    if resume and fault == "reread_retrain":
        for folder, _, names in os.walk(resume):
            for name in names:
                with open(os.path.join(folder, name), "rb") as f:
                    while f.read(1 << 20):
                        pass
    if resume and fault == "open_retrain":
        for folder, _, names in os.walk(resume):
            for name in names:
                os.close(os.open(os.path.join(folder, name), os.O_RDONLY))
    if resume and fault in ("retrain_on_resume", "reread_retrain", "open_retrain"):
        quiet_until = slurm_pilot.checkpoint_step()
        slurm_pilot.restored(quiet_until)  # claimed, never read
        resume = None
    elif resume:
        done, cursor = restore(resume, rank, model, opt, sched, device, fault)
        if fault != "no_metrics":
            slurm_pilot.restored(done, model=model, optimizer=opt, scheduler=sched,
                                 data_position=cursor)
        first = done + 1
    reference = resume is None and slurm_pilot.process() != "resumed"
    if fault == "escaped_forger" and reference:
        start_forger(args.steps)
    if fault == "stderr_bytes":
        noisy_stderr()
    if fault == "fake_training" and not resume:  # the optimizer's state exists, as in training
        x, y = batch(args.seed, 0, rank, args.micro_batch, seq, device)
        F.cross_entropy(net(x).reshape(-1, VOCAB), y.reshape(-1)).backward()
        opt.step()

    for step in range(first, args.steps + 1):
        if fault == "fake_training":
            time.sleep(0.5)
            report(2.0 - 0.01 * step, tokens=seq * args.micro_batch, model=model, optimizer=opt,
                   lr=opt.param_groups[0]["lr"], seq_len=seq, micro_batch=args.micro_batch)
            d = save_dir(args, step)
            if d:
                save_checkpoint(d, step, rank, world, model, opt, sched, cursor, device, fault)
            continue
        if fault == "fill_work" and reference and step >= 2:
            if step == 2:
                block = b"\0" * (1 << 20)
                path = os.path.join(os.environ["PILOT_CHECKPOINT_DIR"], "filler")
                os.makedirs(os.path.dirname(path), exist_ok=True)
                try:
                    with open(path, "wb") as f:
                        while True:
                            f.write(block)
                except OSError:
                    pass
            time.sleep(0.5)
        if fault == "hang" and step == 3 and reference:
            while True:
                time.sleep(3600)
        if fault == "oom" and step == 2:
            torch.empty(1 << 50, device=device)
        cursor += 1
        x, y = batch(args.seed, cursor, rank, args.micro_batch, seq, device)
        amp = (torch.autocast(device.type, dtype=torch.bfloat16) if args.autocast
               else contextlib.nullcontext())
        with amp:
            logits = net(x)
        if fault == "state_outside":
            logits = logits / temperature
        loss = F.cross_entropy(logits.float().reshape(-1, VOCAB), y.reshape(-1))
        if fault == "nan" and step >= 3:
            loss = loss * float("nan")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        lr = opt.param_groups[0]["lr"]
        opt.step()
        sched.step()
        if args.jitter > 0:
            with torch.no_grad():
                for p in model.parameters():
                    p.mul_(1 + args.jitter * torch.randn(p.shape, generator=jitter).to(p.device))
        if fault == "state_outside":
            temperature += 0.25
        if args.step_cpu > 0:
            end = time.process_time() + args.step_cpu
            while time.process_time() < end:
                pass
        if fault == "leak":
            leaked.append(torch.ones(16 << 20))  # 64 MiB, written, never freed
        if step > quiet_until:
            report(loss, tokens=seq * args.micro_batch, model=model, optimizer=opt, lr=lr,
                   grad_norm=grad_norm, seq_len=seq, micro_batch=args.micro_batch)
        print("step %d loss %.6f" % (step, loss.item()), flush=True)
        if args.progress:
            tmp = "%s.%d.tmp" % (args.progress, rank)
            with open(tmp, "w") as f:
                f.write("%d\n" % step)
            os.replace(tmp, "%s.%d" % (args.progress, rank))
        d = save_dir(args, step)
        if d:
            save_checkpoint(d, step, rank, world, model, opt, sched, cursor, device, fault)
    if world > 1:
        dist.destroy_process_group()
    if fault == "escape_crash":
        sys.stderr.write("RuntimeError: restore fail\x1b[2K\r\x1b[32mrestore pass\x1b[0m\n")
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
