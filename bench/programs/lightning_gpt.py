#!/usr/bin/env python3
"""A GPT trained with Lightning 2.x, piloted by slurm_pilot.lightning (bench/gpu-frameworks.sh).

The model is examples/train_gpt.py's GPT; the data an endless stream of
synthetic batches, batch i the same in every process. A correct Lightning
resume: Lightning restores the weights, optimizer, scheduler and loops, and
the module itself keeps what Lightning does not, in on_save_checkpoint and
on_load_checkpoint: the random generators (dropout) and the stream's
position. The three lines marked "pilot" are all the pilot needs.
"""

import argparse
import math
import os
import random
import sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))
try:
    import slurm_pilot.lightning  # pilot
except ImportError:
    sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
    import slurm_pilot.lightning

import lightning.pytorch as L  # noqa: E402

from train_gpt import GPT  # noqa: E402


def parse_args():
    env = os.environ.get
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--d-model", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=512)
    ap.add_argument("--seq-len", type=int, default=int(env("PILOT_SEQ_LEN") or 64))
    ap.add_argument("--micro-batch", type=int, default=int(env("PILOT_MICRO_BATCH") or 4))
    ap.add_argument("--grad-accum", type=int, default=1)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--seed", type=int, default=int(env("PILOT_SEED") or 1234))
    ap.add_argument("--precision", default="bf16-mixed")
    ap.add_argument("--accelerator", default="auto")
    return ap.parse_args()


class Stream(torch.utils.data.IterableDataset):
    """Endless batches of token ids from position ``start``; batch i depends on i only."""

    def __init__(self, args):
        self.args, self.start = args, 0

    def __iter__(self):
        a, i = self.args, self.start
        while True:
            g = torch.Generator().manual_seed(a.seed * 1000003 + i)
            start = torch.randint(a.vocab, (a.micro_batch, 1), generator=g)
            stride = torch.randint(1, 8, (a.micro_batch, 1), generator=g)
            x = (start + stride * torch.arange(a.seq_len + 1)) % a.vocab
            yield x[:, :-1], x[:, 1:]
            i += 1


class LitGPT(L.LightningModule):
    def __init__(self, args, stream):
        super().__init__()
        self.args, self.stream = args, stream
        self.net = GPT(args.vocab, args.layers, args.d_model, args.heads, args.seq_len)
        self.batches = 0  # batches trained on: the stream's position

    def training_step(self, batch, batch_idx):
        x, y = batch
        logits = self.net(x)
        self.batches += 1
        return F.cross_entropy(logits.float().view(-1, self.args.vocab), y.reshape(-1))

    def configure_optimizers(self):
        a = self.args
        opt = torch.optim.AdamW(self.parameters(), lr=a.lr, betas=(0.9, 0.95), weight_decay=0.1)

        def factor(s):  # linear warm-up, then cosine down to a tenth
            if s < a.warmup:
                return (s + 1) / a.warmup
            progress = min(1.0, (s - a.warmup) / max(1, a.steps - a.warmup))
            return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress))

        sched = torch.optim.lr_scheduler.LambdaLR(opt, factor)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}

    # What Lightning does not keep: the generators and the data's position.
    def on_save_checkpoint(self, checkpoint):
        rng = {"python": random.getstate(), "torch": torch.get_rng_state()}
        if torch.cuda.is_available():
            rng["cuda"] = torch.cuda.get_rng_state()
        checkpoint["rng"], checkpoint["batches"] = rng, self.batches

    def on_load_checkpoint(self, checkpoint):
        rng = checkpoint["rng"]
        random.setstate(rng["python"])
        torch.set_rng_state(rng["torch"].cpu())
        if "cuda" in rng and torch.cuda.is_available():
            torch.cuda.set_rng_state(rng["cuda"].cpu())
        self.batches = checkpoint["batches"]
        self.stream.start = self.batches


def main():
    args = parse_args()
    L.seed_everything(args.seed, verbose=False)  # the same initial weights in every process
    stream = Stream(args)
    model = LitGPT(args, stream)
    # Its own generator: the loader's seed drawn at iter() leaves the global one alone.
    loader = torch.utils.data.DataLoader(stream, batch_size=None, generator=torch.Generator())
    trainer = L.Trainer(**slurm_pilot.lightning.trainer_kwargs(  # pilot
        max_steps=args.steps, accelerator=args.accelerator, devices=1, precision=args.precision,
        accumulate_grad_batches=args.grad_accum, gradient_clip_val=1.0, logger=False,
        enable_progress_bar=False, enable_model_summary=False, enable_checkpointing=False))
    trainer.fit(model, loader, ckpt_path=slurm_pilot.lightning.ckpt_path())  # pilot
    if torch.cuda.is_available():
        print("max_memory_allocated %d" % torch.cuda.max_memory_allocated(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
