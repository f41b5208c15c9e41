"""Checkpoints in a Google Cloud Storage bucket (gs://), through the GCS JSON API with the standard
library: the trainer image has no Google client.

Credentials, none of them a static key: with STORAGE_EMULATOR_HOST (a GCS-compatible server such as
fake-gcs-server) none; otherwise an access token of the pod's Google service account from the
metadata server (GKE Workload Identity, or the node's account), at GCE_METADATA_HOST when set."""

from __future__ import annotations

import json
import os
import urllib.parse
import urllib.request
from typing import Any, Dict, List, Mapping, Optional

from ._http import HTTPStore, Token, urlopen

_API = "https://storage.googleapis.com"
_METADATA = "metadata.google.internal"
_TOKEN_PATH = "/computeMetadata/v1/instance/service-accounts/default/token"


class GCSStore(HTTPStore):
    """The objects of one bucket: put, get, list and delete by key (the object's name)."""

    def __init__(self, bucket: str, env: Optional[Mapping[str, str]] = None):
        env = os.environ if env is None else env
        self.bucket = bucket
        emulator = env.get("STORAGE_EMULATOR_HOST", "").strip().rstrip("/")
        if emulator and "://" not in emulator:
            emulator = "http://" + emulator
        self.endpoint = emulator or _API
        metadata = "http://" + (env.get("GCE_METADATA_HOST") or _METADATA) + _TOKEN_PATH
        self._token = None if emulator else Token(
            lambda: urllib.request.Request(metadata, headers={"Metadata-Flavor": "Google"}),
            "no access token for gs://%s from the metadata server (GKE Workload Identity: the job's "
            "serviceAccountName bound to a Google service account)" % bucket)

    def list(self, prefix: str) -> List[str]:
        """The keys that start with prefix, in lexicographic order."""
        keys: List[str] = []
        token = ""
        while True:
            query = {"prefix": prefix, "fields": "items(name),nextPageToken"}
            if token:
                query["pageToken"] = token
            url = "%s/storage/v1/b/%s/o?%s" % (self.endpoint, _quote(self.bucket), urllib.parse.urlencode(query))
            with self._request("GET", url) as response:
                page = json.load(response)
            keys.extend(item["name"] for item in page.get("items", []))
            token = page.get("nextPageToken", "")
            if not token:
                return keys

    def _put(self, key: str, body: Any, size: int) -> None:
        url = "%s/upload/storage/v1/b/%s/o?%s" % (self.endpoint, _quote(self.bucket),
                                                urllib.parse.urlencode({"uploadType": "media", "name": key}))
        headers = {"Content-Type": "application/octet-stream", "Content-Length": str(size)}
        self._request("POST", url, body, headers, key=key).close()

    def _get(self, key: str) -> Any:
        return self._request("GET", self._object(key) + "?alt=media", key=key)

    def _delete(self, key: str) -> Any:
        return self._request("DELETE", self._object(key), key=key)

    def _object(self, key: str) -> str:
        return "%s/storage/v1/b/%s/o/%s" % (self.endpoint, _quote(self.bucket), _quote(key))

    def _request(self, method: str, url: str, body: Any = None, headers: Optional[Dict[str, str]] = None, key: str = "") -> Any:
        headers = dict(headers or {})
        if self._token is not None:
            headers["Authorization"] = "Bearer " + self._token.get()
        return urlopen(urllib.request.Request(url, data=body, method=method, headers=headers), "gs://%s/%s" % (self.bucket, key))


def _quote(name: str) -> str:
    return urllib.parse.quote(name, safe="")
