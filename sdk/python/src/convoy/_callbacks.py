"""What the framework callbacks (convoy.lightning, convoy.transformers, convoy.keras) share: the
values a framework logged, as a report's metrics, and the checkpoint to resume from."""

from __future__ import annotations

import logging
import os
from typing import Any, Dict, Mapping, Optional

from . import _preempt
from ._checkpoint import ENV_RESUME_FROM, resume_from

log = logging.getLogger("convoy")

# The operator's limits on a report (operator/pkg/progress/protocol.go): at most MAX_OTHERS metrics
# besides loss and accuracy, and names of 1 to MAX_NAME characters.
MAX_OTHERS = 32
MAX_NAME = 63
POLICY_METRICS = ("loss", "accuracy")


class Metrics:
    """The latest value of each metric a framework logged, under Convoy's names.

    names maps the framework's names to Convoy's ({"val_acc": "accuracy"}); the others keep theirs.
    When several map to one name, one in names wins over one that kept its name, and a later entry
    of names over an earlier one: a name set from a higher one is not set again from a lower one (so
    "loss" stays the validation loss once there is one). Left out: values that are not single
    numbers, the framework's own "epoch" and "step" counters (they are the report's fields), names
    the operator refuses, and metrics past the 32 it takes besides loss and accuracy.
    """

    def __init__(self, names: Optional[Mapping[str, str]] = None):
        self.names = dict(names or {})
        self._rank = {key: i for i, key in enumerate(self.names)}
        self._held: Dict[str, int] = {}
        self.values: Dict[str, float] = {}

    def update(self, logged: Optional[Mapping[str, Any]]) -> Dict[str, float]:
        """Takes in newly logged values; returns all the latest ones."""
        for key, value in dict(logged or {}).items():
            if key in ("epoch", "step") and key not in self.names:
                continue
            name = self.names.get(key, key)
            rank = self._rank.get(key, -1)
            if not isinstance(name, str) or not 0 < len(name) <= MAX_NAME or rank < self._held.get(name, -1):
                continue
            number = _number(value)
            if number is None:
                continue
            if name not in self.values and name not in POLICY_METRICS and self._others() >= MAX_OTHERS:
                continue
            self.values[name] = number
            self._held[name] = rank
        return dict(self.values)

    def _others(self) -> int:
        return sum(1 for name in self.values if name not in POLICY_METRICS)


def _number(value: Any) -> Optional[float]:
    """value as a float when it is a single number (a Python, NumPy or one-element tensor value)."""
    if isinstance(value, (str, bytes)):
        return None
    try:
        return float(value)
    except Exception:  # a tensor of several elements, None, anything else
        return None


# What a step boundary asks of a callback, from should_checkpoint() and preempted(): nothing, a
# checkpoint (the operator asked for one), or a last checkpoint and then the end of the process
# (SIGTERM). Ordered, so that ranks agree on the most urgent with a maximum.
NOTHING, CHECKPOINT, PREEMPTED = 0, 1, 2


def wanted() -> int:
    """What this process is asked to do at this step boundary (NOTHING, CHECKPOINT or PREEMPTED)."""
    if not _preempt.should_checkpoint():
        return NOTHING
    return PREEMPTED if _preempt.preempted() else CHECKPOINT


def checkpoint_done(what: int) -> None:
    """After the checkpoint a step boundary asked for: the operator's request is met; on SIGTERM the
    process ends with PREEMPTED_EXIT_CODE (SystemExit, so the framework's own clean-up runs), as the
    signal would have ended it: a worker that exits 0 counts as succeeded."""
    _preempt.checkpoint_taken()
    if what == PREEMPTED:
        log.warning("convoy: last checkpoint saved; exiting with %d", _preempt.PREEMPTED_EXIT_CODE)
        raise SystemExit(_preempt.PREEMPTED_EXIT_CODE)


def resume_path() -> Optional[str]:
    """convoy.resume_from() when it is a file or directory on this machine, else None (with a
    warning when CONVOY_RESUME_FROM names something that is not there)."""
    path = resume_from()
    if path is None:
        return None
    if os.path.exists(path):
        return path
    log.warning("convoy: %s=%s is not a file or directory here; not resuming", ENV_RESUME_FROM, path)
    return None


def callback_class(reporting: type, base: Optional[type], missing: str, doc: str) -> type:
    """A framework module's ConvoyCallback: reporting's hooks on the framework's callback class base,
    or, where the framework did not import (base None), a stand-in whose construction raises
    ImportError(missing)."""
    if base is None:

        class ConvoyCallback(reporting):  # type: ignore[valid-type,misc]
            def __init__(self, *args: Any, **kwargs: Any):
                raise ImportError(missing)

    else:

        class ConvoyCallback(reporting, base):  # type: ignore[valid-type,misc]
            def __init__(self, metric_names: Optional[Mapping[str, str]] = None):
                super().__init__(metric_names)
                _preempt.watch()  # SIGTERM is watched from here on (the main thread, as a rule)

    ConvoyCallback.__doc__ = doc
    ConvoyCallback.__module__ = reporting.__module__
    return ConvoyCallback
