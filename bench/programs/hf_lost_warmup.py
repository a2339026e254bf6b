#!/usr/bin/env python3
"""examples/hf_trainer.py with a Trainer resume pitfall: a warm-up the Trainer does not know of.

The learning rate is ramped by a TrainerCallback that counts the steps
itself and sets the optimizer's rate before each one, the Trainer's own
scheduler left constant. The Trainer saves and restores its scheduler, but
not a callback's state (only callbacks that implement ExportableState are
kept in trainer_state.json): the resumed process counts from 0 again and
steps K+1.. run at the first steps' rates. Piloted like the example, it must
end in a NO-GO that names the learning rate after the resume
(bench/gpu-frameworks.sh).
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))

from transformers import TrainerCallback  # noqa: E402

import hf_trainer  # noqa: E402
import slurm_pilot.hf  # noqa: E402


class LinearWarmup(TrainerCallback):
    """Ramps the rate over ``steps`` steps; its count is not saved with the checkpoint."""

    def __init__(self, steps):
        self.steps, self.count = steps, 0

    def on_step_begin(self, args, state, control, optimizer=None, **kwargs):
        self.count += 1
        for group in optimizer.param_groups:
            group["lr"] = args.learning_rate * min(1.0, self.count / self.steps)


def main():
    args = hf_trainer.parse_args()
    trainer = hf_trainer.build_trainer(args, callbacks=[LinearWarmup(4 * (slurm_pilot.steps() or args.steps))],
                                       lr_scheduler_type="constant", warmup_steps=0)
    trainer.train(resume_from_checkpoint=slurm_pilot.hf.resume_from_checkpoint(args.resume))
    return 0


if __name__ == "__main__":
    sys.exit(main())
