"""Convoy's Python SDK: report progress and checkpoints from a TrainingJob's pods to the operator,
and find the checkpoint directory and the checkpoint to resume from. Standard library only, but for
object storage (save_checkpoint and load_checkpoint on s3://, gs://, az://), which needs its vendor's client.

    import convoy
    convoy.report(epoch=3, total_epochs=10, metrics={"loss": 0.41, "accuracy": 0.87})
    convoy.checkpoint_saved(path, epoch=3)

Outside a Convoy pod (no CONVOY_PROGRESS_URL) the reporting calls do nothing. They never raise:
failures are warnings on the "convoy" logger. checkpoint_saved also keeps only the newest
CONVOY_CHECKPOINT_RETENTION checkpoints of the job, across its restart attempts. On SIGTERM, should_checkpoint()
turns True and the callbacks registered with on_preempt run, to save a last checkpoint.
start_tracking() starts (or resumes) the job's one MLflow and W&B run with the hyperparameters as
its params, where mlflow or wandb are installed.

Callbacks that report from a framework's training loop: convoy.lightning, convoy.transformers and
convoy.keras (import them by name; each needs its framework only when its callback is constructed).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Optional

from ._checkpoint import checkpoint_dir, checkpoint_frequency, checkpoint_interval, checkpoint_retention, checkpoint_root, checkpoint_uri, resume_from
from ._objcheckpoint import Checkpoint, Saver
from ._preempt import PREEMPTED_EXIT_CODE, on_preempt, preempted, should_checkpoint
from ._report import DEFAULT_MIN_INTERVAL, Reporter, progress_body, rank
from ._throughput import Throughput
from ._tracking import Tracking, hyperparameters
from . import _tracking

__all__ = [
    "Checkpoint",
    "PREEMPTED_EXIT_CODE",
    "Reporter",
    "Throughput",
    "Tracking",
    "checkpoint_dir",
    "checkpoint_frequency",
    "checkpoint_interval",
    "checkpoint_retention",
    "checkpoint_root",
    "checkpoint_saved",
    "checkpoint_uri",
    "configure",
    "hyperparameters",
    "list_checkpoints",
    "load_checkpoint",
    "on_preempt",
    "preempted",
    "progress_body",
    "rank",
    "report",
    "resume_from",
    "save_checkpoint",
    "should_checkpoint",
    "start_tracking",
]

__version__ = "0.1.0"

_reporter = Reporter()
_saver = Saver()


def configure(
    min_interval: float = DEFAULT_MIN_INTERVAL, timeout: float = 10.0, retries: int = 3, backoff: float = 0.5
) -> None:
    """Replaces the settings report and checkpoint_saved use (see Reporter)."""
    global _reporter
    _reporter = Reporter(min_interval=min_interval, timeout=timeout, retries=retries, backoff=backoff)


def report(
    epoch: Optional[int] = None,
    total_epochs: Optional[int] = None,
    step: Optional[int] = None,
    metrics: Optional[Mapping[str, float]] = None,
    *,
    final: bool = False,
    all_ranks: bool = False,
    samples_per_second: Optional[float] = None,
) -> bool:
    """Posts progress to $CONVOY_PROGRESS_URL/progress: the epoch the code is in or has finished, how
    many there are, the global step, the latest metrics ("loss" and "accuracy" drive the job's
    success policy; at most 32 others) and the whole gang's samples per second since the previous
    report (Throughput measures it; an elastic job's growth follows it). Only rank 0 posts unless
    all_ranks; at most one report per 5 seconds is posted (configure changes it) unless final, the
    others are dropped. Returns True when the operator recorded the report; never raises."""
    return _reporter.report(epoch, total_epochs, step, metrics, final=final, all_ranks=all_ranks,
                            samples_per_second=samples_per_second)


def checkpoint_saved(path: str, epoch: int, metrics: Optional[Mapping[str, float]] = None, *, all_ranks: bool = False,
                     keep: Iterable[str] = ()) -> bool:
    """Posts a checkpoint, written completely at path after epoch, to $CONVOY_PROGRESS_URL/checkpoint:
    a restarted gang gets path back as CONVOY_RESUME_FROM. metrics, when given, are reported first
    as progress for that epoch. When path is in checkpoint_dir(), it is listed there and only the
    newest checkpoint_retention() of the checkpoints listed are kept, besides the one resumed from,
    the newest one the operator recorded and those in keep. Only rank 0 posts and deletes unless
    all_ranks. Returns True when the operator recorded it; never raises."""
    return _reporter.checkpoint_saved(path, epoch, metrics, all_ranks=all_ranks, keep=keep)


def save_checkpoint(src: str, epoch: int, metrics: Optional[Mapping[str, float]] = None, *,
                    keep: Iterable[str] = ()) -> Optional[str]:
    """Saves src (a file, or a directory and everything in it) as this rank's shard of the checkpoint
    after epoch, under $CONVOY_CHECKPOINT_URI, on object storage (s3://, gs://, az://) or a volume
    alike; every rank calls it for the same epochs. Rank 0 waits for every rank's shard, commits the
    checkpoint's manifest last, reports it as checkpoint_saved does and keeps the newest
    checkpoint_retention() committed ones of this restart attempt. Returns the checkpoint's URI, or
    None when checkpointing is off or it was not committed; raises when an upload fails."""
    return _saver.save(src, epoch, metrics, keep=keep)


def load_checkpoint(dst: str, rank: Optional[int] = None) -> Optional[Checkpoint]:
    """Downloads this rank's shard (or rank's) of the checkpoint to resume from into the directory
    dst: $CONVOY_RESUME_FROM when it names a committed checkpoint, else the newest committed one of
    any restart attempt; one without its manifest (half written) is never loaded. Returns it (uri,
    epoch, metrics, path=dst), or None when there is none."""
    return _saver.load(dst, rank)


def list_checkpoints(root: bool = True) -> list:
    """The committed checkpoints, oldest first, of every restart attempt of the job (root) or of
    this attempt only."""
    return _saver.list(root)


def start_tracking(params: Optional[Mapping[str, Any]] = None) -> Tracking:
    """Starts the job's experiment-tracker runs on rank 0, one per job across its restarts: with
    $MLFLOW_TRACKING_URI an MLflow run (resuming $MLFLOW_RUN_ID, which the operator sets for later
    attempts; a new run gets params as its params), with $WANDB_PROJECT a W&B run (the id the
    operator derived from the job, resume "allow", params as its config). params default to the
    job's hyperparameters(). The run's id and page are reported to the operator (status.tracking).
    A tracker whose package is not installed is skipped with a warning; on other ranks nothing is
    started. Never raises. Returns the runs started (see Tracking)."""
    if rank(_reporter.env) != 0:
        return Tracking()
    return _tracking.start(_reporter, params, _reporter.env)
