"""The HTTP side of the client: requests with the token, the server's
errors as exceptions, and requests refused with 429 sent again."""

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Dict, Optional

from .errors import AuthError, CordonError, NotFound

API = "/v1"
_MAX_RETRIES = 8
_MAX_WAIT = 10.0


def _error(status: int, body: bytes) -> CordonError:
    try:
        message = json.loads(body.decode("utf-8")).get("error") or ""
    except (ValueError, AttributeError):
        message = ""
    if not message:
        message = body.decode("utf-8", "replace").strip()
    message = "cordon serve: %d: %s" % (status, message)
    if status in (401, 403):
        return AuthError(message, status)
    if status == 404:
        return NotFound(message, status)
    return CordonError(message, status)


def _retry_after(value: Optional[str]) -> float:
    try:
        n = int((value or "").strip())
    except ValueError:
        return 1.0
    return 1.0 if n < 1 else min(float(n), _MAX_WAIT)


class Connection:
    """One cordon serve at ``url`` (http://HOST:PORT) with ``token``."""

    def __init__(self, url: str, token: Optional[str], timeout: Optional[float] = 60.0) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout

    def open(
        self,
        method: str,
        path: str,
        body: Optional[bytes] = None,
        content_type: Optional[str] = None,
        query: Optional[Dict[str, str]] = None,
        timeout: Any = "default",
    ) -> Any:
        """Sends a request and returns the response, whose status is a
        success; the server's refusal is raised. ``timeout`` None waits as
        long as the answer takes (a command's output)."""
        url = self.url + API + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        headers = {}
        if self.token:
            headers["Authorization"] = "Bearer " + self.token
        if content_type:
            headers["Content-Type"] = content_type
        wait = self.timeout if timeout == "default" else timeout
        for attempt in range(_MAX_RETRIES + 1):
            req = urllib.request.Request(url, data=body, headers=headers, method=method)
            try:
                return urllib.request.urlopen(req, timeout=wait)
            except urllib.error.HTTPError as e:
                data = e.read(1 << 20)
                retry = e.headers.get("Retry-After") if e.headers else None
                e.close()
                if e.code == 429 and attempt < _MAX_RETRIES:
                    # Refused before anything was done: sent again once the
                    # server says.
                    time.sleep(_retry_after(retry))
                    continue
                raise _error(e.code, data) from None
            except urllib.error.URLError as e:
                raise CordonError("cordon serve at %s: %s" % (self.url, e.reason)) from None
        raise CordonError("cordon serve: too many requests")  # not reached

    def call(self, method: str, path: str, payload: Any = None, query: Optional[Dict[str, str]] = None) -> Any:
        """Sends payload as JSON (when not None) and returns the decoded
        answer."""
        body = None if payload is None else json.dumps(payload).encode("utf-8")
        with self.open(method, path, body, "application/json", query) as resp:
            data = resp.read()
        try:
            return json.loads(data.decode("utf-8"))
        except ValueError as e:
            raise CordonError("cordon serve: reading the answer to %s %s: %s" % (method, path, e)) from None


def sandbox_path(sandbox_id: str, rest: str = "") -> str:
    return "/sandboxes/" + urllib.parse.quote(sandbox_id, safe="") + rest
