"""A Keras callback that reports model.fit's progress to the operator.

    import convoy.keras
    model.fit(x, y, epochs=10, validation_data=(x_val, y_val), callbacks=[convoy.keras.ConvoyCallback()])

Works with Keras 3 (keras) or TensorFlow's tf.keras. This module imports without either;
constructing ConvoyCallback then raises ImportError.
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Optional

from . import _callbacks, checkpoint_dir, checkpoint_saved, rank, report

_missing = ""  # why the framework did not import
try:
    import keras as _keras
except Exception as _error:  # not installed, or broken (a Keras 3 without its backend): said when constructed
    try:
        from tensorflow import keras as _keras
    except Exception:
        _keras = None
        _missing = "convoy.keras.ConvoyCallback needs Keras (pip install keras), which did not import: %s" % _error

__all__ = ["DEFAULT_METRIC_NAMES", "ConvoyCallback"]

# The validation results under the names the job's success policy watches, over the training ones
# (already "loss" and "accuracy") when model.fit validates.
DEFAULT_METRIC_NAMES = {"val_loss": "loss", "val_accuracy": "accuracy"}


class _Reporting:
    """ConvoyCallback's hooks, which need nothing of Keras but what they are given."""

    def __init__(self, metric_names: Optional[Mapping[str, str]] = None):
        super().__init__()
        self._metrics = _callbacks.Metrics(DEFAULT_METRIC_NAMES if metric_names is None else metric_names)
        self._epoch: Optional[int] = None
        self._epoch_index = 0  # the epoch fit is in, counted from 0: the epochs completed

    def on_epoch_begin(self, epoch: int, logs: Optional[Mapping[str, Any]] = None) -> None:
        self._epoch_index = epoch

    def on_train_batch_end(self, batch: int, logs: Optional[Mapping[str, Any]] = None) -> None:
        what = _callbacks.wanted()
        if what == _callbacks.NOTHING:
            return
        # Asked for a checkpoint (SIGTERM, the operator, the interval): the model as this batch left it, saved by rank 0.
        directory = checkpoint_dir()
        if directory is None:
            _callbacks.log.warning("convoy: no checkpoint directory (convoy.checkpoint_dir()); not saving")
        elif rank() == 0:
            path = os.path.join(os.path.abspath(directory), "convoy-epoch=%d-batch=%d.keras" % (self._epoch_index, batch))
            self.model.save(path)
            checkpoint_saved(path, self._epoch_index)
        if what == _callbacks.PREEMPTED:
            self.model.stop_training = True
        _callbacks.checkpoint_done(what)

    def on_epoch_end(self, epoch: int, logs: Optional[Mapping[str, Any]] = None) -> None:
        self._epoch = epoch + 1  # Keras counts epochs from 0
        report(epoch=self._epoch, total_epochs=self._total_epochs(), metrics=self._metrics.update(logs))

    def on_train_end(self, logs: Optional[Mapping[str, Any]] = None) -> None:
        report(epoch=self._epoch, total_epochs=self._total_epochs(), metrics=self._metrics.update(logs), final=True)

    def _total_epochs(self) -> Optional[int]:
        n = (getattr(self, "params", None) or {}).get("epochs")
        return n if isinstance(n, int) and n > 0 else None


ConvoyCallback = _callbacks.callback_class(_Reporting, _keras.callbacks.Callback if _keras is not None else None, _missing, """Reports model.fit's progress to the operator.

At the end of each epoch it reports the epochs completed, the epochs fit runs and the
epoch's logs (loss and the compiled metrics, with val_ ones when fit validates), renamed by
metric_names (default DEFAULT_METRIC_NAMES: val_loss as loss and val_accuracy as accuracy,
which the job's success policy watches; other names are kept); and a final report when
training ends. Only rank 0 reports (convoy.rank()).

When convoy.should_checkpoint() turns True (SIGTERM, the operator's request, the checkpoint
interval), rank 0 saves the model with model.save at the end of the batch, as
convoy-epoch=<E>-batch=<B>.keras in convoy.checkpoint_dir(), and reports it; after SIGTERM the
process ends with convoy.PREEMPTED_EXIT_CODE.
""")
