"""Preemption: SIGTERM (the kubelet stopping the pod, which then has terminationGracePeriodSeconds
before SIGKILL) makes should_checkpoint() and preempted() True and runs the callbacks registered
with on_preempt; a checkpoint request in a reply of the operator's progress endpoint, or on rank 0
CONVOY_CHECKPOINT_INTERVAL_SECONDS passed since its latest checkpoint, makes should_checkpoint()
True until the next checkpoint_saved.

The handler is installed the first time on_preempt, should_checkpoint or preempted is called (or a
framework callback is constructed), from the main thread: Python runs signal handlers there only,
and signal.signal can only be called there. A handler installed before is called after the
callbacks; the default action (ending the process) is not taken, the training code ends itself once
it has saved its last checkpoint."""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time
from typing import Any, Callable, List, Optional

from ._checkpoint import ENV_INTERVAL, checkpoint_interval

log = logging.getLogger("convoy")

# The exit code of a process that stopped because of SIGTERM, as if the signal had ended it: the
# operator counts a worker that exits 0 as succeeded, so a preempted one must not.
PREEMPTED_EXIT_CODE = 128 + signal.SIGTERM

_lock = threading.RLock()  # reentrant: the handler may run while the main thread holds it
_callbacks: List[Callable[[], Any]] = []
_preempted = threading.Event()
_requested = threading.Event()
_installed = False
_previous: Any = None  # the SIGTERM handler before ours
_warned = False
_clock = time.monotonic
_since: Optional[float] = None  # when the interval started: rank 0's latest checkpoint, or its first ask
_interval = ("", None)  # $CONVOY_CHECKPOINT_INTERVAL_SECONDS as read, and as taken: read once, warned once


def on_preempt(callback: Callable[[], Any]) -> Callable[[], Any]:
    """Registers callback, called with no arguments once SIGTERM arrives (at once when it has
    already arrived), in the main thread, between two Python instructions of whatever it was doing.
    Returns callback, so it can decorate a function. An exception it raises is a warning, except
    SystemExit and KeyboardInterrupt."""
    watch()
    with _lock:
        _callbacks.append(callback)
    if _preempted.is_set():
        _run(callback)
    return callback


def should_checkpoint() -> bool:
    """True once SIGTERM has arrived (the pod is being stopped: save a last checkpoint now), or
    while the operator asks for a checkpoint, or on rank 0 once checkpoint_interval() seconds have
    passed since its latest checkpoint_saved (or its first call), until the next checkpoint_saved.
    The operator's request and the interval come to rank 0 alone: the ranks must agree (the
    framework callbacks do) when saving takes them all."""
    watch()
    return _preempted.is_set() or _requested.is_set() or _interval_passed()


def _interval_passed() -> bool:
    from ._report import rank  # _report imports this module

    global _since, _interval
    raw = os.environ.get(ENV_INTERVAL, "")
    if raw != _interval[0]:
        _interval = (raw, checkpoint_interval({ENV_INTERVAL: raw}))
    interval = _interval[1]
    if interval is None or rank() != 0:
        return False
    now = _clock()
    with _lock:
        if _since is None:
            _since = now
        return now - _since >= interval


def preempted() -> bool:
    """True once SIGTERM has arrived: after its last checkpoint the training code should exit, with
    PREEMPTED_EXIT_CODE."""
    watch()
    return _preempted.is_set()


def watch() -> bool:
    """Installs the SIGTERM handler unless it is installed; False (and a warning, once) when it
    cannot be, outside the main thread."""
    global _installed, _previous, _warned
    with _lock:
        if _installed:
            return True
        if threading.current_thread() is not threading.main_thread():
            if not _warned:
                _warned = True
                log.warning("convoy: not watching for SIGTERM: first asked outside the main thread; call "
                            "convoy.should_checkpoint() once from the main thread")
            return False
        try:
            _previous = signal.signal(signal.SIGTERM, _handle)
        except (ValueError, OSError) as e:  # not the main interpreter, or no signals here
            if not _warned:
                _warned = True
                log.warning("convoy: not watching for SIGTERM: %s", e)
            return False
        _installed = True
        return True


def request_checkpoint() -> None:
    _requested.set()


def checkpoint_taken() -> None:
    """A checkpoint was saved: the operator's request, if any, is met, and the interval starts again."""
    global _since
    _requested.clear()
    with _lock:
        _since = _clock()


def read_reply(body: bytes) -> None:
    """Takes in the body of a reply of the progress endpoint: {"checkpointRequested": true,
    "deadline": ...} asks for a checkpoint before the gang is stopped at the deadline. Otherwise the
    endpoint answers 204 with no body; a body that is not such JSON is ignored."""
    if not body or not body.strip():
        return
    try:
        reply = json.loads(body)
    except ValueError:
        return
    if isinstance(reply, dict) and reply.get("checkpointRequested") is True:
        if not _requested.is_set():
            log.info("convoy: the operator asks for a checkpoint")
        request_checkpoint()


def _handle(signum: int, frame: Any) -> None:
    first = not _preempted.is_set()
    _preempted.set()
    if first:
        log.warning("convoy: SIGTERM: the pod is being stopped; saving a last checkpoint")
        with _lock:
            callbacks = list(_callbacks)
        for callback in callbacks:
            _run(callback)
    previous = _previous
    if callable(previous):
        previous(signum, frame)


def _run(callback: Callable[[], Any]) -> None:
    try:
        callback()
    except Exception:
        log.warning("convoy: the preemption callback %r failed", callback, exc_info=True)


def _reset() -> None:
    """For tests: forgets the callbacks and the state, and puts the handler before ours back."""
    global _installed, _previous, _warned, _since
    with _lock:
        if _installed and signal.getsignal(signal.SIGTERM) is _handle:
            signal.signal(signal.SIGTERM, _previous if _previous is not None else signal.SIG_DFL)
        _installed, _previous, _warned, _since = False, None, False, None
        _callbacks.clear()
    _preempted.clear()
    _requested.clear()

