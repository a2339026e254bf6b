#!/usr/bin/env python3
"""Train a small GPT, reporting to slurm-pilot when run inside a pilot.

Synthetic tokens (from the seed) or a flat uint16 token file (--data). One
process, or DDP when WORLD_SIZE > 1 (Gloo on the CPU, NCCL on CUDA). Inside a
pilot it checkpoints at PILOT_CHECKPOINT_STEP into PILOT_CHECKPOINT_DIR and
resumes from PILOT_RESUME_DIR; see pilot-program(7). Outside one, the same
file trains on its own.
"""

import argparse
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
    import slurm_pilot  # a pilot puts it on PYTHONPATH
except ImportError:  # run from the source tree
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    import slurm_pilot


def env(name, default):
    return os.environ.get(name) or default


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--d-model", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=512)
    ap.add_argument("--seq-len", type=int, default=int(env("PILOT_SEQ_LEN", 64)))
    ap.add_argument("--micro-batch", type=int, default=int(env("PILOT_MICRO_BATCH", 4)))
    ap.add_argument("--steps", type=int, default=int(env("PILOT_STEPS", 20)))
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--seed", type=int, default=int(env("PILOT_SEED", 1234)))
    ap.add_argument("--device", default=env("PILOT_DEVICE", "cpu"), choices=["cpu", "cuda"])
    ap.add_argument("--precision", default="auto", choices=["auto", "fp32", "bf16"],
                    help="auto: bf16 autocast on cuda, fp32 on the cpu")
    ap.add_argument("--data", help="flat uint16 token file (default: synthetic tokens)")
    ap.add_argument("--deterministic", action="store_true",
                    help="deterministic kernels, one CPU thread: resumes bitwise on the cpu")
    return ap.parse_args()


class Block(nn.Module):
    def __init__(self, d, heads, dropout):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d), nn.Dropout(dropout))
        self.attn_drop, self.resid_drop = nn.Dropout(dropout), nn.Dropout(dropout)

    def attention(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        if hasattr(F, "scaled_dot_product_attention") and x.is_cuda:  # torch 2: fused kernels
            p = self.attn_drop.p if self.training else 0.0
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
            return self.resid_drop(self.proj(y.transpose(1, 2).reshape(b, t, d)))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
        causal = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        att = self.attn_drop(att.masked_fill(~causal, float("-inf")).softmax(dim=-1))
        return self.resid_drop(self.proj((att @ v).transpose(1, 2).reshape(b, t, d)))

    def forward(self, x):
        x = x + self.attention(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab, layers, d, heads, seq_len, dropout=0.1):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(seq_len, d)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(Block(d, heads, dropout) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.tok.weight  # tied
        self.apply(self.init)

    @staticmethod
    def init(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def forward(self, idx):
        x = self.drop(self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device)))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


class Data:
    """Batches for one rank. Its state (a generator, or a file position) is checkpointed."""

    def __init__(self, args, rank, world):
        self.mb, self.seq, self.vocab = args.micro_batch, args.seq_len, args.vocab
        self.rank, self.world = rank, world
        self.tokens = None
        if args.data:
            with open(args.data, "rb") as f:
                self.tokens = torch.frombuffer(bytearray(f.read()), dtype=torch.int16).long() & 0xFFFF
        self.gen = torch.Generator().manual_seed(args.seed + 7919 * rank)
        self.pos = 0  # batches this rank has taken from the file

    def next(self):
        n = self.mb * (self.seq + 1)
        if self.tokens is not None:  # rank r takes every world-th slice, wrapping round
            slices = len(self.tokens) // n
            i = (self.pos * self.world + self.rank) % slices
            self.pos += 1
            x = (self.tokens[i * n:(i + 1) * n] % self.vocab).view(self.mb, self.seq + 1)
        else:  # a learnable pattern: each row counts up by its own stride
            start = torch.randint(self.vocab, (self.mb, 1), generator=self.gen)
            stride = torch.randint(1, 8, (self.mb, 1), generator=self.gen)
            x = (start + stride * torch.arange(self.seq + 1)) % self.vocab
        return x[:, :-1], x[:, 1:]

    def state_dict(self):
        return {"gen": self.gen.get_state(), "pos": self.pos}

    def load_state_dict(self, s):
        self.gen.set_state(s["gen"].cpu())
        self.pos = s["pos"]


def rng_state(data, device):
    s = {"torch": torch.get_rng_state(), "python": random.getstate(), "data": data.state_dict()}
    if device.type == "cuda":
        s["cuda"] = torch.cuda.get_rng_state(device)
    return s


def set_rng_state(s, data, device):
    # Generator states are CPU byte tensors, wherever the checkpoint was mapped.
    torch.set_rng_state(s["torch"].cpu())
    random.setstate((s["python"][0], tuple(s["python"][1]), s["python"][2]))
    data.load_state_dict(s["data"])
    if "cuda" in s:
        torch.cuda.set_rng_state(s["cuda"].cpu(), device)


def save(obj, path):
    torch.save(obj, path + ".tmp")
    os.replace(path + ".tmp", path)  # atomic: never a half-written checkpoint


def load(path, device):
    return torch.load(path, map_location=device, weights_only=False)


def main():
    args = parse_args()
    rank, world = int(env("RANK", 0)), int(env("WORLD_SIZE", 1))
    if args.deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # before CUDA starts
        torch.use_deterministic_algorithms(True)
        torch.set_num_threads(1)
    if args.device == "cuda":
        device = torch.device("cuda", int(env("LOCAL_RANK", 0)))
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    if world > 1:
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo", init_method="env://")
    bf16 = args.precision == "bf16" or (args.precision == "auto" and device.type == "cuda")

    torch.manual_seed(args.seed)  # the same initial weights on every rank
    model = GPT(args.vocab, args.layers, args.d_model, args.heads, args.seq_len).to(device)
    net = nn.parallel.DistributedDataParallel(model) if world > 1 else model
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.1)

    def lr_factor(s):  # linear warm-up, then cosine down to a tenth
        if s < args.warmup:
            return (s + 1) / args.warmup
        progress = min(1.0, (s - args.warmup) / max(1, args.steps - args.warmup))
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_factor)
    data = Data(args, rank, world)
    torch.manual_seed(args.seed + 1 + rank)  # this rank's dropout
    random.seed(args.seed + rank)

    first = 1
    if slurm_pilot.resume_dir():
        d = slurm_pilot.resume_dir()
        ckpt = load(os.path.join(d, "ckpt.pt"), device)
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["optimizer"])
        sched.load_state_dict(ckpt["scheduler"])
        set_rng_state(ckpt["rng"] if rank == 0 else load(os.path.join(d, "rng-%d.pt" % rank), device),
                      data, device)
        first = ckpt["step"] + 1
        slurm_pilot.restored(ckpt["step"])

    last = time.perf_counter()
    for step in range(first, args.steps + 1):
        x, y = (t.to(device) for t in data.next())
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=bf16):
            logits = net(x)
        loss = F.cross_entropy(logits.float().view(-1, args.vocab), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        lr = opt.param_groups[0]["lr"]
        opt.step()
        sched.step()
        slurm_pilot.step(loss, tokens=args.seq_len * args.micro_batch, model=model, optimizer=opt,
                         lr=lr, grad_norm=grad_norm, seq_len=args.seq_len, micro_batch=args.micro_batch)
        if rank == 0:
            value = loss.item()  # waits for the step, so the time below is the step's
            now = time.perf_counter()
            print("step %d loss %.6f lr %.3g ms %.1f" % (step, value, lr, (now - last) * 1e3), flush=True)
            last = now

        if slurm_pilot.checkpoint_due(step):
            d = slurm_pilot.checkpoint_dir()
            os.makedirs(d, exist_ok=True)
            if rank == 0:
                save({"model": model.state_dict(), "optimizer": opt.state_dict(),
                      "scheduler": sched.state_dict(), "step": step, "world_size": world,
                      "rng": rng_state(data, device)}, os.path.join(d, "ckpt.pt"))
            else:  # each rank's dropout and data stream are its own
                save(rng_state(data, device), os.path.join(d, "rng-%d.pt" % rank))
            if world > 1:
                dist.barrier()

    if device.type == "cuda" and rank == 0:
        print("max_memory_allocated %d" % torch.cuda.max_memory_allocated(device), flush=True)
    if world > 1:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
