"""A Lightning callback that reports a Trainer's progress and checkpoints to the operator.

    import convoy
    import convoy.lightning
    import lightning.pytorch as pl
    trainer = pl.Trainer(
        max_epochs=10,
        callbacks=[convoy.lightning.ConvoyCallback(metric_names={"val_acc": "accuracy"}),
                   pl.callbacks.ModelCheckpoint(dirpath=convoy.checkpoint_dir())],
    )
    trainer.fit(model, train, val, ckpt_path=convoy.lightning.resume_path())

Works with the lightning package (lightning.pytorch) or pytorch_lightning. This module imports
without either; constructing ConvoyCallback then raises ImportError.
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Optional, Tuple

from . import _callbacks, _preempt, checkpoint_dir, checkpoint_saved, report
from ._throughput import Throughput, batch_size

_missing = ""  # why the framework did not import
try:
    import lightning.pytorch as _pl
except Exception as _error:  # not installed, or broken: said when the callback is constructed
    try:
        import pytorch_lightning as _pl
    except Exception:
        _pl = None
        _missing = ("convoy.lightning.ConvoyCallback needs Lightning (pip install lightning), which did not import: %s"
                    % _error)

__all__ = ["ConvoyCallback", "resume_path"]


def resume_path() -> Optional[str]:
    """The checkpoint to resume from, convoy.resume_from(), when it is a file or directory here;
    None otherwise, so that trainer.fit(..., ckpt_path=convoy.lightning.resume_path()) starts
    afresh without one."""
    return _callbacks.resume_path()


class _Reporting:
    """ConvoyCallback's hooks, which need nothing of Lightning but the trainer they are given."""

    def __init__(self, metric_names: Optional[Mapping[str, str]] = None):
        super().__init__()
        self._metrics = _callbacks.Metrics(metric_names)
        self._checkpoint: Optional[Tuple[str, int]] = None  # the latest checkpoint known: path, mtime
        self._trained = False  # whether a training batch ran since the last epoch report
        self._saved_step: Optional[int] = None  # the step of the last checkpoint saved on request
        self._throughput = Throughput()  # the epoch's training batches, not its validation

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        # A checkpoint already there (the one fit resumed from) is not reported again.
        self._checkpoint = _latest_checkpoint(trainer)
        self._trained = False

    def on_train_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        # ModelCheckpoint saves in on_train_epoch_end after the other callbacks, so the checkpoint of
        # the epoch before is seen here, trainer.current_epoch epochs completed.
        if _leader(trainer):
            self._report_checkpoint(trainer, trainer.current_epoch)
        self._throughput.start()

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        self._trained = True
        size = batch_size(batch)
        if size is not None:  # every rank trains a batch of this size
            self._throughput.add(size * getattr(trainer, "world_size", 1))
        what = _agree(trainer, _callbacks.wanted())
        if what != _callbacks.NOTHING:
            self._save_now(trainer)
            _callbacks.checkpoint_done(what)

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        # Lightning's own SIGTERM handling (SIGTERMException, a SystemExit) ends fit after a batch or
        # a validation that our on_train_batch_end did not see the signal at: save there when no
        # other rank has to take part, and exit as preempted, not with 0.
        if not isinstance(exception, SystemExit) or not _preempt.preempted():
            return
        if getattr(trainer, "world_size", 1) == 1 and self._saved_step != trainer.global_step:
            self._save_now(trainer)
        if not exception.code:
            exception.code = _preempt.PREEMPTED_EXIT_CODE

    def _save_now(self, trainer: Any) -> None:
        """Saves a checkpoint of the step just ended with trainer.save_checkpoint (on every rank: it
        waits for the others) in the ModelCheckpoint's directory or else convoy.checkpoint_dir(), and
        reports it."""
        self._saved_step = trainer.global_step
        callback = getattr(trainer, "checkpoint_callback", None)
        directory = getattr(callback, "dirpath", None) or checkpoint_dir()
        if not directory:
            _callbacks.log.warning("convoy: no checkpoint directory (ModelCheckpoint's dirpath or convoy.checkpoint_dir()); not saving")
            return
        path = os.path.abspath(os.path.join(directory, "convoy-epoch=%d-step=%d.ckpt" % (trainer.current_epoch, trainer.global_step)))
        trainer.save_checkpoint(path)
        if _leader(trainer):
            checkpoint_saved(path, trainer.current_epoch, keep=_best(trainer))

    def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        if not _leader(trainer):
            return
        epoch = trainer.current_epoch + 1  # current_epoch counts completed epochs after this hook
        if self._trained:  # not an epoch that ended before a restart, restored from its checkpoint
            self._trained = False
            metrics = self._metrics.update(trainer.callback_metrics)
            report(epoch=epoch, total_epochs=_total_epochs(trainer), step=trainer.global_step, metrics=metrics,
                   samples_per_second=self._throughput.rate())
        self._report_checkpoint(trainer, epoch)

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        if not _leader(trainer):
            return
        epoch = trainer.current_epoch
        self._report_checkpoint(trainer, epoch)
        metrics = self._metrics.update(trainer.callback_metrics)
        report(epoch=epoch, total_epochs=_total_epochs(trainer), step=trainer.global_step, metrics=metrics, final=True)

    def _report_checkpoint(self, trainer: Any, epoch: int) -> None:
        latest = _latest_checkpoint(trainer)
        if latest is not None and latest != self._checkpoint:
            self._checkpoint = latest
            checkpoint_saved(os.path.abspath(latest[0]), epoch, keep=_best(trainer))


def _leader(trainer: Any) -> bool:
    return getattr(trainer, "global_rank", 0) == 0


def _agree(trainer: Any, what: int) -> int:
    """The most urgent of what the ranks are asked, so that all save together and stop together:
    with several ranks, one reduction per step (strategy.reduce_boolean_decision), a second one
    when a checkpoint is asked for."""
    if getattr(trainer, "world_size", 1) <= 1:
        return what
    decide = trainer.strategy.reduce_boolean_decision
    if not decide(what != _callbacks.NOTHING, all=False):
        return _callbacks.NOTHING
    return _callbacks.PREEMPTED if decide(what == _callbacks.PREEMPTED, all=False) else _callbacks.CHECKPOINT


def _best(trainer: Any) -> Tuple[str, ...]:
    """The ModelCheckpoint's best checkpoint, which retention leaves alone."""
    path = getattr(getattr(trainer, "checkpoint_callback", None), "best_model_path", "")
    return (path,) if path else ()


def _total_epochs(trainer: Any) -> Optional[int]:
    n = getattr(trainer, "max_epochs", None)
    return n if isinstance(n, int) and n > 0 else None


def _latest_checkpoint(trainer: Any) -> Optional[Tuple[str, int]]:
    """The file the trainer's ModelCheckpoint wrote last, as (path, modification time): its
    last_model_path (save_last) or else its best_model_path, when that is there."""
    callback = getattr(trainer, "checkpoint_callback", None)
    if callback is None:
        return None
    path = getattr(callback, "last_model_path", "") or getattr(callback, "best_model_path", "")
    if not path:
        return None
    try:
        return path, os.stat(path).st_mtime_ns
    except (OSError, ValueError):  # not there (yet, or any more), or not a local path
        return None


ConvoyCallback = _callbacks.callback_class(_Reporting, _pl.Callback if _pl is not None else None, _missing, """Reports a Lightning Trainer's progress and checkpoints to the operator.

At the end of each training epoch it reports the epochs completed, trainer.max_epochs, the
global step, the epoch's training samples per second (the first dimension of each batch, a
tensor or a list, tuple or dict of them, times trainer.world_size) and trainer.callback_metrics
(what the LightningModule logged with self.log) as numbers, renamed by metric_names: {"val_acc": "accuracy"} reports val_acc as accuracy, which
the job's success policy watches, as it does loss; other names are kept. Each checkpoint the
trainer's ModelCheckpoint writes (its last_model_path, or else its best_model_path) is
reported with checkpoint_saved once the file is there (its best_model_path is never deleted
by retention), and a final report is sent when training ends. Only the process of global
rank 0 reports.

When convoy.should_checkpoint() turns True (SIGTERM, the operator's request, the checkpoint
interval), it saves a checkpoint at the end of the training batch, convoy-epoch=<E>-step=<S>.ckpt
in the ModelCheckpoint's dirpath or else convoy.checkpoint_dir(), and reports it; after SIGTERM
it ends the process with convoy.PREEMPTED_EXIT_CODE.
""")
