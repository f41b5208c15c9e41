"""Measuring training throughput for a report's samplesPerSecond: the samples the whole gang
trained between two reports, over the time between them."""

from __future__ import annotations

import time
from typing import Any, Callable, Optional


class Throughput:
    """Counts samples trained and turns them into samples per second.

        meter = convoy.Throughput()        # the clock starts
        for inputs, labels in loader:
            ...
            meter.add(len(labels) * world_size)
        convoy.report(epoch=epoch, samples_per_second=meter.rate())

    Count the whole gang's samples (each rank's batch times the number of ranks, or the global
    batch): the operator compares the gang's throughput at each size. rate() is the samples added
    since the window began (construction, start() or the previous rate()) over the seconds since,
    and begins a new window; None when no samples were added. start() begins a window without a
    rate, to leave out time that is not training (an evaluation, a checkpoint, a restart).
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.start()

    def start(self) -> None:
        self._since = self.clock()
        self._samples = 0

    def add(self, samples: Optional[int]) -> None:
        """Adds samples trained; None (a batch of unknown size) is ignored."""
        if samples is not None and samples > 0:
            self._samples += samples

    def rate(self) -> Optional[float]:
        now = self.clock()
        elapsed, samples = now - self._since, self._samples
        self._since, self._samples = now, 0
        if samples <= 0 or elapsed <= 0:
            return None
        return samples / elapsed


def batch_size(batch: Any) -> Optional[int]:
    """The number of samples in a batch as data loaders give them: a tensor or array (its first
    dimension), or a list, tuple or dict of them (its first one); None when that is not known."""
    for _ in range(8):  # nested at most this deep
        shape = getattr(batch, "shape", None)
        if shape is not None:
            try:
                return int(shape[0]) if len(shape) > 0 else None
            except (TypeError, ValueError):
                return None
        if isinstance(batch, dict):
            batch = next(iter(batch.values()), None)
        elif isinstance(batch, (list, tuple)):
            batch = batch[0] if batch else None
        else:
            return None
    return None
