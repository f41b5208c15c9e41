"""Retention of checkpoints on file-system storage (pvc, nfs): the checkpoints reported through
checkpoint_saved are listed, newest last, in a manifest in the checkpoint directory, which outlives
the pod, and all but the newest CONVOY_CHECKPOINT_RETENTION of them are deleted. Only what the
manifest lists is ever deleted, only inside the checkpoint directory, and never the checkpoint being
resumed from, the newest one the operator recorded, nor one the caller asks to keep. Failures are
warnings."""

from __future__ import annotations

import json
import logging
import os
import shutil
from typing import Iterable, List, Mapping, Optional

from ._checkpoint import checkpoint_dir, checkpoint_retention, resume_from

log = logging.getLogger("convoy")

MANIFEST = ".convoy-checkpoints.json"


def track(path: str, epoch: int, recorded: bool, reporting: bool, keep: Iterable[str] = (),
          env: Optional[Mapping[str, str]] = None) -> List[str]:
    """Adds path (a checkpoint just written and reported: recorded by the operator or not, reporting
    saying whether there is an operator to report to) to the manifest of checkpoint_dir(), then
    deletes the listed checkpoints past the newest checkpoint_retention() of them. Returns the paths
    deleted; never raises."""
    try:
        return _track(path, epoch, recorded, reporting, keep, env)
    except Exception:  # never into the training loop
        log.warning("convoy: enforcing checkpoint retention failed", exc_info=True)
        return []


def _track(path: str, epoch: int, recorded: bool, reporting: bool, keep: Iterable[str],
           env: Optional[Mapping[str, str]]) -> List[str]:
    directory = checkpoint_dir(create=False, env=env)
    if directory is None or not os.path.isdir(directory):
        return []
    root = os.path.realpath(directory)
    target = _inside(root, os.path.abspath(os.fspath(path)))
    if target is None:
        log.debug("convoy: %s is not in the checkpoint directory %s; retention leaves it alone", path, directory)
        return []
    manifest = os.path.join(root, MANIFEST)
    name = os.path.relpath(target, root)
    entries = [e for e in _load(manifest) if e["path"] != name and os.path.lexists(os.path.join(root, e["path"]))]
    entries.append({"path": name, "epoch": int(epoch), "recorded": bool(recorded)})

    deleted: List[str] = []
    retention = checkpoint_retention(env)
    if retention is not None and len(entries) > retention:
        protected = {os.path.realpath(p) for p in keep if p}
        resume = resume_from(env)
        if resume and "://" not in resume:
            protected.add(os.path.realpath(resume))
        if reporting:
            # What a restarted gang resumes from, when a later report did not reach the operator.
            newest_recorded = next((e for e in reversed(entries) if e.get("recorded")), None)
            if newest_recorded is not None:
                protected.add(os.path.realpath(os.path.join(root, newest_recorded["path"])))
        kept = []
        for entry in entries[:-retention]:
            doomed = _inside(root, os.path.join(root, entry["path"]))
            if doomed is None or _overlaps(doomed, protected) or not _delete(doomed):
                kept.append(entry)
            else:
                deleted.append(doomed)
        entries = kept + entries[-retention:]
    _save(manifest, entries)
    return deleted


def _inside(root: str, path: str) -> Optional[str]:
    """path with its directory resolved (symbolic links followed, its last component not) when it
    lies strictly inside root and is not the manifest; None otherwise."""
    parent, base = os.path.split(os.path.normpath(path))
    if base in ("", ".", "..") or base == MANIFEST:
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
    return [e for e in entries if isinstance(e, dict) and isinstance(e.get("path"), str) and e["path"]]


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
