"""Pilot a Hugging Face ``transformers.Trainer`` program: three lines.

    import slurm_pilot.hf
    trainer = Trainer(..., callbacks=[slurm_pilot.hf.PilotCallback()])
    trainer.train(resume_from_checkpoint=slurm_pilot.hf.resume_from_checkpoint())

Inside a pilot the callback sets the Trainer's arguments for the pilot when
the Trainer is made (training_args() does the same for a program that wants
the adjusted arguments itself): max_steps = PILOT_STEPS, a save every
PILOT_CHECKPOINT_STEP steps into PILOT_CHECKPOINT_DIR kept whatever
save_total_limit said, a log every step with NaN and infinite losses kept as
they are. It reports every optimizer step (the Trainer's logged loss, the
learning rate the optimizer stepped with, the gradient norm, the tokens of the
step's batches, the model's and optimizer's sizes) and fingerprints the state
the step after K starts from, with the batch it trains on, as that step's
first forward begins: in the reference process after its save, in the resumed
process once the Trainer has restored the model, optimizer, scheduler, scaler
and random generators. resume_from_checkpoint() is the
reference's ``checkpoint-K`` in the resumed process, else its argument.

Outside a pilot every piece is a no-op: training_args() returns its argument,
the callback does nothing, resume_from_checkpoint() returns its default.
transformers is imported when PilotCallback is first used, never by
``import slurm_pilot``. See pilot-program(7).
"""

from __future__ import annotations

import copy
import dataclasses
import os
import re
from typing import TYPE_CHECKING, Any

import slurm_pilot
from slurm_pilot import _glue

if TYPE_CHECKING:
    import torch
    from transformers import TrainerControl, TrainerState, TrainingArguments

__all__ = ["PilotCallback", "training_args", "resume_from_checkpoint"]

PREFIX = "checkpoint"  # the Trainer's checkpoint folders: checkpoint-<global step>


def resume_from_checkpoint(default: str | bool | None = None) -> str | bool | None:
    """The checkpoint for ``trainer.train(resume_from_checkpoint=...)``: in the resumed process of
    a pilot, PILOT_RESUME_DIR/checkpoint-K (the reference's save of step K); in a requeued bound
    run, PILOT_RESUME_DIR/checkpoint-S (PILOT_RESUME_STEP, the newest complete save); else
    ``default``."""
    directory = slurm_pilot.resume_dir()
    if not directory:
        return default
    k = slurm_pilot.resume_step()
    if k is None:  # the latest one there
        found = [(int(m.group(1)), name) for name in os.listdir(directory)
                 for m in [re.fullmatch(PREFIX + r"-(\d+)", name)] if m]
        return os.path.join(directory, max(found)[1]) if found else directory
    return os.path.join(directory, "%s-%d" % (PREFIX, k))


def _strategy(kind: str, value: str) -> Any:
    """transformers' enum for a strategy where it has one, else the string (they compare equal)."""
    try:
        from transformers import trainer_utils
    except ImportError:
        return value
    for name in (kind, "IntervalStrategy"):
        enum = getattr(trainer_utils, name, None)
        if enum is not None:
            try:
                return enum(value)
            except ValueError:
                pass
    return value


def _changes(args: TrainingArguments) -> dict[str, Any]:
    """What a pilot sets in a TrainingArguments: when and where, never what is saved."""
    changes = {}
    n, k, directory = slurm_pilot.steps(), slurm_pilot.checkpoint_step(), slurm_pilot.checkpoint_dir()
    if n:
        changes["max_steps"] = n
    if k:
        changes["save_strategy"] = _strategy("SaveStrategy", "steps")
        changes["save_steps"] = k
    changes["save_total_limit"] = None        # checkpoint-K must outlive the saves after it
    changes["load_best_model_at_end"] = False  # its rotation and reload would touch checkpoint-K
    if directory:
        changes["output_dir"] = directory
    if not slurm_pilot.bound():  # a bound run reports nothing: its logging stays the program's
        changes["logging_strategy"] = _strategy("IntervalStrategy", "steps")
        changes["logging_steps"] = 1
        changes["logging_nan_inf_filter"] = False  # a NaN loss is reported as NaN
    if slurm_pilot.resume_dir():
        changes["resume_from_checkpoint"] = resume_from_checkpoint()
    return {name: value for name, value in changes.items() if hasattr(args, name)}


def _adjust(args: TrainingArguments) -> TrainingArguments:
    for name, value in _changes(args).items():
        setattr(args, name, value)
    return args


def training_args(args: TrainingArguments) -> TrainingArguments:
    """A copy of ``args`` (a TrainingArguments) set for the pilot or the bound run (its steps,
    its saves every PILOT_CHECKPOINT_STEP into PILOT_CHECKPOINT_DIR, where it resumes); ``args``
    itself outside both."""
    if not slurm_pilot.active() and not slurm_pilot.bound():
        return args
    try:
        return _adjust(copy.copy(args))
    except (AttributeError, dataclasses.FrozenInstanceError):  # arguments that cannot be set
        return dataclasses.replace(args, **_changes(args))


def _steps_per_epoch(args: TrainingArguments, train_dataloader: Any) -> tuple[int | None, int | None]:
    try:
        batches = len(train_dataloader)
    except TypeError:  # an iterable dataset: one endless epoch
        return None, None
    accumulation = max(1, int(getattr(args, "gradient_accumulation_steps", 1) or 1))
    return max(1, batches // accumulation + int(batches % accumulation > 0)), batches


class _Hooks:
    """The callback's work, without transformers (PilotCallback adds TrainerCallback)."""

    def __init__(self) -> None:
        self._pending = None       # the logged step's record, waiting for an evaluation's loss
        self._reported = 0         # the last step reported
        self._batches = _glue.Batches()  # the micro-batches since the step began
        self._lr = None
        self._hook = None
        self._restore_due = False  # resumed: fingerprint at the first step's beginning
        self._saved_due = None     # reference: the step whose save to fingerprint
        self._print_due = None     # (kind, step, args, state): fingerprints at the next forward
        self._input_name = "input_ids"
        self._objects = {}

    # ----- Trainer events
    def on_init_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                    **kwargs: Any) -> None:
        if not slurm_pilot.active():
            return
        try:
            _adjust(args)
        except (AttributeError, dataclasses.FrozenInstanceError) as e:
            _glue.warn("the Trainer's arguments cannot be set for the pilot (%s): pass "
                       "slurm_pilot.hf.training_args(args) to the Trainer" % e)

    def on_train_begin(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                       model: torch.nn.Module | None = None, **kwargs: Any) -> None:
        if not slurm_pilot.active():
            return
        self._remember(kwargs, model)
        self._restore_due = _glue.resuming()
        if model is not None and self._hook is None:
            try:
                self._hook = model.register_forward_pre_hook(self._before_forward, with_kwargs=True)
            except TypeError:  # torch < 2.0: positional arguments only
                self._hook = model.register_forward_pre_hook(
                    lambda module, a: self._before_forward(module, a, {}))

    def on_step_begin(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                      model: torch.nn.Module | None = None, **kwargs: Any) -> None:
        if not slurm_pilot.active():
            return
        self._remember(kwargs, model)
        self._flush()
        self._batches.begin()
        if self._restore_due:
            # The Trainer has loaded the weights (train()), the optimizer, scheduler and
            # scaler (before on_train_begin) and, last, the random generators (after
            # on_epoch_begin, or after fetching the first batches when it skips into an
            # epoch): all of the state the step after K starts from.
            self._restore_due = False
            if state.global_step > 0:  # 0: the checkpoint was not given to train()
                self._print_due = ("restored", state.global_step, args, state)
        if self._saved_due is not None:
            # The reference's state at the same point: after its save of step K, as the
            # step after it begins.
            step, self._saved_due = self._saved_due, None
            self._print_due = ("saved", step, args, state)
        if self._print_due is not None and self._hook is None:
            self._fingerprint(None)

    def on_pre_optimizer_step(self, args: TrainingArguments, state: TrainerState,
                              control: TrainerControl, optimizer: torch.optim.Optimizer | None = None,
                              **kwargs: Any) -> None:
        self._note_lr(optimizer)

    def on_optimizer_step(self, args: TrainingArguments, state: TrainerState,
                          control: TrainerControl, optimizer: torch.optim.Optimizer | None = None,
                          **kwargs: Any) -> None:
        self._note_lr(optimizer)

    def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                    **kwargs: Any) -> None:
        if not slurm_pilot.active():
            return
        if self._print_due is not None:  # no training forward seen: after the step, in both
            self._fingerprint(None)
        n, k = slurm_pilot.steps(), slurm_pilot.checkpoint_step()
        control.should_log = True  # every step, whatever logging_steps says
        if k is not None and state.global_step == k:
            control.should_save = True
        if n is not None and state.global_step >= n:
            control.should_training_stop = True

    def on_log(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
               logs: dict[str, float] | None = None, model: torch.nn.Module | None = None,
               **kwargs: Any) -> None:
        if not slurm_pilot.active() or not logs:
            return
        self._remember(kwargs, model)
        if "eval_loss" in logs:
            self._eval_loss(logs["eval_loss"])
        if "loss" not in logs or state.global_step <= self._reported:
            return
        self._flush()
        record = {"loss": logs["loss"], "step": state.global_step,
                  "grad_norm": logs.get("grad_norm"),
                  "lr": self._lr if self._lr is not None else logs.get("learning_rate")}
        tokens, (micro_batch, seq_len) = self._batches.tokens, self._batches.shape
        if not self._batches.seen:
            tokens = self._env_tokens(args)
        record.update(tokens=tokens or None, micro_batch=micro_batch, seq_len=seq_len)
        self._reported = state.global_step
        self._lr = None
        self._pending = record
        if not getattr(control, "should_evaluate", False):
            self._flush()

    def on_evaluate(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                    metrics: dict[str, float] | None = None, **kwargs: Any) -> None:
        if slurm_pilot.active() and metrics and "eval_loss" in metrics:
            self._eval_loss(metrics["eval_loss"])

    def on_save(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                **kwargs: Any) -> None:
        if not slurm_pilot.active():
            if slurm_pilot.bound():  # checkpoint-<step> is written: the one to resume from
                slurm_pilot.saved(state.global_step)
            return
        self._flush()
        if _glue.reference_saves(state.global_step):
            self._saved_due = state.global_step

    def on_train_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                     **kwargs: Any) -> None:
        if not slurm_pilot.active():
            return
        self._flush()
        _glue.finish()
        if self._print_due is not None:
            self._fingerprint(None)
        if self._saved_due is not None:  # no step after K ran
            step, self._saved_due = self._saved_due, None
            _glue.saved(step, **self._state(args, state, resumed=False))
        if self._hook is not None:
            self._hook.remove()
            self._hook = None

    # ----- helpers
    def _remember(self, kwargs, model):
        if model is not None:
            self._objects["model"] = model
        for name in ("optimizer", "lr_scheduler", "train_dataloader"):
            if kwargs.get(name) is not None:
                self._objects[name] = kwargs[name]

    def _note_lr(self, optimizer):
        groups = getattr(optimizer, "param_groups", None)
        if slurm_pilot.active() and groups:
            self._lr = groups[0].get("lr")

    def _fingerprint(self, batch):
        """The fingerprints due at the step after K, with the digest of its first batch."""
        (kind, step, args, state), self._print_due = self._print_due, None
        fields = self._state(args, state, resumed=kind == "restored")
        digest = _glue.batch_digest(batch, self._input_name) if batch is not None else None
        if digest is not None:
            fields["data_position"]["batch"] = digest  # the batch the step after K trains on
        (_glue.restored if kind == "restored" else _glue.saved)(step, **fields)

    def _before_forward(self, module, args, kwargs):
        if not module.training:
            return
        batch = kwargs if kwargs else args
        self._input_name = getattr(module, "main_input_name", "input_ids")
        if self._print_due is not None:
            # Before the forward: the state the step starts from, and its batch.
            self._fingerprint(batch)
        self._batches.add(batch, self._input_name)

    @staticmethod
    def _env_tokens(args):
        return _glue.env_tokens(getattr(args, "per_device_train_batch_size", None),
                                getattr(args, "gradient_accumulation_steps", 1) or 1)

    def _eval_loss(self, value):
        if self._pending is not None and self._pending.get("eval_loss") is None:
            self._pending["eval_loss"] = value
            self._flush()

    def _flush(self):
        record, self._pending = self._pending, None
        if record is None:
            return
        _glue.report(dict(record, model=self._objects.get("model"),
                          optimizer=self._objects.get("optimizer")))

    def _state(self, args, state, resumed):
        """The objects the step after K depends on, for the probe's fingerprints."""
        optimizer = self._objects.get("optimizer")
        accumulation = max(1, int(getattr(args, "gradient_accumulation_steps", 1) or 1))
        per_epoch, batches = _steps_per_epoch(args, self._objects.get("train_dataloader"))
        step = state.global_step
        if per_epoch is None:
            epoch, into = 0, step * accumulation
        else:
            epoch, into = step // per_epoch, min(batches, (step % per_epoch) * accumulation)
        if resumed and getattr(args, "ignore_data_skip", False):
            into = 0  # the Trainer starts the epoch from its first batch again
        return dict(model=self._objects.get("model"),
                    optimizer=_glue.inner(optimizer, "optimizer"),
                    scheduler=_glue.inner(self._objects.get("lr_scheduler"), "scheduler"),
                    scaler=getattr(optimizer, "scaler", None),
                    data_position={"epoch": epoch, "batches_into_epoch": into})


def _trainer_callback():
    try:
        from transformers import TrainerCallback
    except ImportError as e:
        raise ImportError("slurm_pilot.hf.PilotCallback needs transformers, which is not "
                          "installed: %s" % e) from e
    return TrainerCallback


_callback = _glue.LazyCallback(
    __name__, _Hooks, _trainer_callback, frameworks=("transformers",),
    doc="""Reports each optimizer step of a transformers Trainer to its pilot, sets the
    Trainer's arguments for the pilot and fingerprints the state around step K;
    a no-op outside a pilot. See the module's docstring.""")
_make_callback_class = _callback.make


def __getattr__(name: str) -> Any:  # PEP 562: transformers is imported on first use of PilotCallback
    return _callback.attribute(name)


_callback.make_if_imported()  # already imported by the program: no reason to wait
