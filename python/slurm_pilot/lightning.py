"""Pilot a Lightning 2.x program: three lines.

    import slurm_pilot.lightning
    trainer = L.Trainer(**slurm_pilot.lightning.trainer_kwargs(precision="bf16-mixed", ...))
    trainer.fit(model, datamodule=dm, ckpt_path=slurm_pilot.lightning.ckpt_path())

Inside a pilot trainer_kwargs() adds max_steps = PILOT_STEPS (the epochs
unbounded, so that the steps end the run), a PilotCallback and a
ModelCheckpoint that saves every PILOT_CHECKPOINT_STEP optimizer steps into
PILOT_CHECKPOINT_DIR as ``pilot-step=<step>.ckpt``, keeping every one
(save_top_k=-1); ckpt_path() is the reference's ``pilot-step=K.ckpt`` in the
resumed process. The callback reports every optimizer step (accumulated
micro-batches count as one: the mean of their losses, their tokens), with
the learning rate the optimizer stepped with, the gradient norm before
clipping and the model's and optimizer's sizes, and fingerprints the state
the step after K starts from, in both processes, as its first batch begins.

Lightning restores the weights, optimizer, schedulers, precision plugin and
loop counters, but neither the random generators nor the position of a
data loader that has no state_dict(): a program saves those itself (its
LightningModule's on_save_checkpoint / on_load_checkpoint), and the pilot
tells when it does not.

Outside a pilot trainer_kwargs() returns its arguments, ckpt_path() its
default, and the callback does nothing. ``lightning.pytorch`` is imported on
first use (``pytorch_lightning`` where it is not installed), never by
``import slurm_pilot``. See pilot-program(7).
"""

from __future__ import annotations

import glob
import os
import re
import sys
from typing import TYPE_CHECKING, Any

import slurm_pilot
from slurm_pilot import _glue

if TYPE_CHECKING:
    import lightning.pytorch as pl
    import torch

__all__ = ["PilotCallback", "trainer_kwargs", "ckpt_path", "checkpoint_callback"]

FILENAME = "pilot-{step}"  # ModelCheckpoint writes pilot-step=<global step>.ckpt


def _lightning() -> Any:
    """lightning.pytorch, else pytorch_lightning."""
    try:
        import lightning.pytorch as pl
    except ImportError:
        try:
            import pytorch_lightning as pl
        except ImportError as e:
            raise ImportError("slurm_pilot.lightning needs lightning (or pytorch_lightning), "
                              "which is not installed: %s" % e) from e
    return pl


def ckpt_path(default: str | None = None) -> str | None:
    """The checkpoint for ``trainer.fit(..., ckpt_path=...)``: in the resumed process of a pilot,
    the reference's save of step K in PILOT_RESUME_DIR; in a requeued bound run, its save of
    PILOT_RESUME_STEP there (the newest complete one); else ``default``."""
    directory = slurm_pilot.resume_dir()
    if not directory:
        return default
    k = slurm_pilot.resume_step()
    saves = {}
    for path in glob.glob(os.path.join(glob.escape(directory), "pilot-step=*.ckpt")):
        m = re.fullmatch(r"pilot-step=(\d+)(-v\d+)?\.ckpt", os.path.basename(path))
        if m:
            saves.setdefault(int(m.group(1)), []).append(path)
    if k is None and saves:
        k = max(saves)
    expected = os.path.join(directory, "pilot-step=%s.ckpt" % k)
    if os.path.exists(expected) or k not in saves:
        return expected  # where it is, or where it should have been (fit() names it)
    return sorted(saves[k])[0]


def checkpoint_callback() -> pl.callbacks.ModelCheckpoint | None:
    """The ModelCheckpoint of a pilot (every K optimizer steps into PILOT_CHECKPOINT_DIR, all
    kept), or None outside one. In a bound run, each save, once written, is marked the one to
    resume from (slurm_pilot.saved)."""
    k, directory = slurm_pilot.checkpoint_step(), slurm_pilot.checkpoint_dir()
    if not (slurm_pilot.active() or slurm_pilot.bound()) or not k or not directory:
        return None
    pl = _lightning()
    cls = _marking_checkpoint_class(pl) if slurm_pilot.bound() else pl.callbacks.ModelCheckpoint
    return cls(dirpath=directory, filename=FILENAME, every_n_train_steps=k,
               save_top_k=-1, save_last=False, save_on_train_epoch_end=False,
               auto_insert_metric_name=True)


def _marking_checkpoint_class(pl: Any) -> type:
    """ModelCheckpoint whose every save, once written (on every rank), marks its step complete."""

    class PilotModelCheckpoint(pl.callbacks.ModelCheckpoint):
        def _save_checkpoint(self, trainer: Any, filepath: str) -> None:
            super()._save_checkpoint(trainer, filepath)
            slurm_pilot.saved(trainer.global_step)

    return PilotModelCheckpoint


def trainer_kwargs(**kwargs: Any) -> dict[str, Any]:
    """The Trainer's keyword arguments with the pilot's added: ``L.Trainer(**trainer_kwargs(...))``.
    In a bound run, its steps and its saves (no callback of the pilot's). Outside both,
    ``kwargs`` unchanged."""
    if not slurm_pilot.active() and not slurm_pilot.bound():
        return kwargs
    out = dict(kwargs)
    n = slurm_pilot.steps()
    if n:
        out["max_steps"] = n
        out["max_epochs"] = -1  # the steps end the run, however short an epoch is
    callbacks = out.get("callbacks") or []
    if not isinstance(callbacks, (list, tuple)):
        callbacks = [callbacks]
    callbacks = list(callbacks) + ([] if slurm_pilot.bound() else [_make_callback_class()()])
    ckpt = checkpoint_callback()
    if ckpt is not None:
        callbacks.append(ckpt)
        out["enable_checkpointing"] = True
    out["callbacks"] = callbacks
    return out


class _Hooks:
    """The callback's work, without Lightning (PilotCallback adds lightning's Callback).

    grad_norm: compute the gradients' norm before each optimizer step (one
        reduction on the device). eval_loss: the name of a logged metric
        (``trainer.callback_metrics``) to report as the step's eval_loss when
        a validation ran after it.
    """

    def __init__(self, grad_norm: bool = True, eval_loss: str | None = None) -> None:
        self._grad_norm_on, self._eval_key = grad_norm, eval_loss
        self._reported = 0
        self._in_step = False
        self._loss = None
        self._batches = _glue.Batches()
        self._lr = None
        self._grad_norm = None
        self._pending = None
        self._restore_due = False
        self._saved_done = False

    # ----- Lightning hooks
    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if slurm_pilot.active():
            self._restore_due = _glue.resuming()
            self._reported = trainer.global_step  # the step restored, or 0

    def on_train_batch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any,
                             batch_idx: int, *args: Any) -> None:
        if not slurm_pilot.active():
            return
        if not self._in_step:  # the first micro-batch of an optimizer step
            self._flush()
            self._in_step = True
            self._loss = None
            self._batches.begin()
            step = trainer.global_step
            if self._restore_due:
                # Lightning restored the weights, optimizer, schedulers and loops before
                # on_train_start, and the module's on_load_checkpoint ran before them: the
                # state the step after K starts from, with its first batch.
                self._restore_due = False
                if step > 0:  # 0: fit() was not given the checkpoint
                    _glue.restored(step, **self._state(trainer, pl_module, batch, batch_idx))
            elif not self._saved_done and step > 0 and _glue.reference_saves(step):
                # The reference at the same point: its save of step K written
                # (ModelCheckpoint runs last in on_train_batch_end), the next step begins.
                self._saved_done = True
                _glue.saved(step, **self._state(trainer, pl_module, batch, batch_idx))
        self._batches.add(batch)

    def on_before_optimizer_step(self, trainer: pl.Trainer, pl_module: pl.LightningModule,
                                 optimizer: torch.optim.Optimizer, *args: Any) -> None:
        if not slurm_pilot.active():
            return
        if optimizer.param_groups:
            self._lr = optimizer.param_groups[0].get("lr")
        if self._grad_norm_on:
            try:
                self._grad_norm = _glue.grad_norm(pl_module.parameters())
            except RuntimeError:
                self._grad_norm = None

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any,
                           batch: Any, batch_idx: int, *args: Any) -> None:
        if not slurm_pilot.active():
            return
        loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(loss, torch.Tensor):
            loss = loss.detach()
            if getattr(pl_module, "automatic_optimization", True):
                # Lightning divides each micro-batch's loss by accumulate_grad_batches:
                # their sum is the step's mean loss.
                self._loss = loss if self._loss is None else self._loss + loss
            else:
                self._loss = loss
        elif loss is not None:
            self._loss = loss
        step = trainer.global_step
        if step <= self._reported:
            return  # accumulating: no optimizer step yet
        self._in_step = False
        self._reported = step
        tokens = self._batches.tokens if self._batches.seen else self._env_tokens(trainer)
        micro_batch, seq_len = self._batches.shape
        self._pending = dict(loss=self._loss, tokens=tokens or None, step=step,
                             lr=self._lr, grad_norm=self._grad_norm, micro_batch=micro_batch,
                             seq_len=seq_len, model=pl_module, optimizer=self._optimizer(trainer))
        self._lr = self._grad_norm = None
        if self._eval_key is None:
            self._flush()

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not slurm_pilot.active() or self._pending is None or self._eval_key is None:
            return
        if trainer.sanity_checking:
            return
        value = trainer.callback_metrics.get(self._eval_key)
        if value is not None:
            self._pending["eval_loss"] = value
        self._flush()

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not slurm_pilot.active():
            return
        self._flush()
        _glue.finish()
        step = trainer.global_step
        if not self._saved_done and _glue.reference_saves(step):  # no step after K ran
            self._saved_done = True
            _glue.saved(step, **self._state(trainer, pl_module, None, None))

    # ----- helpers
    def _flush(self):
        record, self._pending = self._pending, None
        if record is None or record["loss"] is None:
            return
        _glue.report(record)

    @staticmethod
    def _optimizer(trainer):
        optimizers = getattr(trainer, "optimizers", None) or []
        return _glue.inner(optimizers[0], "optimizer", "_optimizer") if optimizers else None

    @staticmethod
    def _env_tokens(trainer):
        return _glue.env_tokens(None, getattr(trainer, "accumulate_grad_batches", 1) or 1)

    def _state(self, trainer, pl_module, batch, batch_idx):
        """The objects the step after K depends on, for the probe's fingerprints."""
        configs = getattr(trainer, "lr_scheduler_configs", None) or []
        scheduler = configs[0].scheduler if configs else None
        position = {"epoch": trainer.current_epoch}
        digest = _glue.batch_digest(batch) if batch is not None else None
        if digest is not None:
            position["batch"] = digest  # the batch the step after K trains on
        elif batch_idx is not None:
            position["batch_idx"] = batch_idx
        return dict(model=pl_module, optimizer=self._optimizer(trainer), scheduler=scheduler,
                    scaler=getattr(trainer.precision_plugin, "scaler", None),
                    data_position=position)


_callback = _glue.LazyCallback(
    __name__, _Hooks, lambda: _lightning().Callback,
    frameworks=("lightning.pytorch", "pytorch_lightning"),
    doc="""Reports each optimizer step of a Lightning Trainer to its pilot and fingerprints
    the state around step K; a no-op outside a pilot. See the module's docstring.""")
_make_callback_class = _callback.make


def __getattr__(name: str) -> Any:  # PEP 562: Lightning is imported on first use of PilotCallback
    return _callback.attribute(name)


_callback.make_if_imported()  # already imported by the program: no reason to wait
