"""Retention of checkpoints on file-system storage (pvc, nfs): the checkpoints reported through
checkpoint_saved are listed, newest last, in a list per rank in the restart attempt's own directory
(checkpoint_dir(); the job's checkpoint_root() is mounted read-only, so the pods of an attempt
before, still running on a lost node, cannot touch this one's), which outlives the pod. Earlier
attempts' checkpoints are left as they are. A checkpoint is the group of the shards the ranks
reported for it (the same epoch, reported as often before at that epoch); rank 0 alone deletes,
whole groups past the newest CONVOY_CHECKPOINT_RETENTION of its own list. Only what the lists name
is ever deleted, only inside the attempt's directory, and never a part of the checkpoint being
resumed from, the newest one the operator recorded, one the caller asks to keep, one of the newest
retained, nor a shard among the newest retained of the rank that listed it. Failures are warnings."""

from __future__ import annotations

import glob
import json
import logging
import os
import shutil
from typing import Dict, Iterable, List, Mapping, Optional, Set, Tuple

from ._checkpoint import checkpoint_dir, checkpoint_retention, resume_from

log = logging.getLogger("convoy")

MANIFEST = ".convoy-checkpoints.json"
_RANK_MANIFEST = ".convoy-checkpoints.rank-%d.json"

Key = Tuple[int, int]


def track(path: str, epoch: int, recorded: bool, reporting: bool, keep: Iterable[str] = (),
          env: Optional[Mapping[str, str]] = None, rank: int = 0) -> List[str]:
    """Adds path (this rank's checkpoint or shard just written and reported: recorded by the
    operator or not, reporting saying whether there is an operator to report to) to the rank's list
    in checkpoint_dir(); on rank 0, then deletes the listed checkpoints past the newest
    checkpoint_retention() of them. Returns the paths deleted; never raises."""
    try:
        return _track(path, epoch, recorded, reporting, keep, env, rank)
    except Exception:  # never into the training loop
        log.warning("convoy: enforcing checkpoint retention failed", exc_info=True)
        return []


def _track(path: str, epoch: int, recorded: bool, reporting: bool, keep: Iterable[str],
           env: Optional[Mapping[str, str]], rank: int) -> List[str]:
    directory = checkpoint_dir(create=False, env=env)
    if directory is None or not os.path.isdir(directory):
        return []
    root = os.path.realpath(directory)
    target = _inside(root, os.path.abspath(os.fspath(path)))
    if target is None:
        log.debug("convoy: %s is not in the checkpoint directory %s; retention leaves it alone", path, directory)
        return []
    manifest = os.path.join(root, MANIFEST if rank == 0 else _RANK_MANIFEST % rank)
    name = os.path.relpath(target, root)
    entries = _listed(root, manifest, drop=name)
    # The how-many-th checkpoint at this epoch: what ties a rank's shard to the other ranks' shards.
    again = sum(1 for e in entries if e["epoch"] == int(epoch))
    entries.append({"path": name, "epoch": int(epoch), "n": again, "recorded": bool(recorded)})

    deleted: List[str] = []
    retention = checkpoint_retention(env)
    if rank == 0 and retention is not None:
        entries, deleted = _enforce(root, entries, retention, reporting, keep, env)
    _save(manifest, entries)
    return deleted


def _enforce(root: str, entries: List[dict], retention: int, reporting: bool, keep: Iterable[str],
             env: Optional[Mapping[str, str]]) -> Tuple[List[dict], List[str]]:
    """Deletes the checkpoints past the newest retention of rank 0's list, the other ranks' shards
    of them included; returns rank 0's entries left and the paths deleted."""
    others = [_listed(root, m) for m in sorted(glob.glob(os.path.join(glob.escape(root), ".convoy-checkpoints.rank-*.json")))]
    paths = {os.path.realpath(p) for p in keep if p}
    resume = resume_from(env)
    if resume and "://" not in resume:
        paths.add(os.path.realpath(resume))
    kept = set(_order(entries)[-retention:]) | _protected(root, [entries] + others, reporting, paths)
    # A rank's newest shards are never deleted, whatever the epochs it reports.
    lists = [(entries, kept)] + [(listed, kept | set(_order(listed)[-retention:])) for listed in others]
    for listed, keys in lists:
        paths.update(os.path.realpath(os.path.join(root, e["path"])) for e in listed if _key(e) in keys)
    deleted: List[str] = []
    left = [e for e in entries if _key(e) in kept or not _remove(root, e, paths, deleted)]
    for listed, keys in lists[1:]:
        for entry in listed:
            if _key(entry) not in keys:
                _remove(root, entry, paths, deleted)
    return left, deleted


def _protected(root: str, lists: List[List[dict]], reporting: bool, paths: Set[str]) -> Set[Key]:
    """The checkpoints retention must leave whole: those with a part in paths (asked to be kept,
    resumed from) and the newest the operator recorded."""
    keys: Set[Key] = set()
    for listed in lists:
        keys.update(_key(e) for e in listed if _overlaps(os.path.join(root, e["path"]), paths))
        if reporting:
            # What a restarted gang resumes from, when a later report did not reach the operator.
            newest_recorded = next((e for e in reversed(listed) if e.get("recorded")), None)
            if newest_recorded is not None:
                keys.add(_key(newest_recorded))
    return keys


def _remove(root: str, entry: dict, protected: Set[str], deleted: List[str]) -> bool:
    """Deletes the entry's path unless it is protected or outside root; whether it is gone."""
    doomed = _inside(root, os.path.join(root, entry["path"]))
    if doomed is None or _overlaps(doomed, protected) or not _delete(doomed):
        return False
    deleted.append(doomed)
    return True


def _key(entry: dict) -> Key:
    return (entry["epoch"], entry.get("n", 0))


def _order(entries: List[dict]) -> List[Key]:
    """The checkpoints of a list, oldest first, each placed by its newest entry."""
    keys: Dict[Key, None] = {}
    for entry in entries:
        keys.pop(_key(entry), None)
        keys[_key(entry)] = None
    return list(keys)


def _listed(root: str, manifest: str, drop: str = "") -> List[dict]:
    """The entries of a list whose paths are still there, but drop."""
    return [e for e in _load(manifest) if e["path"] != drop and os.path.lexists(os.path.join(root, e["path"]))]


def _inside(root: str, path: str) -> Optional[str]:
    """path with its directory resolved (symbolic links followed, its last component not) when it
    lies strictly inside root and is not the manifest; None otherwise."""
    parent, base = os.path.split(os.path.normpath(path))
    if base in ("", ".", "..") or (base.startswith(".convoy-checkpoints") and base.endswith(".json")):
        return None
    resolved = os.path.join(os.path.realpath(parent), base)
    if os.path.commonpath([root, resolved]) != root or resolved == root:
        return None
    return resolved


def _overlaps(path: str, protected: Iterable[str]) -> bool:
    """Whether path is, contains or lies in a protected path."""
    real = os.path.realpath(path)
    for p in protected:
        if real == p or os.path.commonpath([real, p]) in (real, p):
            return True
    return False


def _delete(path: str) -> bool:
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.remove(path)
        log.info("convoy: deleted checkpoint %s (checkpoint retention)", path)
        return True
    except FileNotFoundError:
        return True
    except OSError as e:
        log.warning("convoy: deleting the old checkpoint %s: %s; kept", path, e)
        return False


def _load(manifest: str) -> List[dict]:
    try:
        with open(manifest, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as e:
        log.warning("convoy: reading %s: %s; starting a new list of checkpoints", manifest, e)
        return []
    entries = data.get("checkpoints") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        return []
    return [e for e in entries if isinstance(e, dict) and isinstance(e.get("path"), str) and e["path"]
            and isinstance(e.get("epoch"), int) and isinstance(e.get("n", 0), int)]


def _save(manifest: str, entries: List[dict]) -> None:
    temporary = "%s.%d.tmp" % (manifest, os.getpid())
    try:
        with open(temporary, "w", encoding="utf-8") as f:
            json.dump({"checkpoints": entries}, f, indent=1)
            f.write("\n")
        os.replace(temporary, manifest)
    except OSError as e:
        log.warning("convoy: writing %s: %s", manifest, e)
        try:
            os.remove(temporary)
        except OSError:
            pass
