"""Object storage without credentials in the pod (spec.checkpoint.storage.s3Access, gcsAccess or
azureAccess presigned, which sets CONVOY_CHECKPOINT_PRESIGN): for each request the store asks the
operator's progress endpoint, POST $CONVOY_PROGRESS_URL/presign with the pod's projected token, for a
URL the operator signed for that one operation (S3: SigV4; GCS: a V4 signed URL; Azure: a SAS of that
one blob), and sends it with urllib. The operator signs only keys under the job's prefix (writes: the
current attempt's directory), so another job's key is a PermissionError. On S3 a file larger than
CONVOY_CHECKPOINT_PART_BYTES (default 64 MiB) is uploaded in parts of that size, each on its own
signed URL (a single PUT takes 5 GiB at most). On GCS and Azure, which have no signed URL for a
listing of one prefix, the operator lists the prefix itself and answers the keys."""

from __future__ import annotations

import json
import os
import shutil
import ssl
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET
from typing import List, Mapping, Optional

from ._objstore import Store, part_bytes

_TIMEOUT = 60


class PresignedS3Store(Store):
    scheme = "s3"
    # Headers a Put needs besides Content-Length.
    put_headers: Mapping[str, str] = {}
    multipart = True

    def __init__(self, bucket: str, env: Mapping[str, str]):
        self.bucket = bucket
        self.url = (env.get("CONVOY_PROGRESS_URL") or "").rstrip("/")
        if not self.url:
            raise ValueError("convoy: CONVOY_CHECKPOINT_PRESIGN is set but CONVOY_PROGRESS_URL is not: pre-signed "
                             "URLs come from the operator's progress endpoint")
        self.env = env
        self.part_bytes = part_bytes(env)

    def _sign(self, op: str, key: str, token: str = "", **more) -> dict:
        headers = {"Content-Type": "application/json"}
        token_file = self.env.get("CONVOY_PROGRESS_TOKEN_FILE")
        if token_file:
            with open(token_file, encoding="utf-8") as f:  # re-read: the kubelet rotates it
                headers["Authorization"] = "Bearer " + f.read().strip()
        body = {"op": op, "key": key}
        if token:
            body["continuationToken"] = token
        body.update(more)
        req = urllib.request.Request(self.url + "/presign", data=json.dumps(body).encode(), headers=headers, method="POST")
        context = ssl.create_default_context(cafile=self.env.get("CONVOY_PROGRESS_CA_FILE") or None) if self.url.startswith("https:") else None
        uri = "%s://%s/%s" % (self.scheme, self.bucket, key)
        try:
            with urllib.request.urlopen(req, timeout=_TIMEOUT, context=context) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as e:
            message = e.read(4096).decode("utf-8", "replace").strip()
            if e.code == 403:
                raise PermissionError("%s: %s" % (uri, message)) from None
            raise OSError("convoy: pre-signing %s %s: %d %s" % (op, uri, e.code, message)) from None

    def _send(self, op: str, key: str, data=None, headers: Optional[dict] = None, token: str = "", **more):
        reply = self._sign(op, key, token, **more)
        method = reply["method"]
        req = urllib.request.Request(reply["url"], data=data, headers=headers or {}, method=method)
        try:
            return urllib.request.urlopen(req, timeout=_TIMEOUT)
        except urllib.error.HTTPError as e:
            if e.code == 404 and op != "put":
                raise FileNotFoundError("%s://%s/%s is not there" % (self.scheme, self.bucket, key)) from None
            raise OSError("convoy: %s %s://%s/%s: %d %s" % (method, self.scheme, self.bucket, key, e.code,
                                                           e.read(4096).decode("utf-8", "replace"))) from None

    def put(self, key: str, src_path: str) -> None:
        if self.multipart and os.path.getsize(src_path) > self.part_bytes:
            return self._put_parts(key, src_path)
        with open(src_path, "rb") as f:
            self._send("put", key, f, dict(self.put_headers, **{"Content-Length": str(os.fstat(f.fileno()).st_size)})).close()

    def _put_parts(self, key: str, src_path: str) -> None:
        """A multipart upload: create, each part, complete; aborted on any error."""
        with self._send("create-multipart", key) as resp:
            upload = ET.fromstring(resp.read()).findtext("{*}UploadId") or ""
        try:
            parts = []
            with open(src_path, "rb") as f:
                for number, chunk in enumerate(iter(lambda: f.read(self.part_bytes), b""), 1):
                    with self._send("upload-part", key, chunk, {"Content-Length": str(len(chunk))}, uploadId=upload, partNumber=number) as resp:
                        parts.append("<Part><PartNumber>%d</PartNumber><ETag>%s</ETag></Part>" % (number, resp.headers["ETag"]))
            body = ("<CompleteMultipartUpload>%s</CompleteMultipartUpload>" % "".join(parts)).encode()
            with self._send("complete-multipart", key, body, {"Content-Length": str(len(body))}, uploadId=upload) as resp:
                answer = resp.read()  # S3 may answer 200 with an error
            if b"<Error>" in answer:
                raise OSError("convoy: completing the upload of s3://%s/%s: %s" % (self.bucket, key, answer[:4096].decode("utf-8", "replace")))
        except BaseException:
            try:
                self._send("abort-multipart", key, uploadId=upload).close()
            except Exception:
                pass  # the first error says more; a lifecycle rule removes what is left
            raise

    def get(self, key: str, dst_path: str) -> None:
        with self._send("get", key) as resp, open(dst_path, "wb") as f:
            shutil.copyfileobj(resp, f)

    def list(self, prefix: str) -> List[str]:
        keys: List[str] = []
        token = ""
        while True:
            with self._send("list", prefix, token=token) as resp:
                root = ET.fromstring(resp.read())
            text = {el.tag.rsplit("}", 1)[-1]: el.text or "" for el in root}
            keys.extend(el.text or "" for el in root.iter() if el.tag.endswith("}Key") or el.tag == "Key")
            token = text.get("NextContinuationToken", "")
            if text.get("IsTruncated") != "true" or not token:
                return sorted(keys)

    def delete(self, key: str) -> None:
        try:
            self._send("delete", key).close()
        except FileNotFoundError:
            pass

    def put_bytes(self, key: str, data: bytes) -> None:
        self._send("put", key, data, dict(self.put_headers, **{"Content-Length": str(len(data))})).close()

    def get_bytes(self, key: str) -> bytes:
        with self._send("get", key) as resp:
            return resp.read()


class PresignedAzureStore(PresignedS3Store):
    """The blobs of one container, each request with a SAS the operator signed for that blob."""

    scheme = "az"
    put_headers = {"x-ms-blob-type": "BlockBlob", "Content-Type": "application/octet-stream"}
    multipart = False  # one Put Blob, as AzureStore: 5000 MiB at most

    def list(self, prefix: str) -> List[str]:
        keys: List[str] = []
        token = ""
        while True:
            reply = self._sign("list", prefix, token)
            keys.extend(reply.get("keys") or [])
            token = reply.get("continuationToken", "")
            if not token:
                return sorted(keys)


class PresignedGCSStore(PresignedAzureStore):
    """The objects of one GCS bucket, each request on a V4 URL the operator signed for that object."""

    scheme = "gs"
    put_headers = {"Content-Type": "application/octet-stream"}
    multipart = False  # one PUT: 5 TiB at most
