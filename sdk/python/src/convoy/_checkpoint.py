"""Where checkpoints go and where to resume from, from the variables the operator sets
(operator/pkg/builder/pod.go, setCheckpoint)."""

from __future__ import annotations

import logging
import os
from typing import Mapping, Optional

log = logging.getLogger("convoy")

ENV_URI = "CONVOY_CHECKPOINT_URI"
ENV_ROOT = "CONVOY_CHECKPOINT_ROOT"
ENV_FREQUENCY = "CONVOY_CHECKPOINT_FREQUENCY"
ENV_INTERVAL = "CONVOY_CHECKPOINT_INTERVAL_SECONDS"
ENV_RETENTION = "CONVOY_CHECKPOINT_RETENTION"
ENV_RESUME_FROM = "CONVOY_RESUME_FROM"


def checkpoint_uri(env: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """$CONVOY_CHECKPOINT_URI as given, where this restart attempt writes: <root>/attempt-<n> under
    the job's location, /checkpoints/<prefix> for pvc and nfs storage, s3://, gs:// or az:// for
    object storage; None when checkpointing is not enabled."""
    env = os.environ if env is None else env
    return env.get(ENV_URI) or None


def checkpoint_dir(create: bool = True, env: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """The local directory to write checkpoints in: $CONVOY_CHECKPOINT_URI when it is a path (pvc and
    nfs storage, mounted at /checkpoints; a file:// URI is taken as its path), created when missing
    unless create is False. None when checkpointing is not enabled or the URI is object storage
    (s3://, gs://, az://), which the training code writes with its own client."""
    path = _local(checkpoint_uri(env))
    if path is None:
        return None
    if create:
        try:
            os.makedirs(path, exist_ok=True)
        except OSError as e:
            log.warning("convoy: creating the checkpoint directory %s: %s", path, e)
    return path


def checkpoint_root(env: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """The local directory that holds every restart attempt's checkpoints, $CONVOY_CHECKPOINT_ROOT
    when it is a path, mounted read-only (only checkpoint_dir() is writable); checkpoint_dir()
    without it (an operator that gives each attempt none of its own). None when checkpoint_dir() is
    None."""
    env = os.environ if env is None else env
    if checkpoint_dir(create=False, env=env) is None:
        return None
    return _local(env.get(ENV_ROOT)) or checkpoint_dir(create=False, env=env)


def resume_from(env: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """The checkpoint to resume from, $CONVOY_RESUME_FROM: the latest one the job reported with
    checkpoint_saved, or spec.checkpoint.resumeFrom before it reported any; None when there is none.
    A file:// URI is given as its path, other URIs as they are."""
    env = os.environ if env is None else env
    value = env.get(ENV_RESUME_FROM) or None
    return _local(value) or value


def checkpoint_frequency(env: Optional[Mapping[str, str]] = None) -> int:
    """Every how many epochs to write a checkpoint, $CONVOY_CHECKPOINT_FREQUENCY; 1 when unset."""
    return max(_int(env, ENV_FREQUENCY) or 1, 1)


def checkpoint_interval(env: Optional[Mapping[str, str]] = None) -> Optional[int]:
    """Every how many seconds to write a checkpoint besides the epochs of checkpoint_frequency(),
    $CONVOY_CHECKPOINT_INTERVAL_SECONDS; None when unset."""
    n = _int(env, ENV_INTERVAL)
    return n if n and n > 0 else None


def checkpoint_retention(env: Optional[Mapping[str, str]] = None) -> Optional[int]:
    """How many of the latest checkpoints to keep, $CONVOY_CHECKPOINT_RETENTION; None (keep all)
    when unset."""
    n = _int(env, ENV_RETENTION)
    return n if n and n > 0 else None


def _local(uri: Optional[str]) -> Optional[str]:
    if not uri:
        return None
    if uri.startswith("file://"):
        return uri[len("file://"):] or None
    if "://" in uri:
        return None
    return uri


def _int(env: Optional[Mapping[str, str]], name: str) -> Optional[int]:
    env = os.environ if env is None else env
    value = env.get(name, "").strip()
    if not value:
        return None
    try:
        return int(value)
    except ValueError:
        log.warning("convoy: %s=%r is not a number; ignored", name, value)
        return None
