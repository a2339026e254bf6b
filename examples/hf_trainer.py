#!/usr/bin/env python3
"""Train a small GPT-2 with the Hugging Face Trainer, piloted by slurm-pilot.

The model is built from a GPT2Config of the sizes given (nothing is
downloaded); the text is synthetic token ids from the seed, or a flat
uint16 token file (--data). The three lines marked "pilot" are all the
pilot needs: inside a pilot the callback sets max_steps, the save at
PILOT_CHECKPOINT_STEP into PILOT_CHECKPOINT_DIR and a log every step, and
reports each step; the resumed process restarts from the reference's
checkpoint-K. Outside a pilot the same file trains on its own, saving every
--save-steps into --output-dir. See pilot-program(7).
"""

import argparse
import os
import sys

import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments, set_seed

try:
    import slurm_pilot.hf  # pilot: a pilot puts slurm_pilot on PYTHONPATH
except ImportError:  # run from the source tree
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    import slurm_pilot.hf


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
    ap.add_argument("--grad-accum", type=int, default=1)
    ap.add_argument("--steps", type=int, default=20, help="max_steps outside a pilot")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--seed", type=int, default=int(env("PILOT_SEED", 1234)))
    ap.add_argument("--bf16", action="store_true", help="bf16 mixed precision (CUDA)")
    ap.add_argument("--eval-steps", type=int, default=0, help="evaluate every N steps (0: never)")
    ap.add_argument("--save-steps", type=int, default=500)
    ap.add_argument("--output-dir", default="hf-trainer-out")
    ap.add_argument("--resume", help="a checkpoint to resume from outside a pilot")
    ap.add_argument("--data", help="flat uint16 token file (default: synthetic tokens)")
    return ap.parse_args()


class Tokens(torch.utils.data.Dataset):
    """Sequences of token ids; sequence i is the same in every process."""

    def __init__(self, args, size, salt=0):
        self.seq, self.vocab, self.size, self.seed = args.seq_len, args.vocab, size, args.seed + salt
        self.tokens = None
        if args.data:
            with open(args.data, "rb") as f:
                self.tokens = torch.frombuffer(bytearray(f.read()), dtype=torch.int16).long() & 0xFFFF

    def __len__(self):
        return self.size

    def __getitem__(self, i):
        if self.tokens is not None:
            n = len(self.tokens) // self.seq
            x = self.tokens[(i % n) * self.seq:(i % n + 1) * self.seq] % self.vocab
        else:  # a learnable pattern: counting up by a stride of its own
            g = torch.Generator().manual_seed(self.seed * 1000003 + i)
            start = torch.randint(self.vocab, (1,), generator=g)
            stride = torch.randint(1, 8, (1,), generator=g)
            x = (start + stride * torch.arange(self.seq)) % self.vocab
        return {"input_ids": x, "labels": x.clone()}


def build_trainer(args, callbacks=(), **training):
    """The model, data and Trainer; ``training`` overrides TrainingArguments' keywords."""
    set_seed(args.seed)  # the same initial weights in every process
    config = GPT2Config(vocab_size=args.vocab, n_positions=args.seq_len, n_embd=args.d_model,
                        n_layer=args.layers, n_head=args.heads)
    model = GPT2LMHeadModel(config)
    world = int(env("WORLD_SIZE", 1))
    # Enough sequences that the run never starts a second epoch.
    size = (args.steps + (slurm_pilot.steps() or 0)) * args.micro_batch * args.grad_accum * world * 2
    train, evaluation = Tokens(args, size), Tokens(args, 4 * args.micro_batch, salt=1)
    settings = dict(
        output_dir=args.output_dir, max_steps=args.steps, per_device_train_batch_size=args.micro_batch,
        per_device_eval_batch_size=args.micro_batch, gradient_accumulation_steps=args.grad_accum,
        learning_rate=args.lr, warmup_steps=args.warmup, lr_scheduler_type="cosine", weight_decay=0.1,
        adam_beta2=0.95, max_grad_norm=1.0, bf16=args.bf16, seed=args.seed, data_seed=args.seed,
        save_strategy="steps", save_steps=args.save_steps, save_total_limit=2,
        eval_strategy="steps" if args.eval_steps else "no", eval_steps=args.eval_steps or None,
        logging_steps=10, report_to="none", dataloader_num_workers=0)
    settings.update(training)
    return Trainer(model=model, args=TrainingArguments(**settings), train_dataset=train,
                   eval_dataset=evaluation if args.eval_steps else None,
                   callbacks=[slurm_pilot.hf.PilotCallback(), *callbacks])  # pilot


def main():
    args = parse_args()
    trainer = build_trainer(args)
    trainer.train(resume_from_checkpoint=slurm_pilot.hf.resume_from_checkpoint(args.resume))  # pilot
    if torch.cuda.is_available() and int(env("RANK", 0)) == 0:
        print("max_memory_allocated %d" % torch.cuda.max_memory_allocated(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
