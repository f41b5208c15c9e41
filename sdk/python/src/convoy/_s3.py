"""S3 and S3-compatible servers (MinIO, Ceph, SeaweedFS) through boto3 (Debian: python3-boto3),
with what the operator sets: AWS_ENDPOINT_URL (spec.checkpoint.storage.s3Endpoint), AWS_REGION, and
the credentials Secret's keys (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY), which boto3 reads itself.
A file larger than CONVOY_CHECKPOINT_PART_BYTES (default 64 MiB) is uploaded in parts of that size."""

from __future__ import annotations

from typing import List, Mapping

from ._objstore import Store, part_bytes


class S3Store(Store):
    def __init__(self, bucket: str, env: Mapping[str, str]):
        try:
            import boto3
            from boto3.s3.transfer import TransferConfig
            from botocore.config import Config
        except ImportError as e:
            raise ImportError("convoy: s3:// checkpoints need boto3: install python3-boto3 (Debian) or boto3 (pip)") from e
        self.bucket = bucket
        session = boto3.session.Session(
            aws_access_key_id=env.get("AWS_ACCESS_KEY_ID"), aws_secret_access_key=env.get("AWS_SECRET_ACCESS_KEY"),
            aws_session_token=env.get("AWS_SESSION_TOKEN"), region_name=env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or "us-east-1")
        # Path-style addressing: S3-compatible servers on a plain host name or address have no
        # bucket sub-domains.
        endpoint = env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL") or None
        config = Config(s3={"addressing_style": "path" if endpoint else "auto"}, retries={"max_attempts": 5, "mode": "standard"})
        self.client = session.client("s3", endpoint_url=endpoint, config=config)
        self._errors = self.client.exceptions
        size = part_bytes(env)
        self._transfer = TransferConfig(multipart_threshold=size + 1, multipart_chunksize=size)

    def put(self, key: str, src_path: str) -> None:
        self.client.upload_file(src_path, self.bucket, key, Config=self._transfer)

    def get(self, key: str, dst_path: str) -> None:
        try:
            self.client.download_file(self.bucket, key, dst_path)
        except Exception as e:
            raise _missing(e, key) from e

    def list(self, prefix: str) -> List[str]:
        keys: List[str] = []
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
            keys.extend(o["Key"] for o in page.get("Contents", ()))
        return sorted(keys)

    def delete(self, key: str) -> None:
        self.client.delete_object(Bucket=self.bucket, Key=key)

    def put_bytes(self, key: str, data: bytes) -> None:
        self.client.put_object(Bucket=self.bucket, Key=key, Body=data)

    def get_bytes(self, key: str) -> bytes:
        try:
            return self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        except Exception as e:
            raise _missing(e, key) from e


def _missing(e: Exception, key: str) -> Exception:
    """FileNotFoundError for a key that is not there (404, NoSuchKey), else e itself."""
    response = getattr(e, "response", None) or {}
    code = str(response.get("Error", {}).get("Code", ""))
    if code in ("404", "NoSuchKey", "NotFound"):
        return FileNotFoundError("s3 object %s is not there" % key)
    return e
