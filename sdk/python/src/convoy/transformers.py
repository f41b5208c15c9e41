"""A Hugging Face transformers callback that reports a Trainer's progress and checkpoints to the
operator.

    import convoy.transformers
    import transformers
    args = transformers.TrainingArguments(output_dir=convoy.transformers.output_dir() or "out",
                                          eval_strategy="epoch", save_strategy="epoch")
    trainer = transformers.Trainer(model=model, args=args, train_dataset=train, eval_dataset=val,
                                   callbacks=[convoy.transformers.ConvoyCallback()])
    trainer.train(resume_from_checkpoint=convoy.transformers.resume_path())

This module imports without transformers; constructing ConvoyCallback then raises ImportError.
"""

from __future__ import annotations

import math
import os
from typing import Any, Mapping, Optional

from . import _callbacks, checkpoint_dir, checkpoint_saved, report
from ._throughput import Throughput

_missing = ""  # why the framework did not import
try:
    import transformers as _transformers
except Exception as _error:  # not installed, or broken: said when the callback is constructed
    _transformers = None
    _missing = ("convoy.transformers.ConvoyCallback needs transformers (pip install transformers), which did not import: %s"
                % _error)

__all__ = ["DEFAULT_METRIC_NAMES", "ConvoyCallback", "output_dir", "resume_path"]

# The Trainer's evaluation results under the names the job's success policy watches; its training
# loss is already "loss". An evaluation loss, once there is one, takes "loss" over the training loss.
DEFAULT_METRIC_NAMES = {"eval_loss": "loss", "eval_accuracy": "accuracy"}


def output_dir() -> Optional[str]:
    """The directory to give TrainingArguments as output_dir, where the Trainer writes its
    checkpoint-<step> directories: convoy.checkpoint_dir(), created when missing; None without pvc
    or nfs checkpoint storage."""
    return checkpoint_dir()


def resume_path() -> Optional[str]:
    """The checkpoint directory to resume from, convoy.resume_from(), when it is there; None
    otherwise, so that trainer.train(resume_from_checkpoint=convoy.transformers.resume_path())
    starts afresh without one."""
    return _callbacks.resume_path()


class _Reporting:
    """ConvoyCallback's hooks, which need nothing of transformers but the objects they are given."""

    def __init__(self, metric_names: Optional[Mapping[str, str]] = None):
        super().__init__()
        self._metrics = _callbacks.Metrics(DEFAULT_METRIC_NAMES if metric_names is None else metric_names)
        # Set at the end of an epoch, whose report waits for the logs, evaluation and checkpoint
        # that follow it, until the next epoch begins or training ends.
        self._epoch_ended = False
        self._checkpoint: Optional[str] = None  # the latest checkpoint reported
        self._asked = _callbacks.NOTHING  # what the checkpoint being saved at this step was asked for
        self._throughput = Throughput()  # training steps, not evaluations
        self._epoch_rate: Optional[float] = None  # the samples per second up to the end of the epoch

    def on_log(self, args: Any, state: Any, control: Any, logs: Optional[Mapping[str, Any]] = None, **kwargs: Any) -> None:
        metrics = self._metrics.update(logs)
        if not self._epoch_ended and _leader(state):
            report(epoch=_epochs(state), total_epochs=_total_epochs(args, state), step=state.global_step, metrics=metrics,
                   samples_per_second=self._throughput.rate())

    def on_epoch_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._epoch_ended = True
        self._epoch_rate = self._throughput.rate()

    def on_epoch_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._epoch_ended:
            self._epoch_ended = False
            if _leader(state):
                report(epoch=_epochs(state), total_epochs=_total_epochs(args, state), step=state.global_step,
                       metrics=dict(self._metrics.values), samples_per_second=self._epoch_rate)
        self._throughput.start()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._throughput.add(_samples_per_step(args))
        # Asked for a checkpoint (SIGTERM, the operator, the interval): the Trainer saves one right after this hook.
        self._asked = _agree(_callbacks.wanted())
        if self._asked != _callbacks.NOTHING:
            control.should_save = True

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        path = os.path.abspath(os.path.join(args.output_dir, "checkpoint-%d" % state.global_step))
        if _leader(state) and os.path.isdir(path) and path != self._checkpoint:  # not again when saved twice at one step
            self._checkpoint = path
            best = getattr(state, "best_model_checkpoint", None)
            checkpoint_saved(path, _epochs(state), keep=(best,) if best else ())
        asked, self._asked = self._asked, _callbacks.NOTHING
        if asked != _callbacks.NOTHING:
            _callbacks.checkpoint_done(asked)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._epoch_ended = False
        if _leader(state):
            report(epoch=_epochs(state), total_epochs=_total_epochs(args, state), step=state.global_step,
                   metrics=dict(self._metrics.values), final=True)


def _agree(what: int) -> int:
    """The most urgent of what every process is asked (a maximum over them, one small all-reduce
    per step when torch.distributed runs several), so that all save together and stop together."""
    try:
        import torch.distributed as dist
    except ImportError:
        return what
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() <= 1:
        return what
    import torch

    device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")
    agreed = torch.tensor(what, device=device)
    dist.all_reduce(agreed, op=dist.ReduceOp.MAX)
    return int(agreed.item())


def _samples_per_step(args: Any) -> Optional[int]:
    """The samples one optimizer step of the whole gang trains: the per-device batch times the
    gradient accumulation steps and the processes; None when args do not say."""
    try:
        batch = getattr(args, "train_batch_size", None) or args.per_device_train_batch_size
        return int(batch) * int(getattr(args, "gradient_accumulation_steps", 1) or 1) * int(getattr(args, "world_size", 1) or 1)
    except (AttributeError, TypeError, ValueError):
        return None


def _leader(state: Any) -> bool:
    return bool(getattr(state, "is_world_process_zero", True))


def _epochs(state: Any) -> int:
    """The epochs completed: state.epoch is fractional within an epoch (1.5 halfway through the
    second)."""
    return int(math.floor((state.epoch or 0) + 1e-9))


def _total_epochs(args: Any, state: Any) -> Optional[int]:
    n = getattr(state, "num_train_epochs", None) or getattr(args, "num_train_epochs", None)
    if not n or n <= 0:
        return None
    return int(math.ceil(n))


ConvoyCallback = _callbacks.callback_class(_Reporting, _transformers.TrainerCallback if _transformers is not None else None, _missing, """Reports a transformers Trainer's progress and checkpoints to the operator.

Each log of the Trainer's (every logging_steps, or each epoch) is reported with the epochs
completed, the number of epochs, the global step, the samples per second trained since the
previous report (args.train_batch_size times gradient_accumulation_steps and world_size a
step) and the latest value of each logged metric, renamed by metric_names (default DEFAULT_METRIC_NAMES: eval_loss as loss and
eval_accuracy as accuracy, which the job's success policy watches; other names are kept).
The logs, evaluation and checkpoint at the end of an epoch go in one report for that epoch.
Each checkpoint-<step> directory the Trainer saves in args.output_dir is reported with
checkpoint_saved (state.best_model_checkpoint is never deleted by retention), and a final
report is sent when training ends. Only the main process (state.is_world_process_zero)
reports.

When convoy.should_checkpoint() turns True (SIGTERM, the operator's request, the checkpoint
interval), it has the Trainer save a checkpoint at the end of the step and reports it; after
SIGTERM it ends the process with convoy.PREEMPTED_EXIT_CODE.
""")
