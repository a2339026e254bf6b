#!/usr/bin/env python3
"""The probe's cost: a fast GPU step with and without slurm_pilot.step, in one process.

examples/train_gpt.py's GPT at GPT-2 124M's shape (12 layers, d_model 768,
vocab 50,304, sequence 1024, micro-batch 12, bf16 autocast, AdamW): after a
warm-up, blocks of steps alternate between the program alone and the program
reporting every step to the probe (PILOT_METRICS set, records written to a
Unix socket that a separate process drains, as the supervisor does). The
block's time, between two synchronizations, over its steps is the program's
own step time; the overhead is the ratio of the medians of the two kinds of
block. Two styles of program, each its own pass:
  item    the program calls loss.item() every step and reports the number
  tensor  the program reports the loss tensor and never waits (the probe
          copies it to the host without waiting and writes its record once
          a later step finds the copy done)
A block with the probe ends by writing every record it still holds, inside
the block's time, and starts with none held (the settling steps' records
written before its clock starts). The probe's own probe_ms of every reported
step is summed up too. Prints
one JSON object. Usage: probe_cost.py [--probe DIR] [--blocks 16] ...
"""

import argparse
import json
import os
import socket
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def drain(path, ready):
    """A separate process: accept connections on PATH and read until closed."""
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(16)
    os.write(ready, b"x")
    with open(path + ".records", "wb") as out:
        while True:
            conn, _ = srv.accept()
            while True:
                chunk = conn.recv(1 << 16)
                if not chunk:
                    break
                out.write(chunk)
                out.flush()
            conn.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--probe", default=os.path.join(HERE, "..", "..", "python"),
                    help="the folder holding the slurm_pilot package to measure")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--d-model", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--vocab", type=int, default=50304)
    ap.add_argument("--seq-len", type=int, default=1024)
    ap.add_argument("--micro-batch", type=int, default=12)
    ap.add_argument("--warmup", type=int, default=15)
    ap.add_argument("--blocks", type=int, default=16, help="blocks per style, half with the probe")
    ap.add_argument("--block-steps", type=int, default=25)
    ap.add_argument("--styles", default="item,tensor")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"],
                    help="cpu: a smoke run of the script itself, not a measurement")
    args = ap.parse_args()

    folder = tempfile.mkdtemp(prefix="probe-cost-")
    sink = os.path.join(folder, "metrics.sock")
    r, w = os.pipe()
    pid = os.fork()  # before CUDA is initialized
    if pid == 0:
        os.close(r)
        drain(sink, w)
        os._exit(0)
    os.close(w)
    os.read(r, 1)
    try:
        return measure(args, sink)
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)


def measure(args, sink):

    sys.path.insert(0, os.path.abspath(args.probe))
    sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))
    import torch
    import torch.nn.functional as F
    import slurm_pilot
    import train_gpt
    try:  # the records a probe holds until the device has their numbers
        from slurm_pilot._defer import flush_current as write_held
    except ImportError:  # a probe that writes each record at its call
        def write_held():
            pass

    cuda = args.device == "cuda"
    dev = torch.device("cuda", 0) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(dev)

    def sync():
        if cuda:
            torch.cuda.synchronize(dev)
    torch.manual_seed(1234)
    model = train_gpt.GPT(args.vocab, args.layers, args.d_model, args.heads, args.seq_len).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1,
                            **({"fused": True} if cuda else {}))
    gen = torch.Generator().manual_seed(1)
    tokens = args.micro_batch * args.seq_len

    def batch():
        x = torch.randint(args.vocab, (args.micro_batch, args.seq_len + 1), generator=gen)
        x = x.pin_memory().to(dev, non_blocking=True) if cuda else x
        return x[:, :-1], x[:, 1:]

    n = [0]

    def one_step(style, probe):
        x, y = batch()
        with torch.autocast(dev.type, dtype=torch.bfloat16):
            logits = model(x)
        loss = F.cross_entropy(logits.float().view(-1, args.vocab), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        n[0] += 1
        value = loss.item() if style == "item" else loss
        if probe:
            slurm_pilot.step(value, tokens, step=n[0], model=model, optimizer=opt)

    os.environ.update(PILOT_STEPS=str(10 ** 6), RANK="0", PILOT_PROCESS="reference")
    result = {"gpu": torch.cuda.get_device_name(dev) if cuda else "cpu", "torch": torch.__version__,
              "shape": {"layers": args.layers, "d_model": args.d_model, "vocab": args.vocab,
                        "seq_len": args.seq_len, "micro_batch": args.micro_batch},
              "probe": os.path.abspath(args.probe), "styles": {}}
    os.environ["PILOT_METRICS"] = sink  # the probe installs its watchers in both kinds of block
    for _ in range(args.warmup):
        one_step("item", True)
    for style in args.styles.split(","):
        per_step = {"off": [], "on": []}
        for b in range(args.blocks):
            probe = b % 2 == 1  # off, on, off, on...
            for _ in range(3):  # settle into the kind of block
                one_step(style, probe)
            write_held()
            sync()
            t0 = time.perf_counter()
            for _ in range(args.block_steps):
                one_step(style, probe)
            write_held()  # the block's last records are its own work
            sync()
            per_step["on" if probe else "off"].append((time.perf_counter() - t0) * 1e3 / args.block_steps)
        off, on = statistics.median(per_step["off"]), statistics.median(per_step["on"])
        result["styles"][style] = {
            "blocks_ms_per_step": per_step, "off_ms": off, "on_ms": on,
            "overhead_pct": (on / off - 1) * 100,
            "spread_off_pct": (max(per_step["off"]) / min(per_step["off"]) - 1) * 100}
    del os.environ["PILOT_METRICS"]
    # This process's probe state (slurm_pilot._state; a copy of the probe
    # from before its modules kept it as slurm_pilot._probe).
    state = getattr(slurm_pilot, "_state", None)
    p = state.probe if state is not None else getattr(slurm_pilot, "_probe", None)
    if p is not None and p.fd is not None:
        os.close(p.fd)
    time.sleep(0.5)  # the drain's last lines
    probe_ms = []
    with open(sink + ".records", "rb") as f:
        for line in f:
            rec = json.loads(line)
            if "probe_ms" in rec and rec["step"] > args.warmup:
                probe_ms.append(rec["probe_ms"])
    probe_ms.sort()
    result["probe_ms"] = {"records": len(probe_ms), "median": statistics.median(probe_ms),
                          "p99": probe_ms[int(len(probe_ms) * 0.99)], "max": probe_ms[-1]}
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
