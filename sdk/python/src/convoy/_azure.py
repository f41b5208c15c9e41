"""Checkpoints in an Azure Blob Storage container (az://), through the Blob service's REST API with
the standard library: the trainer image has no Azure client.

The account comes from AZURE_STORAGE_ACCOUNT, its endpoint from AZURE_STORAGE_BLOB_ENDPOINT (an
emulator such as Azurite: http://127.0.0.1:10000/<account>), else https://<account>.blob.core.windows.net;
AZURE_STORAGE_CONNECTION_STRING may give all of it. Credentials, first found: Azure Workload Identity
(AZURE_FEDERATED_TOKEN_FILE, AZURE_CLIENT_ID, AZURE_TENANT_ID, which its webhook sets for the job's
serviceAccountName: no key), an account key (AZURE_STORAGE_KEY, SharedKey) or a SAS
(AZURE_STORAGE_SAS_TOKEN). An object is written in one Put Blob: 5000 MiB at most."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET
from email.utils import formatdate
from typing import Any, Dict, List, Mapping, Optional

from ._http import HTTPStore, Token, urlopen

_VERSION = "2021-08-06"
_AUTHORITY = "https://login.microsoftonline.com/"
_FEDERATED = ("AZURE_FEDERATED_TOKEN_FILE", "AZURE_CLIENT_ID", "AZURE_TENANT_ID")


class AzureStore(HTTPStore):
    """The blobs of one container: put, get, list and delete by key (the blob's name)."""

    def __init__(self, container: str, env: Optional[Mapping[str, str]] = None):
        env = os.environ if env is None else env
        parts = _connection_string(env.get("AZURE_STORAGE_CONNECTION_STRING", ""))
        self.container = container
        self.account = env.get("AZURE_STORAGE_ACCOUNT") or parts.get("AccountName", "")
        if not self.account:
            raise ValueError("az://%s: no storage account: set spec.checkpoint.storage.azureStorageAccount "
                             "(AZURE_STORAGE_ACCOUNT)" % container)
        endpoint = env.get("AZURE_STORAGE_BLOB_ENDPOINT") or parts.get("BlobEndpoint", "")
        self.endpoint = (endpoint or "https://%s.blob.core.windows.net" % self.account).rstrip("/")
        self._key = env.get("AZURE_STORAGE_KEY") or parts.get("AccountKey", "")
        self._sas = (env.get("AZURE_STORAGE_SAS_TOKEN") or parts.get("SharedAccessSignature", "")).lstrip("?")
        federated = {name: env.get(name, "") for name in _FEDERATED}
        authority = (env.get("AZURE_AUTHORITY_HOST") or _AUTHORITY).rstrip("/") + "/"
        self._token = Token(lambda: _token_request(federated, authority),
                            "az://%s: Azure Workload Identity gave no token" % container) if all(federated.values()) else None

    def list(self, prefix: str) -> List[str]:
        """The keys that start with prefix, in lexicographic order."""
        keys: List[str] = []
        marker = ""
        while True:
            query = {"restype": "container", "comp": "list", "prefix": prefix}
            if marker:
                query["marker"] = marker
            with self._request("GET", self._container(), query=query) as response:
                page = ET.parse(response).getroot()
            keys.extend(name.text or "" for name in page.iter("Name"))
            marker = page.findtext("NextMarker") or ""
            if not marker:
                return keys

    def _put(self, key: str, body: Any, size: int) -> None:
        headers = {"x-ms-blob-type": "BlockBlob", "Content-Type": "application/octet-stream", "Content-Length": str(size)}
        self._request("PUT", self._blob(key), body, headers, key=key).close()

    def _get(self, key: str) -> Any:
        return self._request("GET", self._blob(key), key=key)

    def _delete(self, key: str) -> Any:
        return self._request("DELETE", self._blob(key), key=key)

    def _container(self) -> str:
        return "%s/%s" % (self.endpoint, urllib.parse.quote(self.container, safe=""))

    def _blob(self, key: str) -> str:
        return "%s/%s" % (self._container(), urllib.parse.quote(key, safe="/"))

    def _request(self, method: str, url: str, body: Any = None, headers: Optional[Dict[str, str]] = None,
                 query: Optional[Dict[str, str]] = None, key: str = "") -> Any:
        headers = dict(headers or {}, **{"x-ms-date": formatdate(usegmt=True), "x-ms-version": _VERSION})
        query = dict(query or {})
        if self._token is not None:
            headers["Authorization"] = "Bearer " + self._token.get()
        elif self._key:
            headers["Authorization"] = "SharedKey %s:%s" % (self.account, self._sign(method, url, headers, query))
        elif self._sas:
            query.update(urllib.parse.parse_qsl(self._sas))
        else:
            raise PermissionError("az://%s: no credentials: bind the job's serviceAccountName with Azure Workload "
                                  "Identity, or give AZURE_STORAGE_KEY or AZURE_STORAGE_SAS_TOKEN through "
                                  "spec.checkpoint.storage.credentialsSecretRef" % self.container)
        if query:
            url += "?" + urllib.parse.urlencode(query)
        return urlopen(urllib.request.Request(url, data=body, method=method, headers=headers), "az://%s/%s" % (self.container, key))

    def _sign(self, method: str, url: str, headers: Dict[str, str], query: Dict[str, str]) -> str:
        """The SharedKey signature of a request (learn.microsoft.com: Authorize with Shared Key)."""
        lower = {k.lower(): v for k, v in headers.items()}
        length = lower.get("content-length", "")
        standard = [lower.get(h, "") for h in ("content-encoding", "content-language")]
        standard += ["" if length == "0" else length]
        standard += [lower.get(h, "") for h in ("content-md5", "content-type", "date", "if-modified-since", "if-match",
                                                 "if-none-match", "if-unmodified-since", "range")]
        canonical = "".join("%s:%s\n" % (k, lower[k].strip()) for k in sorted(lower) if k.startswith("x-ms-"))
        resource = "/%s%s" % (self.account, urllib.parse.urlsplit(url).path)
        resource += "".join("\n%s:%s" % (k.lower(), query[k]) for k in sorted(query, key=str.lower))
        text = "\n".join([method] + standard) + "\n" + canonical + resource
        digest = hmac.new(base64.b64decode(self._key), text.encode("utf-8"), hashlib.sha256).digest()
        return base64.b64encode(digest).decode("ascii")


def _token_request(federated: Dict[str, str], authority: str) -> urllib.request.Request:
    """The request to Microsoft Entra ID for a token for Azure Storage, for the federated token Azure
    Workload Identity mounts (client credentials with a client assertion)."""
    with open(federated["AZURE_FEDERATED_TOKEN_FILE"], encoding="utf-8") as f:
        assertion = f.read().strip()
    form = urllib.parse.urlencode({
        "grant_type": "client_credentials", "client_id": federated["AZURE_CLIENT_ID"],
        "scope": "https://storage.azure.com/.default", "client_assertion": assertion,
        "client_assertion_type": "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
    }).encode("ascii")
    tenant = urllib.parse.quote(federated["AZURE_TENANT_ID"], safe="")
    return urllib.request.Request("%s%s/oauth2/v2.0/token" % (authority, tenant), data=form, method="POST")


def _connection_string(value: str) -> Dict[str, str]:
    """AZURE_STORAGE_CONNECTION_STRING's Key=Value; pairs."""
    parts = {}
    for item in value.split(";"):
        name, _, v = item.partition("=")
        if name.strip():
            parts[name.strip()] = v.strip()
    return parts
