"""save_checkpoint, load_checkpoint and list_checkpoints: checkpoints written through a Store
(_objstore.py), the same calls on object storage (s3://, gs://, az://) as on a volume.

A checkpoint is <CONVOY_CHECKPOINT_URI>/epoch-<N>[.<k>]/: each rank uploads its files under
rank-<r>/, then rank-<r>.json naming them; rank 0, once every rank's rank-<r>.json is there, writes
manifest.json last. Only a checkpoint with its manifest is ever loaded, so one half written (a rank
killed mid-upload, rank 0 gone before the commit) is never resumed. Rank 0 reports the committed
checkpoint to the operator and keeps the newest CONVOY_CHECKPOINT_RETENTION committed ones of the
restart attempt's own prefix: it never deletes the newest, the one resumed from, the newest the
operator recorded, one asked to be kept, a checkpoint without a manifest (another rank may still be
writing it), nor anything of an earlier attempt or outside the job's prefix."""

from __future__ import annotations

import json
import logging
import os
import re
import time
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Mapping, Optional, Tuple

from ._checkpoint import ENV_ROOT, checkpoint_retention, checkpoint_uri, resume_from
from ._objstore import Store, store_for

log = logging.getLogger("convoy")

MANIFEST = "manifest.json"
_NAME = re.compile(r"epoch-(\d+)(?:\.(\d+))?")
DEFAULT_COMMIT_TIMEOUT = 600.0


@dataclass
class Checkpoint:
    """A committed checkpoint: its URI (what the operator records and CONVOY_RESUME_FROM names),
    epoch, metrics, world size, and, after load_checkpoint, the local directory its files were
    downloaded to."""
    uri: str
    epoch: int
    n: int = 0
    world: int = 1
    metrics: Dict[str, float] = field(default_factory=dict)
    path: Optional[str] = None


class Saver:
    """The checkpoint calls of one process. env: where CONVOY_CHECKPOINT_URI, _ROOT, _RETENTION,
    CONVOY_RESUME_FROM, RANK and WORLD_SIZE are read (os.environ by default)."""

    def __init__(self, env: Optional[Mapping[str, str]] = None, commit_timeout: float = DEFAULT_COMMIT_TIMEOUT,
                 poll: float = 0.2):
        self.env = os.environ if env is None else env
        self.commit_timeout = commit_timeout
        self.poll = poll
        self._saves: Dict[int, int] = {}

    def save(self, src: str, epoch: int, metrics: Optional[Mapping[str, float]] = None, *, keep: Iterable[str] = (),
             report=None) -> Optional[str]:
        """Uploads this rank's src (a file, or a directory and everything in it) as its shard of the
        checkpoint after epoch; every rank calls it, for the same epochs. On rank 0 it then waits
        for every rank's shard, commits the manifest, reports the checkpoint (report(uri, epoch,
        metrics), convoy.checkpoint_saved by default) and applies the retention. Returns the
        checkpoint's URI on rank 0 once committed, on the other ranks once their shard is up; None
        when checkpointing is not enabled or the checkpoint could not be committed. Raises what the
        store raises while uploading (the caller's checkpoint is not saved)."""
        from ._report import rank
        uri = checkpoint_uri(self.env)
        if uri is None:
            return None
        store, prefix = store_for(uri, self.env)
        n = self._saves.get(int(epoch), 0)
        self._saves[int(epoch)] = n + 1
        name = "epoch-%d" % epoch + (".%d" % n if n else "")
        base, r, world = _join(prefix, name), rank(self.env), _world(self.env)
        keys = []
        for rel, local in _files(src):
            key = "%s/rank-%d/%s" % (base, r, rel)
            store.put(key, local)
            keys.append(key)
        store.put_bytes("%s/rank-%d.json" % (base, r), _dump({"keys": keys}))
        ckpt = _join_uri(uri, name)
        if r != 0:
            return ckpt
        if not self._wait_for_shards(store, base, world):
            log.warning("convoy: checkpoint %s: not every rank's shard came within %gs; not committed", ckpt, self.commit_timeout)
            return None
        store.put_bytes("%s/%s" % (base, MANIFEST), _dump({"epoch": int(epoch), "n": n, "world": world,
                                                             "metrics": dict(metrics or {})}))
        if report is None:
            from . import _reporter
            recorded = _reporter.checkpoint_saved(ckpt, epoch, metrics, track=False)
        else:
            recorded = report(ckpt, epoch, metrics)
        reporting = bool(self.env.get("CONVOY_PROGRESS_URL"))
        if recorded or not reporting:
            try:
                self._retain(store, prefix, uri, list(keep) + [ckpt])
            except Exception:  # never into the training loop
                log.warning("convoy: enforcing checkpoint retention failed", exc_info=True)
        return ckpt

    def _wait_for_shards(self, store: Store, base: str, world: int) -> bool:
        want = {"%s/rank-%d.json" % (base, i) for i in range(world)}
        deadline = time.monotonic() + self.commit_timeout
        while True:
            if want <= set(store.list(base + "/")):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(self.poll)

    def _retain(self, store: Store, prefix: str, uri: str, keep: List[str]) -> List[str]:
        """Deletes the attempt's committed checkpoints past the newest checkpoint_retention(); returns
        their URIs."""
        retention = checkpoint_retention(self.env)
        if retention is None:
            return []
        protected = {u.rstrip("/") for u in keep + [resume_from(self.env) or ""] if u}
        deleted = []
        for ckpt in _committed(store, prefix, uri)[:-retention]:
            if ckpt.uri in protected:
                continue
            base = _join(prefix, ckpt.uri[len(uri):].strip("/"))
            store.delete("%s/%s" % (base, MANIFEST))  # first: a half-deleted checkpoint is never loaded
            for key in store.list(base + "/"):
                store.delete(key)
            log.info("convoy: deleted checkpoint %s (checkpoint retention)", ckpt.uri)
            deleted.append(ckpt.uri)
        return deleted

    def list(self, root: bool = True) -> List[Checkpoint]:
        """The committed checkpoints, oldest first: of every restart attempt of the job
        (CONVOY_CHECKPOINT_ROOT) when root, else of this attempt."""
        uri = checkpoint_uri(self.env)
        if uri is None:
            return []
        if root:
            uri = self.env.get(ENV_ROOT) or uri
        store, prefix = store_for(uri, self.env)
        return _committed(store, prefix, uri, nested=root)

    def load(self, dst: str, rank: Optional[int] = None) -> Optional[Checkpoint]:
        """Downloads rank's shard (this process's rank by default) of the checkpoint to resume from
        into the directory dst: CONVOY_RESUME_FROM when it names a committed checkpoint, else the
        newest committed one of any attempt. None when there is none."""
        from ._report import rank as own_rank
        ckpt = self._resume()
        if ckpt is None:
            return None
        store, base = store_for(ckpt.uri, self.env)
        r = own_rank(self.env) if rank is None else rank
        shard = "%s/rank-%d/" % (base, r)
        for key in store.list(shard):
            local = os.path.join(dst, *key[len(shard):].split("/"))
            os.makedirs(os.path.dirname(local), exist_ok=True)
            store.get(key, local)
        ckpt.path = dst
        return ckpt

    def _resume(self) -> Optional[Checkpoint]:
        named = resume_from(self.env)
        if named and _NAME.fullmatch(named.rstrip("/").rsplit("/", 1)[-1]):
            store, base = store_for(named, self.env)
            try:
                return _checkpoint(named.rstrip("/"), store.get_bytes("%s/%s" % (base, MANIFEST)))
            except FileNotFoundError:
                log.warning("convoy: CONVOY_RESUME_FROM=%s has no manifest; resuming from the newest committed checkpoint", named)
        found = self.list(root=True)
        return found[-1] if found else None


def _committed(store: Store, prefix: str, uri: str, nested: bool = False) -> List[Checkpoint]:
    """The committed checkpoints under uri (prefix in store), and with nested in its attempt-<n>
    directories, oldest first (by epoch, then save)."""
    found = []
    start = prefix + "/" if prefix else ""
    for key in store.list(start):
        parts = key[len(start):].split("/")
        if parts[-1] != MANIFEST or len(parts) not in ((2, 3) if nested else (2,)) or not _NAME.fullmatch(parts[-2]):
            continue
        try:
            found.append(_checkpoint(_join_uri(uri, "/".join(parts[:-1])), store.get_bytes(key)))
        except (FileNotFoundError, ValueError):
            continue  # deleted meanwhile, or not a manifest of ours
    return sorted(found, key=lambda c: (c.epoch, c.n))


def _checkpoint(uri: str, manifest: bytes) -> Checkpoint:
    data = json.loads(manifest)
    return Checkpoint(uri=uri, epoch=int(data["epoch"]), n=int(data.get("n", 0)), world=int(data.get("world", 1)),
                      metrics=dict(data.get("metrics") or {}))


def _files(src: str) -> List[Tuple[str, str]]:
    """(key under the shard, local path) of src: a file by its name, a directory's files by their
    paths in it."""
    src = os.fspath(src)
    if not os.path.isdir(src):
        return [(os.path.basename(src), src)]
    found = []
    for directory, _, names in os.walk(src):
        for name in names:
            local = os.path.join(directory, name)
            found.append((os.path.relpath(local, src).replace(os.sep, "/"), local))
    return sorted(found)


def _world(env: Mapping[str, str]) -> int:
    try:
        return max(int(env.get("WORLD_SIZE", "1")), 1)
    except ValueError:
        return 1


def _join(prefix: str, name: str) -> str:
    return "%s/%s" % (prefix, name) if prefix else name


def _join_uri(uri: str, name: str) -> str:
    return uri.rstrip("/") + "/" + name


def _dump(data: dict) -> bytes:
    return (json.dumps(data, indent=1, sort_keys=True) + "\n").encode()
