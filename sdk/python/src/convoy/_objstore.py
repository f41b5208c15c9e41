"""Object storage behind one interface, Store, for the checkpoint calls (_objcheckpoint.py): the
operator hands object storage to the pods as a URI, s3://bucket/prefix, gs://bucket/prefix or
az://container/prefix (operator/pkg/builder/checkpoint.go, CheckpointURI), with the credentials as
the vendor's own environment variables. Each vendor's client is imported only when its URI is
used, so that the SDK keeps working without them on volumes."""

from __future__ import annotations

import os
import shutil
from typing import List, Mapping, Optional, Tuple


class Store:
    """Objects of one bucket (or container), named by keys with '/' between segments."""

    def put(self, key: str, src_path: str) -> None:
        """Uploads the file at src_path as key, replacing it."""
        raise NotImplementedError

    def get(self, key: str, dst_path: str) -> None:
        """Downloads key to the file dst_path; FileNotFoundError when there is no such object."""
        raise NotImplementedError

    def list(self, prefix: str) -> List[str]:
        """The keys under prefix, sorted."""
        raise NotImplementedError

    def delete(self, key: str) -> None:
        """Deletes key; nothing when it is not there."""
        raise NotImplementedError

    def put_bytes(self, key: str, data: bytes) -> None:
        raise NotImplementedError

    def get_bytes(self, key: str) -> bytes:
        """The object's bytes; FileNotFoundError when there is no such object."""
        raise NotImplementedError


class LocalStore(Store):
    """A directory as a Store (pvc and nfs storage, mounted), so that the checkpoint calls are the
    same on a volume as on object storage."""

    def __init__(self, root: str):
        self.root = root

    def _path(self, key: str) -> str:
        parts = [p for p in key.split("/") if p]
        if any(p in (".", "..") for p in parts):
            raise ValueError("key %r has a '.' or '..' segment" % key)
        return os.path.join(self.root, *parts)

    def put(self, key: str, src_path: str) -> None:
        dst = self._path(key)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copyfile(src_path, dst + ".tmp")
        os.replace(dst + ".tmp", dst)

    def get(self, key: str, dst_path: str) -> None:
        shutil.copyfile(self._path(key), dst_path)

    def list(self, prefix: str) -> List[str]:
        base = self._path(prefix) if prefix.strip("/") else self.root
        keys = []
        for directory, _, files in os.walk(base):
            for name in files:
                if not name.endswith(".tmp"):
                    keys.append(os.path.relpath(os.path.join(directory, name), self.root).replace(os.sep, "/"))
        return sorted(keys)

    def delete(self, key: str) -> None:
        try:
            os.remove(self._path(key))
        except FileNotFoundError:
            pass

    def put_bytes(self, key: str, data: bytes) -> None:
        dst = self._path(key)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        with open(dst + ".tmp", "wb") as f:
            f.write(data)
        os.replace(dst + ".tmp", dst)

    def get_bytes(self, key: str) -> bytes:
        with open(self._path(key), "rb") as f:
            return f.read()


def part_bytes(env: Mapping[str, str]) -> int:
    """The size of a multipart upload's parts on S3, and the size above which a file is uploaded in
    parts: CONVOY_CHECKPOINT_PART_BYTES, 64 MiB by default."""
    return int(env.get("CONVOY_CHECKPOINT_PART_BYTES") or 64 << 20)


def split_uri(uri: str) -> Tuple[str, str, str]:
    """(scheme, bucket, prefix) of scheme://bucket/prefix; the prefix without a trailing '/'."""
    scheme, sep, rest = uri.partition("://")
    bucket, _, prefix = rest.partition("/")
    if not sep or not bucket:
        raise ValueError("%r is not an object storage URI of the form scheme://bucket/prefix" % uri)
    return scheme, bucket, prefix.strip("/")


def store_for(uri: str, env: Optional[Mapping[str, str]] = None) -> Tuple[Store, str]:
    """The Store that holds uri and the key prefix uri names in it (with CONVOY_CHECKPOINT_PRESIGN set,
    s3://, gs:// and az:// through URLs the operator pre-signs): s3://bucket/prefix (boto3),
    gs://bucket/prefix (google-cloud-storage), az:// or azure://container/prefix (azure-storage-blob),
    and a local path or file:// URI (a directory, LocalStore). ValueError for another scheme,
    ImportError naming the package when the vendor's client is not installed."""
    env = os.environ if env is None else env
    if uri.startswith("file://") or "://" not in uri:
        path = uri[len("file://"):] if uri.startswith("file://") else uri
        return LocalStore(os.sep), os.path.abspath(path).strip(os.sep).replace(os.sep, "/")
    scheme, bucket, prefix = split_uri(uri)
    if scheme == "s3" and env.get("CONVOY_CHECKPOINT_PRESIGN"):
        from ._s3presigned import PresignedS3Store
        return PresignedS3Store(bucket, env), prefix
    if scheme == "s3":
        from ._s3 import S3Store
        return S3Store(bucket, env), prefix
    if scheme == "gs" and env.get("CONVOY_CHECKPOINT_PRESIGN"):
        from ._s3presigned import PresignedGCSStore
        return PresignedGCSStore(bucket, env), prefix
    if scheme == "gs":
        return _vendor("_gcs", "GCSStore", "google-cloud-storage (Debian: python3-google-cloud-storage)")(bucket, env), prefix
    if scheme in ("az", "azure") and env.get("CONVOY_CHECKPOINT_PRESIGN"):
        from ._s3presigned import PresignedAzureStore
        return PresignedAzureStore(bucket, env), prefix
    if scheme in ("az", "azure"):
        return _vendor("_azure", "AzureStore", "azure-storage-blob (Debian: python3-azure-storage)")(bucket, env), prefix
    raise ValueError("%r: the SDK reads and writes s3://, gs:// and az:// object storage and local paths, not %s://" % (uri, scheme))


def _vendor(module: str, name: str, package: str):
    import importlib
    try:
        return getattr(importlib.import_module("convoy." + module), name)
    except ImportError as e:
        raise ImportError("convoy: %s storage needs convoy.%s and %s: %s" % (name, module, package, e)) from e
