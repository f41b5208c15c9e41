"""Posting progress and checkpoints to the operator's endpoint (operator/README.md, "Reporting
progress and checkpoints"): POST $CONVOY_PROGRESS_URL/progress, /checkpoint and /tracking with the pod's projected token as a bearer token, over TLS trusting $CONVOY_PROGRESS_CA_FILE."""

from __future__ import annotations

import http.client
import json
import logging
import math
import os
import ssl
import time
import urllib.error
import urllib.request
from typing import Any, Callable, Iterable, Mapping, Optional

from . import _preempt, _retention

log = logging.getLogger("convoy")

# The variables the operator sets (operator/pkg/builder/pod.go).
ENV_URL = "CONVOY_PROGRESS_URL"
ENV_TOKEN_FILE = "CONVOY_PROGRESS_TOKEN_FILE"
ENV_CA_FILE = "CONVOY_PROGRESS_CA_FILE"

# Rank variables, most specific first: mpirun's per-process rank, then RANK (torchrun's per-process
# rank, or the pod's rank without torchrun), then JAX's process id.
RANK_VARS = ("OMPI_COMM_WORLD_RANK", "RANK", "JAX_PROCESS_ID", "PMI_RANK")

DEFAULT_MIN_INTERVAL = 5.0

# The report's throughput field, which operators before it refuse as an unknown field.
SAMPLES_PER_SECOND = "samplesPerSecond"
_WITHOUT_THROUGHPUT = object()  # _attempt's answer: post again without SAMPLES_PER_SECOND


def rank(env: Optional[Mapping[str, str]] = None) -> int:
    """This process's global rank from the launcher's variables; 0 when none is set."""
    env = os.environ if env is None else env
    for name in RANK_VARS:
        value = env.get(name, "").strip()
        if value:
            try:
                return int(value)
            except ValueError:
                log.warning("convoy: %s=%r is not a number; taking rank 0", name, value)
                return 0
    return 0


class Reporter:
    """Posts reports for one process. Calls never raise: a report that cannot be delivered is
    logged as a warning on the "convoy" logger and the call returns False.

    min_interval: at most one progress report is posted per that many seconds; reports in between
        are dropped (each report carries the latest values, so the next one supersedes them),
        except final ones. Checkpoints are never dropped.
    timeout: seconds per HTTP attempt.
    retries: further attempts after a network error, a timeout, 429 or 5xx, waiting backoff,
        2*backoff, 4*backoff, ... seconds in between. Other answers (400, 401, 403, 404, 409) are
        not retried.
    env: where the CONVOY_* variables are read, at every call; os.environ by default.
    """

    def __init__(
        self,
        min_interval: float = DEFAULT_MIN_INTERVAL,
        timeout: float = 10.0,
        retries: int = 3,
        backoff: float = 0.5,
        env: Optional[Mapping[str, str]] = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.min_interval = min_interval
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.env = os.environ if env is None else env
        self.clock = clock
        self.sleep = sleep
        self._last_progress: Optional[float] = None
        self._finished_warned = False
        self._no_throughput = False  # the operator does not know samplesPerSecond (older than the SDK)

    def report(
        self,
        epoch: Optional[int] = None,
        total_epochs: Optional[int] = None,
        step: Optional[int] = None,
        metrics: Optional[Mapping[str, float]] = None,
        *,
        final: bool = False,
        all_ranks: bool = False,
        samples_per_second: Optional[float] = None,
    ) -> bool:
        """Posts a progress report; True when the operator recorded it."""
        try:
            if not self._active(all_ranks):
                return False
            now = self.clock()
            if not final and self._last_progress is not None and now - self._last_progress < self.min_interval:
                return False
            self._last_progress = now
            body = progress_body(epoch, total_epochs, step, metrics, samples_per_second)
            if self._no_throughput:
                body.pop(SAMPLES_PER_SECOND, None)
            return self._post("progress", body)
        except Exception:  # never into the training loop
            log.warning("convoy: reporting progress failed", exc_info=True)
            return False

    def checkpoint_saved(
        self,
        path: str,
        epoch: int,
        metrics: Optional[Mapping[str, float]] = None,
        *,
        all_ranks: bool = False,
        keep: Iterable[str] = (),
        track: bool = True,
    ) -> bool:
        """Reports a checkpoint written completely at path, taken after epoch; a restarted gang gets
        path back as CONVOY_RESUME_FROM. metrics, when given, go first in a progress report for the
        same epoch. Then, with track and when path is in checkpoint_dir(), enforces the retention
        there (the checkpoints in keep are not deleted). Rank 0 only unless all_ranks, also outside Convoy
        for the retention. True when the operator recorded the checkpoint."""
        try:
            if not (all_ranks or rank(self.env) == 0):
                return False
            _preempt.checkpoint_taken()
            reporting = bool(self.env.get(ENV_URL))
            recorded = False
            if reporting:
                if metrics:
                    self.report(epoch=epoch, metrics=metrics, all_ranks=all_ranks)
                recorded = self._post("checkpoint", {"path": os.fspath(path), "epoch": int(epoch)})
            if track:
                _retention.track(path, epoch, recorded, reporting, keep, env=self.env, rank=rank(self.env))
            return recorded
        except Exception:  # never into the training loop
            log.warning("convoy: reporting a checkpoint failed", exc_info=True)
            return False

    def tracking(self, body: Mapping[str, str]) -> bool:
        """Posts the job's tracker run ({"mlflowRunId": ..., "url": ...}) to
        $CONVOY_PROGRESS_URL/tracking, rank 0 only; True when the operator recorded it (or had
        recorded the same run already)."""
        try:
            if not self._active(False):
                return False
            return self._post("tracking", dict(body))
        except Exception:  # never into the training loop
            log.warning("convoy: reporting the tracker run failed", exc_info=True)
            return False

    def _active(self, all_ranks: bool) -> bool:
        return bool(self.env.get(ENV_URL)) and (all_ranks or rank(self.env) == 0)

    def _post(self, kind: str, body: dict) -> bool:
        url = self.env[ENV_URL].rstrip("/") + "/" + kind
        try:
            data = json.dumps(body, allow_nan=False).encode()
            context = self._tls_context(url)
        except (OSError, ValueError, ssl.SSLError) as e:
            log.warning("convoy: not reporting %s: %s", kind, e)
            return False
        delay = self.backoff
        for attempt in range(self.retries + 1):
            retry = self._attempt(kind, url, data, context)
            if retry is None:
                return True
            if retry is _WITHOUT_THROUGHPUT:
                return self._post(kind, {k: v for k, v in body.items() if k != SAMPLES_PER_SECOND})
            if not retry:
                return False
            if attempt < self.retries:
                self.sleep(delay)
                delay *= 2
        log.warning("convoy: gave up reporting %s to %s after %d attempts", kind, url, self.retries + 1)
        return False

    def _attempt(self, kind: str, url: str, data: bytes, context: Optional[ssl.SSLContext]) -> Any:
        """One POST: None when recorded, _WITHOUT_THROUGHPUT when to post it again without
        samplesPerSecond, else whether to retry."""
        headers = {"Content-Type": "application/json"}
        token_file = self.env.get(ENV_TOKEN_FILE)
        if token_file:
            # Re-read at every attempt: the kubelet rotates the projected token.
            try:
                with open(token_file, encoding="utf-8") as f:
                    headers["Authorization"] = "Bearer " + f.read().strip()
            except OSError as e:
                log.warning("convoy: not reporting %s: reading the token: %s", kind, e)
                return False
        try:
            req = urllib.request.Request(url, data=data, headers=headers, method="POST")
            with urllib.request.urlopen(req, timeout=self.timeout, context=context) as resp:
                reply = resp.read(4096)
            _preempt.read_reply(reply)  # a checkpoint request, or 204 and no body
            return None
        except urllib.error.HTTPError as e:
            message = _read_message(e)
            retry = e.code == 429 or e.code >= 500
            if e.code == 400 and 'unknown field "%s"' % SAMPLES_PER_SECOND in message and not self._no_throughput:
                self._no_throughput = True
                log.warning("convoy: the operator does not take %s (it is older than this SDK); reporting without it",
                            SAMPLES_PER_SECOND)
                return _WITHOUT_THROUGHPUT
            if e.code == 409 and kind == "tracking":
                log.warning("convoy: the operator did not record the tracker run: %s", message)
                return False
            if e.code == 409:
                if not self._finished_warned:
                    self._finished_warned = True
                    log.warning("convoy: the operator no longer records reports: %s", message)
                return False
            log.warning("convoy: reporting %s to %s: %d %s%s", kind, url, e.code, message, "; retrying" if retry else "")
            return retry
        except urllib.error.URLError as e:
            if isinstance(e.reason, ssl.SSLCertVerificationError):
                log.warning("convoy: reporting %s to %s: %s; is %s the endpoint's CA?", kind, url, e.reason, ENV_CA_FILE)
                return False
            log.warning("convoy: reporting %s to %s: %s; retrying", kind, url, e.reason)
            return True
        except ValueError as e:  # a malformed URL
            log.warning("convoy: reporting %s to %s: %s", kind, url, e)
            return False
        except (OSError, http.client.HTTPException) as e:  # timeouts, resets, garbled answers
            log.warning("convoy: reporting %s to %s: %r; retrying", kind, url, e)
            return True

    def _tls_context(self, url: str) -> Optional[ssl.SSLContext]:
        if not url.startswith("https:"):
            return None
        # Read at every call, so a renewed CA is picked up; None trusts the system's CAs.
        return ssl.create_default_context(cafile=self.env.get(ENV_CA_FILE) or None)


def progress_body(
    epoch: Optional[int] = None,
    total_epochs: Optional[int] = None,
    step: Optional[int] = None,
    metrics: Optional[Mapping[str, float]] = None,
    samples_per_second: Optional[float] = None,
) -> dict:
    """The JSON body of POST .../progress (progress.Report in operator/pkg/progress/protocol.go):
    fields that are None are left out, metrics and samples_per_second become floats and non-finite
    ones (and a negative samples_per_second) are dropped (the operator refuses them)."""
    body: dict = {}
    if epoch is not None:
        body["epoch"] = int(epoch)
    if total_epochs is not None:
        body["totalEpochs"] = int(total_epochs)
    if step is not None:
        body["step"] = int(step)
    if metrics:
        values = {}
        for name, value in metrics.items():
            try:
                value = float(value)
            except (TypeError, ValueError):
                log.warning("convoy: metric %r is not a number (%r); not reported", name, value)
                continue
            if not math.isfinite(value):
                log.warning("convoy: metric %r is %s; not reported", name, value)
                continue
            values[str(name)] = value
        if values:
            body["metrics"] = values
    if samples_per_second is not None:
        try:
            rate = float(samples_per_second)
        except (TypeError, ValueError):
            rate = math.nan
        if math.isfinite(rate) and rate >= 0:
            body[SAMPLES_PER_SECOND] = rate
        else:
            log.warning("convoy: samples_per_second is %r; not reported", samples_per_second)
    return body


def _read_message(e: urllib.error.HTTPError) -> str:
    try:
        return e.read(512).decode("utf-8", "replace").strip()
    except OSError:
        return ""
