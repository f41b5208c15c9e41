"""What the object stores that speak HTTP with the standard library share (_gcs, _azure): files put
and got whole in one request each, HTTP errors as the OSError a file operation raises, and access
tokens kept until shortly before they expire."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
import urllib.error
import urllib.request
from typing import Any, Callable, Tuple

TIMEOUT = 60.0


class HTTPStore:
    """put, put_bytes, get, get_bytes and delete on top of a subclass's _put(key, body, size),
    _get(key) and _delete(key), each one request (the latter two return the open response)."""

    def put(self, key: str, src_path: str) -> None:
        with open(src_path, "rb") as f:
            self._put(key, f, os.fstat(f.fileno()).st_size)

    def put_bytes(self, key: str, data: bytes) -> None:
        self._put(key, data, len(data))

    def get(self, key: str, dst_path: str) -> None:
        """Writes the object to dst_path, whole or not at all."""
        with self._get(key) as response:
            with tempfile.NamedTemporaryFile(dir=os.path.dirname(os.path.abspath(dst_path)), delete=False) as f:
                try:
                    shutil.copyfileobj(response, f, 1 << 20)
                except BaseException:
                    os.unlink(f.name)
                    raise
        os.replace(f.name, dst_path)

    def get_bytes(self, key: str) -> bytes:
        with self._get(key) as response:
            return response.read()

    def delete(self, key: str) -> None:
        """Deletes the object; one that is not there is no error."""
        try:
            self._delete(key).close()
        except FileNotFoundError:
            pass

    def _put(self, key: str, body: Any, size: int) -> None:
        raise NotImplementedError

    def _get(self, key: str) -> Any:
        raise NotImplementedError

    def _delete(self, key: str) -> Any:
        raise NotImplementedError


def urlopen(request: urllib.request.Request, what: str) -> Any:
    """The response to request; an HTTP error as OSError: FileNotFoundError for 404,
    PermissionError for 401 and 403, what naming the object."""
    try:
        return urllib.request.urlopen(request, timeout=TIMEOUT)
    except urllib.error.HTTPError as e:
        try:
            detail = " ".join(e.read().decode("utf-8", "replace")[:300].split())
        except OSError:
            detail = ""
        message = "%s: HTTP %d %s %s" % (what, e.code, e.reason, detail)
        if e.code == 404:
            raise FileNotFoundError(message) from None
        if e.code in (401, 403):
            raise PermissionError(message) from None
        raise OSError(message) from None


class Token:
    """An access token from fetch(), a request answering {"access_token", "expires_in"}, kept until a
    minute before it expires. A failed fetch is a PermissionError saying why."""

    def __init__(self, fetch: Callable[[], urllib.request.Request], refused: str):
        self._fetch, self._refused = fetch, refused
        self._value: Tuple[str, float] = ("", 0.0)

    def get(self) -> str:
        value, renew = self._value
        if value and time.monotonic() < renew:
            return value
        request = self._fetch()
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
                answer = json.load(response)
        except (OSError, ValueError) as e:
            raise PermissionError("%s (%s): %s" % (self._refused, request.full_url, e)) from None
        self._value = (answer["access_token"], time.monotonic() + max(float(answer.get("expires_in", 300)) - 60, 0))
        return self._value[0]
